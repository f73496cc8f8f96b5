"""``make_loader(order="global", profile=True)``: each batch's read is timed (in the workers,
or waited for in the main process), its stages are measured by the sampler and dropped with
the batch, the training loop's wait is timed, and the trace is valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import wds_cloud as wds
from tests.observe.helpers import SLOW_A, slow_a
from tests.observe.test_trace import check_trace
from wds_cloud.observe.profile import current

SAMPLES = 160  # the 4 shards of 40 samples of conftest.py


@pytest.mark.parametrize(("workers", "in_flight"), [(0, 1), (2, 1), (2, 2)])
def test_global_order_profiled(
    local_urls: list[str], tmp_path: Path, workers: int, in_flight: int
) -> None:
    """Also with ``batches_in_flight=2``: a worker reads two batches at once (no per-batch
    read timer there; the sampler charges the wait to ``batch read``)."""
    index = tmp_path / "index.json"
    wds.build_index(local_urls, json=str(index))
    loader = wds.make_loader(
        str(index),
        order="global",
        batch_size=8,
        num_workers=workers,
        seed=3,
        raw_map=slow_a,
        to_tuple=("txt", "cls"),
        collate=list,
        batches_in_flight=in_flight,
        profile=True,
    )
    seen = 0
    for step, batch in enumerate(loader):
        seen += len(batch)
        if workers == 0 and step > 2:  # a batch's stage frames are dropped with the batch
            rec = current()
            assert rec is not None and len(rec._frames) <= 4, len(rec._frames)
    assert seen == SAMPLES
    report = loader.profile_report()
    assert report.items == SAMPLES // 8
    assert report.timer("consumer wait").count == SAMPLES // 8
    stages = report.stages(workers > 0)
    slept = stages.get("map(slow_a)", 0.0)
    assert abs(slept - SAMPLES * SLOW_A) <= 0.3 * SAMPLES * SLOW_A, (slept, stages)
    if workers:
        assert sorted(p.role for p in report.workers) == ["worker 0", "worker 1"]
        assert "transfer" in report.stages(False)
    if workers and in_flight == 1:
        read = report.timer("batch read")
        assert read.count == SAMPLES // 8 and read.nbytes > SAMPLES * 64
    path = tmp_path / "trace.json"
    loader.export_trace(str(path))
    doc = json.loads(path.read_text())
    check_trace(doc)
    spans = {e["name"] for e in doc["traceEvents"] if e["ph"] == "X"}
    assert {"batch", "map(slow_a)"} <= spans
    if workers and in_flight == 1:
        assert "batch read" in spans
