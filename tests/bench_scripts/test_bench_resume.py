"""Smoke test for ``benchmarks/bench_resume.py``: a tiny local run resumes exactly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_script_runs_in_tiny_mode(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "benchmarks.bench_resume", "--backends", "local"]
    cmd += ["--shards", "2", "--shard-mb", "2", "--rounds", "1", "--shuffle-buffer", "50"]
    cmd += ["--data-dir", str(tmp_path / "data"), "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(out.read_text())["local"]["wds_cloud"]
    assert row["exact"] is True
    # 2 x 70 samples; one batch of 64 delivered before the state was taken
    assert row["delivered_before"] == 64
    assert row["delivered_after"] == row["expected_after"] == 140 - 64
    assert 0 < row["state_bytes"] < 4096
    assert row["fresh_first_batch_s"] > 0 and row["resume_first_batch_s"] > 0
    assert "| local | wds_cloud |" in proc.stdout
