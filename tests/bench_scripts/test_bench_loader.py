"""Smoke tests for ``benchmarks/bench_loader.py``: one tiny round of every variant and executor
locally (a decoded and an undecoded data set); the executors from S3 (SeaweedFS) and GCS
(fake-gcs-server); the profile of one cell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# a fresh interpreter per cell (torch imported in each): minutes on a busy two-core machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_loader.py"
EXECUTORS = {"make_loader", "make_loader:threads", "make_loader:subprocess-threads"}


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(SCRIPT), "--quick", "--rounds", "1", "--per-shard", "70"]
    cmd += ["--min-seconds", "0", "--data-dir", str(tmp_path / "data"), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _check_cell(cell: dict[str, Any], variants: set[str], decodes: bool) -> None:
    assert set(cell["variants"]) == variants
    for v in cell["variants"].values():
        assert v["samples_per_s"] > 0 and v["cpu_us_per_sample"] > 0
        assert v["samples_per_cpu_s"] > 0 and v["peak_rss_mib"] > 100  # a torch interpreter
    for e in EXECUTORS - {"make_loader"}:
        assert cell["variants"][e]["cpu_eff_vs_processes"] > 0
        assert cell["variants"][e]["rss_vs_processes"] > 0
        if decodes:
            assert cell["variants"][e]["of_decode_limit"] > 0
    assert (cell["decode_limit"] or 0) > 0 if decodes else cell["decode_limit"] is None


def test_tiny_local_run_reports_every_variant_executor_and_the_decode_limit(
    tmp_path: Path,
) -> None:
    out = tmp_path / "loader.json"
    _run(tmp_path, "--backends", "local", "--out", str(out))
    result = json.loads(out.read_text())
    assert [c["cell"] for c in result["cells"]] == [
        "local/photo256",
        "local/jpeg256",
        "local/small",
    ]
    every = {"webdataset", "hand", "make_loader+shuffle", "hand-noshm", "hand-0w"} | EXECUTORS
    for cell in result["cells"]:
        _check_cell(cell, every, decodes=cell["cell"] != "local/small")
        assert isinstance(cell["ipc_us_per_sample"], float)
        assert isinstance(cell["ipc_noshm_us_per_sample"], float)
    assert "| local/small | process boundary |" in result["table_markdown"]
    assert "| local/photo256 | decode limit (" in result["table_markdown"]


@pytest.mark.s3
@pytest.mark.gcs
def test_tiny_remote_run_reads_s3_and_gcs(tmp_path: Path) -> None:
    out = tmp_path / "loader.json"
    _run(tmp_path, "--backends", "s3,gcs", "--regimes", "photo256", "--out", str(out))
    result = json.loads(out.read_text())
    assert [c["cell"] for c in result["cells"]] == ["s3/photo256", "gcs/photo256"]
    for cell in result["cells"]:
        _check_cell(cell, {"webdataset", "hand", "hand-0w"} | EXECUTORS, decodes=True)


def test_profile_prints_the_stage_table(tmp_path: Path) -> None:
    done = _run(tmp_path, "--profile", "make_loader:subprocess-threads:small")
    assert "make_loader:subprocess-threads small: 140 samples" in done.stdout
    assert "stage" in done.stdout and "seconds" in done.stdout
