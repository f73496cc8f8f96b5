"""Smoke test for ``benchmarks/bench_ais.py``: ``--quick`` on the emulator, tiny shards.

The real-cluster path (the default) is the same code with another endpoint; a run of it takes
minutes, so it is measured by hand (docs/aistore.md), not here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_ais.py"
READERS = ["wds_cloud", "wds_cloud prefetch=8", "AISShardReader", "AISIterDataset", "raw GET"]


@pytest.mark.slow
def test_quick_table_on_the_emulator() -> None:
    cmd = [sys.executable, str(SCRIPT), "--quick", "--cluster", "emulator", "--shard-mib", "1"]
    cmd += ["--payloads", "16384", "131072"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| samples | reader | samples/s | MB/s | CPU s/GB | peak RSS")
    cells = [row.strip("| ").split(" | ") for row in rows[1:]]
    assert [(c[0], c[1]) for c in cells] == [(s, r) for s in ("16k", "128k") for r in READERS]
    for row in cells:
        numbers = [float(c.replace(",", "")) for c in row[2:]]
        assert all(n >= 0 for n in numbers) and numbers[0] > 0 and numbers[3] > 0, row
    assert "aistore SDK 2.0.0" in done.stdout
