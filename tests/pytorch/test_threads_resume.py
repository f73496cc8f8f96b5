"""executor="threads": exact resume after SIGKILL of a real training process.

``threads_train.py`` runs two epochs of ``make_loader`` and checkpoints every 3 steps; it is
killed with SIGKILL at given steps and restarted from its checkpoint: every sample is
delivered exactly once per epoch (or each ``epoch_size`` window holds distinct samples, and
exactly ``epoch_size`` of them). Run without kills, the loop delivers the same sequence on
both executors.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.resume.helpers import write_shards

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("threads_train.py")


def _run_killed(
    urls: list[str], tmp: Path, kills: list[int], executor: str, epoch_size: int
) -> list[str]:
    """Start the loop, SIGKILL it at each step of ``kills`` (counted from its restart), let the
    last run finish; the keys of the log."""
    tmp.mkdir()
    ckpt, log = tmp / "ckpt.json", tmp / "delivered.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [json.dumps(urls), str(ckpt), str(log), executor, str(epoch_size)]
    for kill in [*kills, None]:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,  # its own process group: workers die with it
        )
        assert proc.stdout is not None and proc.stderr is not None
        killed = False
        for line in proc.stdout:
            if kill is not None and line.strip() == f"step {kill}":
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
                break
        proc.wait(timeout=120)
        err = proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
        if not killed:
            assert proc.returncode == 0, err
    return log.read_text().split()


@pytest.mark.parametrize(("seed", "epoch_size"), [(0, 0), (1, 0), (2, 37)])
def test_sigkill_resume_threads(tmp_path: Path, seed: int, epoch_size: int) -> None:
    urls, keys = write_shards(tmp_path, 6, 14)  # 84 samples, 17 steps of 5 an epoch
    rng = random.Random(seed)
    kills = [rng.randint(2, 12) for _ in range(3)]
    got = _run_killed(urls, tmp_path / "threads", kills, "threads", epoch_size)
    if epoch_size == 0:
        assert Counter(got) == Counter({k: 2 for k in keys})  # exactly once per epoch
    else:
        assert len(got) == 2 * epoch_size
        for epoch in (got[:epoch_size], got[epoch_size:]):
            assert len(set(epoch)) == len(epoch)
    # uninterrupted, the two executors deliver the same sequence (a resumed pass delivers
    # exactly the samples its state did not, in an order that is not the uninterrupted one,
    # on either executor)
    whole = _run_killed(urls, tmp_path / "threads-whole", [], "threads", epoch_size)
    assert whole == _run_killed(urls, tmp_path / "processes-whole", [], "processes", epoch_size)
