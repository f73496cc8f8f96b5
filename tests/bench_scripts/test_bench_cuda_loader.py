"""Smoke test for ``benchmarks/bench_cuda_loader.py`` on the CPU (``--device cpu``): the same
code path a GPU run takes, less the side-stream copy and the simulated step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_cuda_loader.py"


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(SCRIPT), "--device", "cpu", "--quick", "--rounds", "1"]
    cmd += ["--per-shard", "30", "--min-seconds", "0", "--data-dir", str(tmp_path / "data")]
    return subprocess.run([*cmd, *extra], capture_output=True, text=True, cwd=ROOT, timeout=600)


@pytest.mark.slow
def test_cpu_run_reports_every_variant_with_one_checksum(tmp_path: Path) -> None:
    out = tmp_path / "cuda_loader.json"
    done = _run(tmp_path, "--workers", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [r["variant"] for r in result["rows"]] == [
        "webdataset+to", "hand+to", "make_loader+to", "make_loader+prefetch",
    ]  # fmt: skip
    assert all(r["samples_per_s"] > 0 for r in result["rows"])
    assert result["rows"][0]["ratio"] == 1.0
    # every variant's passes agreed on the data (the run fails otherwise): one checksum logged
    sums = {line.split("checksums ")[1] for line in done.stderr.splitlines() if "checksums" in line}
    assert len(sums) == 1, sums


def test_more_workers_than_shards_is_refused_by_name(tmp_path: Path) -> None:
    done = _run(tmp_path, "--workers", "9")
    assert done.returncode == 2
    assert "--workers 9 is more than the 4 shards" in done.stderr


def test_a_simulated_step_needs_cuda(tmp_path: Path) -> None:
    done = _run(tmp_path, "--workers", "1", "--step-us", "100")
    assert done.returncode != 0 and "--step-us needs a CUDA device" in done.stderr
