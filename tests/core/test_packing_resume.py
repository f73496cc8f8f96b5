"""Resuming pipelines with ``pack`` and ``group_by``: the samples held in their buffers are read
again, so a resumed run delivers exactly what the uninterrupted run delivers, in the same order
(in process through JSON states, and after SIGKILLs of a real subprocess)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.core import packing_loop
from tests.resume.helpers import run_interrupted

ROOT = Path(__file__).resolve().parents[2]
LOOP = Path(packing_loop.__file__)


def write_token_shards(root: Path, nshards: int = 6, per_shard: int = 25) -> list[str]:
    """Shards of samples with ``tok`` (1 to 60 bytes) and ``res`` (one of 3 buckets)."""
    rng = random.Random(11)
    urls = []
    for s in range(nshards):
        buf = BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for i in range(per_shard):
                key = f"s{s}/k{i:03d}"
                for ext, data in (
                    ("tok", bytes(rng.randint(1, 60))),
                    ("res", str(rng.choice([256, 512, 1024])).encode()),
                ):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, BytesIO(data))
        path = root / f"tok-{s:02d}.tar"
        path.write_bytes(buf.getvalue())
        urls.append(str(path))
    return urls


def keys(item: Any) -> str:
    return ",".join(item["keys"])


@pytest.mark.parametrize("mode", ["pack", "group"])
def test_resume_in_process_equals_the_uninterrupted_run(tmp_path: Path, mode: str) -> None:
    urls = write_token_shards(tmp_path)
    full = [keys(item) for item in packing_loop.dataset(mode, urls)]
    assert len({k for line in full for k in line.split(",")}) == 150  # every sample, once
    assert sum(len(line.split(",")) for line in full) == 150
    for seed in range(4):
        rng = random.Random(seed)
        stops = [rng.randint(1, 12) for _ in range(3)]
        delivered, _ = run_interrupted(
            lambda: packing_loop.dataset(mode, urls), stops, lambda item: [keys(item)]
        )
        assert delivered == full, stops


def test_state_names_buffered_samples_as_not_delivered(tmp_path: Path) -> None:
    urls = write_token_shards(tmp_path, nshards=1, per_shard=40)
    ds = packing_loop.dataset("pack", urls)
    it = iter(ds)
    first = next(it)
    state = ds.state_dict()
    # one pack delivered, a buffer of 12 (minus that pack) held: the state is the pack's
    # samples only, as extents of the one open shard; the rest is read again
    assert state["delivered"] == len(first["keys"])
    assert state["done"] == []
    assert list(state["open"]) == urls


def run_killed(mode: str, urls: list[str], tmp: Path, kills: list[int]) -> list[str]:
    """Run the loop, SIGKILL it at each step of ``kills`` (counted from its restart), then let
    the last run finish; the lines of its log."""
    tmp.mkdir()
    ckpt, log = tmp / f"{mode}.ckpt", tmp / f"{mode}.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for kill in [*kills, None]:
        cmd = [sys.executable, str(LOOP), mode, json.dumps(urls), str(ckpt), str(log)]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        assert proc.stdout is not None
        killed = False
        for line in proc.stdout:
            if kill is not None and line.strip() == f"step {kill}":
                os.kill(proc.pid, signal.SIGKILL)
                killed = True
                break
        proc.wait(timeout=60)
        err = proc.stderr.read() if proc.stderr else ""
        proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
        if kill is None or not killed:
            assert proc.returncode == 0, err
        else:
            assert proc.returncode == -signal.SIGKILL
    return log.read_text().splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["pack", "group"])
def test_sigkill_mid_epoch_resumes_to_the_uninterrupted_output(tmp_path: Path, mode: str) -> None:
    urls = write_token_shards(tmp_path)
    clean = run_killed(mode, urls, tmp_path / "clean", [])
    assert sum(len(line.split(",")) for line in clean) == 150
    rng = random.Random(mode)
    kills = [rng.randint(2, 9) for _ in range(3)]
    assert run_killed(mode, urls, tmp_path / "killed", kills) == clean, kills


def loader(mode: str, urls: list[str]) -> Any:
    """Packs made in 2 DataLoader workers (``pack``), or groups made in the main process from
    the samples the workers send (``group``)."""
    ds = wds.WebDataset(urls, shardshuffle=True, seed=17)
    if mode == "pack":
        ds = ds.pack(100, length=packing_loop.tokens, buffer=12, pack_fn=packing_loop.concat)
        return wds.WebLoader(ds, num_workers=2, batch_size=None)
    return (
        wds.WebLoader(ds.batched(4, collation_fn=None), num_workers=2, batch_size=None)
        .unlisted()
        .group_by(packing_loop.bucket, 4, buffer=10)
    )


def key_list(item: Any) -> list[str]:
    return list(item["keys"]) if isinstance(item, dict) else [s["__key__"] for s in item]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["pack", "group"])
def test_dataloader_workers_deliver_every_sample_once(tmp_path: Path, mode: str) -> None:
    pytest.importorskip("torch")
    urls = write_token_shards(tmp_path)
    delivered, _ = run_interrupted(lambda: loader(mode, urls), [3, 5, 4], key_list)
    assert sorted(delivered) == sorted(f"s{s}/k{i:03d}" for s in range(6) for i in range(25))
