"""Smoke test for ``benchmarks/bench_decode.py``: one tiny round, every library and cell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_decode.py"


@pytest.mark.slow
def test_tiny_run_reports_every_cell_and_the_decoder(tmp_path: Path) -> None:
    pytest.importorskip("simplejpeg")
    out = tmp_path / "decode.json"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--rounds", "1", "--per-shard", "8"]
    cmd += ["--min-seconds", "0", "--data-dir", str(tmp_path / "data"), "--out", str(out)]
    cmd += ["--baseline", str(ROOT)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    cells = {c["cell"]: c for c in result["cells"]}
    assert set(cells) == {
        "small rgb", "small rgb8", "small torchrgb8", "jpeg256 rgb8", "jpeg256 torchrgb8",
        "jpeg256 torchrgb8 loader", "photo256 rgb8", "photo256 torchrgb8",
        "photo256 torchrgb8 loader",
    }  # fmt: skip
    for cell in cells.values():
        runs = cell["runs"]
        assert [r["decoder"] for r in runs["wds_cloud"]] == ["simplejpeg"]
        assert [r["decoder"] for r in runs["wds_cloud-pil"]] == ["pil"]
        assert set(cell["ratios"]) == {"wds_cloud", "wds_cloud-pil", "baseline"}
        assert all(r > 0 for r in cell["rates"].values())
    assert "| jpeg256 torchrgb8 loader |" in result["table_markdown"]
