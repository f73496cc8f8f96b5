"""Smoke tests for ``benchmarks/bench_random.py``: ``--quick`` with tiny shards, on SeaweedFS and
behind the latency proxy, and on the session's real AIStore cluster (``--ais-endpoint``).

Each checks the table's rows and that the counts the script reports are the ones the data
forces: every variant delivers the whole epoch (the per-sample one its first samples), the
per-sample variant makes at least one request per sample, and the batch variant fewer.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_random.py"
QUICK = ["--quick", "--shard-mb", "0.5", "--data", "16k", "--baseline-samples", "64"]


def run(tmp_path: Path, *extra: str) -> tuple[list[list[str]], dict[str, Any]]:
    out = tmp_path / "random.json"
    cmd = [sys.executable, str(SCRIPT), *QUICK, "--out", str(out), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("| "))
    table = itertools.takewhile(lambda line: line.startswith("|"), lines[first:])
    rows = [line for line in table if line.startswith("| ")]
    assert rows[0].startswith("| store | data | variant | samples | samples/s | vs stream |")
    return [row.strip("| ").split(" | ") for row in rows[1:]], json.loads(out.read_text())


def check(rows: list[dict[str, Any]]) -> None:
    by = {(r["store"], r["variant"]): r for r in rows}
    for (store, variant), row in by.items():
        assert row["samples_per_s"] > 0, row
        if variant == "per sample":
            assert row["samples"] == 64
            assert row["requests_per_sample"] >= 1.0, row
        elif variant != "AISBatchIterDataset":
            assert row["samples"] == by[(store, "stream")]["samples"] > 64
        if variant == "shuffled batch":
            assert row["requests_per_sample"] < by[(store, "per sample")]["requests_per_sample"]
            assert row["read_per_asked"] >= 0.99, row  # every sample's bytes were sent
        if variant != "stream":
            assert row["vs_stream"] > 0, row


@pytest.mark.slow
@pytest.mark.s3
def test_quick_on_seaweedfs_and_behind_the_proxy(tmp_path: Path) -> None:
    cells, result = run(tmp_path, "--stores", "seaweedfs", "proxy")
    variants = ["stream", "shuffled batch", "global", "global k=4", "global k=8", "per sample"]
    assert [(c[0], c[2]) for c in cells] == [
        (store, v) for store in ("seaweedfs", "proxy") for v in variants
    ]
    check(result["rows"])
    assert "aistore SDK 2.0.0" in result["header"]


@pytest.mark.slow
@pytest.mark.ais_real
def test_quick_on_the_real_cluster(tmp_path: Path, ais_cluster: Any) -> None:
    cells, result = run(tmp_path, "--stores", "ais", "--ais-endpoint", ais_cluster.endpoint)
    variants = [
        "stream", "shuffled batch", "global", "global k=4", "global k=8", "per sample",
        "AISBatchIterDataset",
    ]  # fmt: skip
    assert [c[2] for c in cells] == variants
    check(result["rows"])
    by = {r["variant"]: r for r in result["rows"]}
    assert by["shuffled batch"]["vs_ais_batch_iter"] > 0
    # one GetBatch request per batch of 64: far fewer requests than samples
    assert by["shuffled batch"]["requests_per_sample"] < 0.2
    timed = result["getbatch"]
    assert timed["get_batch of 64, ms"] > 0 and timed["SDK client.batch of 1 objects, ms"] > 0
    assert timed["16 get_batch of 64 in flight, samples/s"] > 0
