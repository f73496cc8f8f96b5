"""examples/sagemaker/train.py runs unchanged in File, FastFile and Pipe mode (subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FakeOptML, PipeWriter, write_shards

pytest.importorskip("torch")

TRAIN = Path(__file__).resolve().parents[2] / "examples" / "sagemaker" / "train.py"
NSHARDS, PER_SHARD = 4, 12


def _run(optml: FakeOptML, *args: str) -> list[dict[str, float]]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SM_", "WDS_CLOUD_SM_", "SAGEMAKER_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    }
    env["WDS_CLOUD_SM_ROOT"] = str(optml.root)
    env["WDS_CLOUD_SM_PIPE_TIMEOUT"] = "60"
    proc = subprocess.run(
        [sys.executable, str(TRAIN), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (optml.root / "model" / "model.pt").is_file()
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _expect_full_epochs(reports: list[dict[str, float]], epochs: int) -> None:
    total = NSHARDS * PER_SHARD
    assert [r["epoch"] for r in reports] == list(range(epochs))
    for r in reports:
        assert (r["samples"], r["keys"]) == (total, total)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["File", "FastFile"])
def test_train_file_modes(optml: FakeOptML, mode: str) -> None:
    write_shards(optml.add_channel("train", mode), NSHARDS, PER_SHARD)
    optml.write_config(hosts=["algo-1"], current="algo-1")
    _expect_full_epochs(_run(optml, "--epochs", "2", "--batch-size", "5", "--workers", "2"), 2)


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "1"])
def test_train_pipe_mode_two_epochs(
    optml: FakeOptML, tmp_path: Path, pipe_writer: type[PipeWriter], workers: str
) -> None:
    optml.add_channel("train", "Pipe")
    optml.write_config(hosts=["algo-1"], current="algo-1")
    shards = write_shards(tmp_path / "src", NSHARDS, PER_SHARD)
    writer = pipe_writer(optml.data, "train", 2, shards)
    reports = _run(optml, "--epochs", "2", "--batch-size", "5", "--workers", workers)
    _expect_full_epochs(reports, 2)
    assert writer.wait()[0] == 0
