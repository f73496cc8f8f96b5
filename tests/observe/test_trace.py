"""The trace is valid trace-event JSON: required keys per event type, one named track per
process and thread, spans that never overlap partially on a track, timestamps monotonic per
track, and every stage of the report present as spans."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.observe.helpers import slow_a
from tests.support.http_server import HttpFileServer
from wds_cloud.pytorch.builder import ReadAhead, make_loader

REQUIRED = {
    "M": {"ph", "name", "pid", "tid", "args"},
    "X": {"ph", "name", "cat", "pid", "tid", "ts", "dur"},
    "C": {"ph", "name", "pid", "ts", "args"},
}


def check_trace(doc: dict[str, Any]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """Schema-check ``doc``; return the X events per track, in file order."""
    assert set(doc) == {"traceEvents", "displayTimeUnit"}
    tracks: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    named: set[tuple[int, int]] = set()
    processes: set[int] = set()
    last_ts: dict[tuple[int, int], float] = {}
    for event in doc["traceEvents"]:
        ph = event["ph"]
        assert ph in REQUIRED, event
        assert REQUIRED[ph] <= set(event), event
        assert isinstance(event["pid"], int) and event["pid"] > 0
        if ph == "M":
            assert event["name"] in ("process_name", "thread_name")
            assert isinstance(event["args"]["name"], str) and event["args"]["name"]
            if event["name"] == "process_name":
                processes.add(event["pid"])
            else:
                named.add((event["pid"], event["tid"]))
            continue
        assert isinstance(event["ts"], float | int) and event["ts"] >= 0
        key = (event["pid"], event.get("tid", 0))
        assert event["ts"] >= last_ts.get(key, 0.0), f"not monotonic on {key}: {event}"
        last_ts[key] = event["ts"]
        if ph == "C":
            assert all(isinstance(v, int | float) for v in event["args"].values())
        else:
            assert event["dur"] >= 0 and isinstance(event["tid"], int)
            tracks[key].append(event)
    assert set(tracks) <= named, "a track without a thread_name"
    assert {pid for pid, _ in tracks} <= processes, "a process without a process_name"
    for key, spans in tracks.items():
        stack: list[float] = []  # ends of the open spans
        for span in spans:
            start, end = span["ts"], span["ts"] + span["dur"]
            while stack and stack[-1] <= start + 1e-3:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-3, f"spans overlap on {key}: {span}"
            stack.append(end)
    return tracks


def test_trace_of_a_profiled_loader(http_server: HttpFileServer, tmp_path: Path) -> None:
    urls = [http_server.url(f"shard-{i:02d}.tar") for i in range(4)]
    loader = make_loader(
        urls, batch_size=8, num_workers=2, shuffle_buffer=0, map=slow_a, profile=True
    )
    for _ in loader:
        time.sleep(0.005)
    path = tmp_path / "trace.json"
    loader.export_trace(str(path))
    tracks = check_trace(json.loads(path.read_text()))
    doc = json.loads(path.read_text())
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
    assert {"main (rank 0)", "worker 0 (rank 0)", "worker 1 (rank 0)", "shards"} <= names
    spans = [e for spans in tracks.values() for e in spans]
    by_cat = defaultdict(set)
    for e in spans:
        by_cat[e["cat"]].add(e["name"])
    assert by_cat["batch"] == {"batch"}  # a span per batch, in the main process and the workers
    shard_urls = {e["args"]["url"] for e in spans if e["cat"] == "shard"}
    assert shard_urls == set(urls)
    report = loader.profile_report()
    stages = set(report.stages(True)) | set(report.stages(False))
    assert stages <= by_cat["stage"], stages - by_cat["stage"]
    assert {"map(slow_a)", "consumer"} <= stages
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert counters and {e["name"] for e in counters} == {
        "bytes read",
        "shards open",
        "loader batches in flight",
        "loader batches ready",
    }  # no shuffle buffer (shuffle_buffer=0), no parallel ranged reads
    open_now: dict[int, float] = {}
    for e in counters:
        if e["name"] == "shards open":
            assert e["args"]["shards open"] >= 0
            open_now[e["pid"]] = e["args"]["shards open"]
    assert set(open_now.values()) == {0}  # every shard opened was closed


def _counters(doc: dict[str, Any]) -> dict[tuple[str, str], list[float]]:
    """``(process name, counter) -> values`` in time order."""
    names = {
        e["pid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "C":
            out[names[e["pid"]].split(" (")[0].split(" ")[0], e["name"]].append(
                e["args"][e["name"]]
            )
    return out


def test_trace_counters_queue_depths_and_bytes_in_flight(
    http_server: HttpFileServer, tmp_path: Path
) -> None:
    """Counters for the DataLoader's prefetch queue, the shuffle buffers (workers and main
    process) and the bytes in flight of parallel ranged reads, each within its bound."""
    urls = [http_server.url(f"shard-{i:02d}.tar") for i in range(4)]
    loader = make_loader(
        urls,
        batch_size=8,
        num_workers=2,
        prefetch_factor=2,
        shuffle_buffer=30,
        map=slow_a,
        profile=True,
        prefetch=2,  # parallel ranged reads of 1 KiB parts (an open option of every backend)
        prefetch_chunk=1024,
    )
    for _ in loader:
        time.sleep(0.005)
    path = tmp_path / "trace.json"
    loader.export_trace(str(path))
    doc = json.loads(path.read_text())
    check_trace(doc)
    counters = _counters(doc)
    flight = counters["main", "loader batches in flight"]
    ready = counters["main", "loader batches ready"]
    assert flight and max(flight) <= 2 * 2 and max(flight) >= 1  # num_workers * prefetch_factor
    assert ready and min(ready) >= 0 and max(ready) <= 2 * 2
    for where in ("main", "worker"):
        fill = counters[where, "shuffle buffer"]
        assert fill and max(fill) <= 30 and max(fill) > 0, (where, fill)
    in_flight = counters["worker", "bytes in flight"]
    # at most 2 parts of 1 KiB requested ahead, per open shard (the next one is opened ahead)
    assert in_flight, sorted(counters)
    assert max(in_flight) > 0 and max(in_flight) <= 2 * 2 * 1024, in_flight
    assert in_flight[-1] == 0  # every shard read to its end and closed


def test_trace_counter_device_prefetch(local_urls: list[str], tmp_path: Path) -> None:
    """``DevicePrefetcher``'s read-ahead (its ``ReadAhead``, here with a CPU ``prepare``)
    is a counter: batches prepared ahead and not handed out, 0 or 1."""
    loader = make_loader(
        local_urls, batch_size=8, num_workers=0, shuffle_buffer=0, map=slow_a, profile=True
    )
    n = sum(len(batch["__key__"]) for batch in ReadAhead(loader, lambda batch: batch))
    assert n == 160
    path = tmp_path / "trace.json"
    loader.export_trace(str(path))
    doc = json.loads(path.read_text())
    check_trace(doc)
    values = _counters(doc)["main", "device prefetch"]
    assert set(values) <= {0, 1} and 1 in values


def test_batch_spans_one_per_batch_kept_as_ints(
    local_urls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timed pass keeps one ``batch`` span per batch in two int arrays, none as a tuple in
    ``events`` (docs/observability.md, "Overhead"); :meth:`trace_events` gives them as events,
    once each when read for the dump, and past ``MAX_BATCH_SPANS`` they are counted as dropped."""
    import wds_cloud as wds
    from wds_cloud.observe import profile
    from wds_cloud.observe.profile import current

    ds = wds.WebDataset(local_urls, shardshuffle=False).to_tuple("txt", "cls").batched(16)
    ds.profile()
    assert sum(1 for _ in ds) == 10  # 160 samples
    rec = current()
    assert rec is not None
    assert not [e for e in rec.events if e[2] == "batch"]
    spans = [e for e in rec.trace_events() if e[2] == "batch"]
    assert len(spans) == 10 and all(e[0] == "X" and e[5] >= 0 for e in spans)
    assert [e[4] for e in spans] == sorted(e[4] for e in spans)
    first = rec.trace_events(dumped=True)
    assert len([e for e in first if e[2] == "batch"]) == 10
    assert rec.trace_events(dumped=True) == []  # each written once
    assert sum(1 for _ in ds) == 10
    again = [e for e in rec.trace_events(dumped=True) if e[2] == "batch"]
    assert len(again) == 10 and again[0][4] > spans[-1][4]
    monkeypatch.setattr(profile, "MAX_BATCH_SPANS", 25)
    dropped = rec.dropped
    assert sum(1 for _ in ds) == 10
    assert len([e for e in rec.trace_events() if e[2] == "batch"]) == 25
    assert rec.dropped - dropped == 5


