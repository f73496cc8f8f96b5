"""Smoke test for ``benchmarks/bench_coalesce.py``: a tiny run prints both tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.s3
def test_script_runs_in_tiny_mode() -> None:
    cmd = [sys.executable, "-m", "benchmarks.bench_coalesce", "--rounds", "1", "--gaps", "0,4096"]
    cmd.append("--quick")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "## seaweedfs: one ranged GET" in proc.stdout
    assert "| 4096 | " in proc.stdout and "latency x bandwidth" in proc.stdout
