"""Smoke test for ``benchmarks/bench_throttle.py``: a tiny run prints its four cells and the two
GetBatch cells, and the throttled cells with the limiter on lose, repeat and fail nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_script_runs_in_tiny_mode() -> None:
    cmd = [sys.executable, "benchmarks/bench_throttle.py", "--rounds", "1", "--shards", "3"]
    cmd += ["--samples", "8", "--part-kib", "16", "--rate", "40", "--delay", "0.005"]
    cmd += ["--getbatch", "--batch-entries", "4"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = {line[:28].strip(): line[28:].split() for line in proc.stdout.splitlines()}
    for cell in (
        "503 above R, throttle off",
        "no 503s, throttle on",
        "no 503s, throttle off",
        "GetBatch, 503 above R, off",
    ):
        assert cell in lines, proc.stdout
    on = lines["503 above R, throttle on"]
    assert on[3:6] == ["0", "0", "0"], proc.stdout  # failed, lost, repeated
    batch_on = lines["GetBatch, 503 above R, on"]
    assert batch_on[3:5] == ["0", "0"], proc.stdout  # failed batches, lost entries