def test_event_columns_give_back_the_events_they_were_given() -> None:
    """``EventColumns`` against the tuples it stands for: 3,000 random spans and counters
    (names repeated and new, negative stage tracks, int64 extremes, float values), read back
    whole and from every offset a dump may have reached."""
    import random

    from wds_cloud.observe.events import EventColumns

    rng = random.Random(7)
    cols = EventColumns()
    want: list[tuple[Any, ...]] = []
    names = ["decode(rgb)", "batch", "tar parse", "bytes read", "loader batches ready", "é/ü"]
    for _ in range(3000):
        name = rng.choice(names) if rng.random() < 0.9 else f"n{rng.randrange(50)}"
        start = rng.choice([0, rng.randrange(1 << 62), (1 << 63) - 1])
        if rng.random() < 0.6:
            track = rng.choice([1, -1, rng.randrange(-(1 << 40), 1 << 40)])
            dur = rng.randrange(1 << 40)
            cat = rng.choice(["stage", "batch"])
            cols.span(name, cat, track, start, dur)
            want.append(("X", name, cat, track, start, dur, None))
        else:
            value = rng.choice([0.0, 1.5, float(rng.randrange(1 << 50)), -3.25])
            cols.counter(name, start, value)
            want.append(("C", name, "counter", 0, start, 0, {name: value}))
    assert len(cols) == 3000
    assert cols.tuples() == want
    for first in (0, 1, 1499, 2999, 3000):
        assert cols.tuples(first) == want[first:]


def test_a_profiled_pass_keeps_no_event_object_but_a_shards(local_urls: list[str]) -> None:
    """After a profiled pass the recorder's tuple events are the shard spans (they carry the
    URL); the stage spans, counters and batch spans are numbers until read."""
    import wds_cloud as wds
    from wds_cloud.observe.profile import current

    ds = wds.WebDataset(local_urls, shardshuffle=False).to_tuple("txt", "cls").batched(16)
    for _ in ds.profile():
        time.sleep(0.002)
    rec = current()
    assert rec is not None
    assert {e[2] for e in rec.events} == {"shard"}
    kinds = {(e[0], e[2]) for e in rec.trace_events()}
    assert {("X", "shard"), ("X", "batch"), ("X", "stage"), ("C", "counter")} <= kinds
