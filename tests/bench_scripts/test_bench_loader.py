"""Smoke test for ``benchmarks/bench_loader.py``: one tiny round, every variant and data set."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_loader.py"


@pytest.mark.slow
def test_tiny_run_reports_every_variant_and_the_ipc_cost(tmp_path: Path) -> None:
    out = tmp_path / "loader.json"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--rounds", "1", "--per-shard", "70"]
    cmd += ["--min-seconds", "0", "--data-dir", str(tmp_path / "data"), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [r["regime"] for r in result["regimes"]] == ["photo256", "jpeg256", "small"]
    for regime in result["regimes"]:
        assert set(regime["variants"]) == {
            "webdataset", "hand", "make_loader", "make_loader+shuffle", "hand-noshm", "hand-0w",
        }  # fmt: skip
        for v in regime["variants"].values():
            assert v["samples_per_s"] > 0 and v["cpu_us_per_sample"] > 0
        assert isinstance(regime["ipc_us_per_sample"], float)
        assert isinstance(regime["ipc_noshm_us_per_sample"], float)
    assert "| small | process boundary |" in result["table_markdown"]
