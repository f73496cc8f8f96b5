"""Spot training with examples/sagemaker/train.py: SIGKILL the real script mid-epoch (twice),
restart it on the same ``/opt/ml`` root, and check that it continued from its checkpoint (model
and loader state) and that every sample of every epoch was trained on exactly once, counting
for each killed run only what it delivered up to its last checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from .conftest import FakeOptML, sample_keys, write_shards

torch = pytest.importorskip("torch")

TRAIN = Path(__file__).resolve().parents[2] / "examples" / "sagemaker" / "train.py"
NSHARDS, PER_SHARD, BATCH, EVERY = 8, 100, 10, 7


def _env(optml: FakeOptML, log: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SM_", "WDS_CLOUD_SM_", "SAGEMAKER_"))
        and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    }
    env["WDS_CLOUD_SM_ROOT"] = str(optml.root)
    env["WDS_CLOUD_EXAMPLE_KEY_LOG"] = str(log)
    return env


def _start(env: dict[str, str], hold: tuple[int, int] | None = None) -> subprocess.Popen[str]:
    """Start the example; with ``hold`` it stops after that (epoch, step) until it is killed, so
    the kill lands there however slow or fast the machine is."""
    args = ["--epochs", "2", "--batch-size", str(BATCH), "--workers", "2", "--shuffle", "30"]
    if hold is not None:
        env = {**env, "WDS_CLOUD_EXAMPLE_HOLD_AT": f"{hold[0]}:{hold[1]}"}
    return subprocess.Popen(
        [sys.executable, str(TRAIN), *args, "--checkpoint-every", str(EVERY)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the DataLoader workers die with it
    )


def _lines(log: Path, pid: int) -> list[tuple[int, int, str]]:
    """``(epoch, step, key)`` of every sample process ``pid`` logged."""
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        p, epoch, step, key = line.split()
        if int(p) == pid:
            out.append((int(epoch), int(step), key))
    return out


def _kill_when(proc: subprocess.Popen[str], log: Path, epoch: int, step: int) -> None:
    """SIGKILL the run once it logged ``step`` of ``epoch`` (polling the key log)."""
    deadline = time.monotonic() + 120
    while not any((e, s) >= (epoch, step) for e, s, _ in _lines(log, proc.pid)):
        if proc.poll() is not None:
            out, err = proc.communicate()
            logged = _lines(log, proc.pid)
            raise AssertionError(
                f"the run (exit {proc.returncode}) ended before the kill at {(epoch, step)}; it "
                f"logged {len(logged)} samples, last {logged[-1:]}; stdout {out[-1000:]!r}; "
                f"stderr {err[-2000:]!r}"
            )
        assert time.monotonic() < deadline, "the run did not get there in time"
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def _checkpoint(optml: FakeOptML) -> tuple[int, int]:
    saved = torch.load(optml.root / "checkpoints" / "checkpoint.pt", weights_only=True)
    return saved["epoch"], saved["step"]


@pytest.mark.slow
def test_killed_twice_every_sample_once(optml: FakeOptML, tmp_path: Path) -> None:
    write_shards(optml.add_channel("train", "File"), NSHARDS, PER_SHARD)
    optml.write_config(hosts=["algo-1"], current="algo-1")
    log = tmp_path / "keys.log"
    env = _env(optml, log)
    kept: list[tuple[int, int, str]] = []  # what each run delivered up to its last checkpoint
    resumed_at: list[tuple[int, int]] = []
    for epoch, step in [(0, 25), (1, 30)]:
        proc = _start(env, hold=(epoch, step))
        if resumed_at:  # the restart continued from the checkpoint the last kill left
            first = proc.stdout.readline()  # type: ignore[union-attr]
            assert json.loads(first)["resumed"]["epoch"] == resumed_at[-1][0]
            assert json.loads(first)["resumed"]["step"] == resumed_at[-1][1]
        _kill_when(proc, log, epoch, step)
        saved = _checkpoint(optml)
        assert saved[1] > 0 and saved[1] % EVERY == 0  # a checkpoint inside an epoch
        kept += [x for x in _lines(log, proc.pid) if x[:2] <= saved]
        resumed_at.append(saved)
    proc = _start(env)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    reports = [json.loads(line) for line in out.splitlines()]
    assert reports[0]["resumed"] == {
        "epoch": resumed_at[-1][0],
        "step": resumed_at[-1][1],
        "samples": resumed_at[-1][1] * BATCH,
    }
    kept += _lines(log, proc.pid)
    expected = sample_keys(NSHARDS, PER_SHARD)
    for epoch in (0, 1):
        counts = Counter(k for e, _, k in kept if e == epoch)
        assert sorted(counts) == sorted(expected), f"epoch {epoch}: keys lost or foreign"
        assert set(counts.values()) == {1}, f"epoch {epoch}: {counts.most_common(3)}"
    final = [r for r in reports if "epoch" in r and "resumed" not in r]
    assert [r["epoch"] for r in final] == [1]  # the last run finished epoch 1 only
    assert final[0]["samples"] == NSHARDS * PER_SHARD
    assert final[0]["resumed_from"] == resumed_at[-1][1] * BATCH
    assert (optml.root / "model" / "model.pt").is_file()
    assert not list((optml.root / "checkpoints").glob("*.tmp*"))
