"""Chrome/Perfetto trace-event JSON of what the recorders measured.

The format is the "JSON Array/Object" trace-event format that ``ui.perfetto.dev`` and
``chrome://tracing`` open: ``{"traceEvents": [...], "displayTimeUnit": "ms"}``, timestamps
in microseconds from the first recorder's start. Tracks, per process (``pid``, named by a
``process_name`` metadata event: ``main (rank 0)``, ``worker 1 (rank 0)``):

* each watched thread (``thread_name``): a ``batch`` span per batch its pipeline delivered
  (made in a worker; handed to the training loop in the main process), when it batches;
* ``<thread> stages``: ``X`` spans of the stage the sampler saw it run (``decode(rgb)``,
  ``tar parse``, ``consumer``...), back to back;
* ``shards``, ``shards 2``...: an ``X`` span per shard from open to close (URL redacted,
  bytes read), on as many tracks as shards were open at once, so spans never overlap;
* ``C`` counters per process: ``bytes read`` (so far, by the shard streams) and ``shards
  open`` (opened and not closed yet: the shards in flight, the next one opened ahead counted);
  and the gauges the sampler reads at each look (written when they change): ``loader batches
  in flight`` / ``loader batches ready`` (a DataLoader's prefetch queue: asked of the workers
  and not handed out / delivered by them and not handed out), ``shuffle buffer`` (items in a
  shuffle stage's buffer), ``device prefetch`` (batches ``DevicePrefetcher`` copied ahead) and
  ``bytes in flight`` (parallel ranged reads: requested and not handed to the tar reader).

Spans of one track never overlap partially (they are sequential), so they nest trivially.
"""

from __future__ import annotations

import json
import os
from typing import Any

from wds_cloud.observe.report import ProfileReport, collect, distributed

__all__ = ["trace_events", "write_trace"]


def _us(ns: int, zero: int) -> float:
    return round((ns - zero) / 1000.0, 3)


def trace_events(report: ProfileReport) -> list[dict[str, Any]]:
    """The trace events of ``report`` (made with ``collect(events=True)``)."""
    zero = report.start_ns
    out: list[dict[str, Any]] = []
    roles = {p.pid: f"{p.role} (rank {p.rank})" for p in report.processes}
    for pid, events in report.events.items():
        out.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": pid,
                "tid": 0,
                "args": {"name": roles.get(pid, str(pid))},
            }
        )
        names = report.threads.get(pid, {})
        tids: dict[int, int] = {}  # thread ident (negative: its stage track) -> small tid

        def track(ident: int, name: str, tids: dict[int, int] = tids, pid: int = pid) -> int:
            tid = tids.get(ident)
            if tid is None:
                tid = tids[ident] = len(tids) + 1
                out.append(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": pid,
                        "tid": tid,
                        "args": {"name": name},
                    }
                )
            return tid

        lanes: list[int] = []  # end time of the last shard span on each shards track
        for ph, name, cat, ident, start, dur, args in sorted(events, key=lambda e: e[4]):
            if ph == "C":
                out.append(
                    {
                        "ph": "C",
                        "name": name,
                        "pid": pid,
                        "tid": 0,
                        "ts": _us(start, zero),
                        "args": args,
                    }
                )
                continue
            if cat == "shard":
                lane = next((i for i, end in enumerate(lanes) if end <= start), len(lanes))
                if lane == len(lanes):
                    lanes.append(0)
                lanes[lane] = start + dur
                label = "shards" if lane == 0 else f"shards {lane + 1}"
                tid = track(1 << 62 | lane, label)
            elif ident < 0:
                tid = track(ident, f"{names.get(-ident, str(-ident))} stages")
            else:
                tid = track(ident, names.get(ident, str(ident)))
            event = {
                "ph": "X",
                "name": name,
                "cat": cat,
                "pid": pid,
                "tid": tid,
                "ts": _us(start, zero),
                "dur": round(dur / 1000.0, 3),
            }
            if args:
                event["args"] = args
            out.append(event)
    return out


def write_trace(
    path: str | os.PathLike[str], report: ProfileReport | None = None, gather: bool = True
) -> None:
    """Write the trace of ``report`` (default: everything measured so far) to ``path``.

    Without a report, under ``torch.distributed`` with several ranks (and ``gather``), the
    ranks' measurements are gathered (a collective: every rank must call this) and rank 0
    alone writes the file, with every rank's processes."""
    if report is None:
        report = collect(events=True, gather=gather)
        dist = distributed() if gather else None
        if dist is not None and dist.get_rank() != 0:
            return
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": trace_events(report), "displayTimeUnit": "ms"}, f)
