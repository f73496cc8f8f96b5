"""Smoke test for ``benchmarks/bench_profile.py``: one tiny round, every cell and mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_profile.py"


@pytest.mark.slow
def test_tiny_run_reports_every_cell_and_mode(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--rounds", "1", "--per-shard", "64"]
    cmd += ["--min-seconds", "0", "--data-dir", str(tmp_path / "data"), "--out", str(out)]
    cmd += ["--baseline", str(ROOT)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["summary"]
    assert {(r["cell"], r["mode"]) for r in rows} == {
        (cell, mode)
        for cell in ("tiny/direct", "tiny/loader", "small/decode")
        for mode in ("off", "on", "before", "paired", "paired-before")
    }
    for row in rows:
        if row["mode"].startswith("paired"):  # on / off of passes alternated in one process
            assert row["pairs"] >= 3 and row["ratio_median"] > 0 and row["cpu_ratio_median"] > 0
            continue
        assert row["samples_per_s"] > 0 and row["samples_per_cpu_s"] > 0
        if row["mode"] == "off":
            assert row["ratio_median"] == 1.0
        if row["mode"] == "on":  # a pass of a few ms may end before the first look
            verdict = row["verdict"]
            assert verdict.split(":")[0].endswith("-bound") or verdict.startswith(
                "no loader work measured yet"
            ), verdict
    assert "tiny/direct    on" in done.stdout
