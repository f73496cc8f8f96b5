"""Smoke test for ``benchmarks/bench_tune.py``: ``--quick`` over every regime (the latency one
through the HTTP server and the proxy), a two-setting grid each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_tune.py"


@pytest.mark.slow
def test_quick_run_reports_every_regime(tmp_path: Path) -> None:
    out = tmp_path / "tune.json"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--data-dir", str(tmp_path / "data")]
    cmd += ["--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["regime"] for r in rows] == ["tiny", "photo256", "large", "latency"]
    for row in rows:
        assert row["grid_settings"] == 2
        assert row["grid_best_rate"] > 0 and row["tuned_rate"] > 0
        assert row["grid_best_again"] > 0 and row["tuned_again"] > 0
        assert row["ratio"] == pytest.approx(row["tuned_again"] / row["grid_best_again"])
    latency = rows[-1]
    assert latency["tuned"]["readahead"] == 0 and latency["tuned"]["prefetch"] == 0
    assert "ratio" in done.stdout.splitlines()[1]
