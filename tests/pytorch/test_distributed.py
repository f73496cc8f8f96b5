"""Node splitting across ranks, with RANK/WORLD_SIZE and with a real gloo process group."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = str(Path(__file__).with_name("dist_worker.py"))
ROOT = str(Path(__file__).resolve().parents[2])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def _check_partition(outputs: list[dict[str, object]], keys: list[str]) -> None:
    per_rank = {o["rank"]: o["keys"] for o in outputs}
    assert sorted(per_rank) == [0, 1]
    assert per_rank[0] and per_rank[1]
    assert not set(per_rank[0]) & set(per_rank[1])
    assert sorted(per_rank[0] + per_rank[1]) == sorted(keys)


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, WORKER, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(proc: subprocess.Popen[str]) -> dict[str, object]:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_rank_env_split(shards: dict[str, object]) -> None:
    procs = [
        _start(["env", shards["pattern"]], _env(RANK=str(r), WORLD_SIZE="2")) for r in range(2)
    ]
    _check_partition([_result(p) for p in procs], shards["keys"])


@pytest.mark.slow
def test_default_nodesplitter_refuses_multi_rank(shards: dict[str, object]) -> None:
    proc = _start(["single", shards["pattern"]], _env(RANK="1", WORLD_SIZE="2"))
    _, err = proc.communicate(timeout=240)
    assert proc.returncode != 0
    assert "nodesplitter=wds.split_by_node" in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_gloo_process_group_split(shards: dict[str, object]) -> None:
    port = str(_free_port())
    procs = [
        _start(["gloo", shards["pattern"], str(r), "2", port], _env(MASTER_ADDR="127.0.0.1"))
        for r in range(2)
    ]
    _check_partition([_result(p) for p in procs], shards["keys"])
