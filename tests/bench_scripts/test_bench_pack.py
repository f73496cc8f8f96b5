"""Smoke test for ``benchmarks/bench_pack.py``: a quick run prints its table and JSON rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run(tmp_path: Path) -> None:
    out = tmp_path / "pack.json"
    cmd = [sys.executable, "-m", "benchmarks.bench_pack", "--quick", "--samples", "2000"]
    cmd += ["--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    rows = result["pack"]
    assert [(r["distribution"], r["buffer"]) for r in rows] == [
        (d, b) for d in ("uniform", "lognormal", "bimodal") for b in (8, 64)
    ]
    for r in rows:
        assert 0 < r["energon_scheme"] <= r["wds_cloud_efficiency"] <= 1
        assert r["wds_cloud_samples_per_s"] > 0
    assert result["group_by_samples_per_s"] > 0
    assert "| lognormal | 64 |" in proc.stdout
