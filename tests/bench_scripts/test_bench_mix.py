"""Smoke test for ``benchmarks/bench_mix.py``: ``--quick`` on tiny local sources; every loader
delivers the whole epoch (the same samples per epoch as the single-source loader)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_mix.py"
LOADERS = ["single", "mix random", "mix stratified", "mix per_stream", "stream"]


@pytest.mark.slow
def test_quick_table(tmp_path: Path) -> None:
    out = tmp_path / "mix.json"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--per-shard", "20"]
    cmd += ["--data-dir", str(tmp_path / "data"), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == (
        "| loader | samples/epoch | samples/s | vs single | CPU us/sample | CPU vs single |"
    )
    assert [r.strip("| ").split(" | ")[0] for r in rows[1:]] == LOADERS
    result = json.loads(out.read_text())
    for row in result["rows"]:
        assert row["samples"] == [240], row  # 12 shards x 20 samples, every pass
        assert row["samples_per_s"] > 0 and row["vs_single"] > 0
        assert row["cpu_us_per_sample"] > 0 and row["cpu_vs_single"] > 0
