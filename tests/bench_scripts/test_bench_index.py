"""Smoke test for ``benchmarks/bench_index.py``: a tiny run prints its three tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.s3
def test_script_runs_in_tiny_mode() -> None:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.bench_index",
        "--shards",
        "2",
        "--per-shard",
        "40",
        "--random-samples",
        "30",
        "--quick",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "| local | DALI wds2idx method (GNU tar), 1 at a time |" in out
    assert "| s3 | random access, 8 readers |" in out
    assert "| IndexedWebDataset, DataLoader(shuffle=True), full shuffle |" in out
