"""How a profiled pipeline's pass is put under the recorder (:mod:`.profile`).

:func:`profiled_iter` wraps the iterator of a profiled pipeline (``DataPipeline.__iter__``
calls it when ``profiling`` is set); :func:`watch_stage` registers the generator frame of
each stage a pipeline runs (its one way of running a stage, ``invoke_stage``, calls it once
per stage and pass while a recorder exists); :func:`stage_label` names a stage in reports.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

from wds_cloud.observe import profile
from wds_cloud.observe.profile import (
    CONSUMER,
    CONSUMER_WAIT,
    IDLE,
    WORKER_BATCH,
    Recorder,
    ThreadRecord,
    recorder,
)

__all__ = [
    "batch_worker",
    "profiled_iter",
    "run_batch_stages",
    "stage_label",
    "timed_batch_read",
    "watch_stage",
]


_DEFAULT_DECODERS = frozenset({"GzFilter", "BasicHandlers"})  # every Decoder's pre and post


def stage_label(stage: Any) -> str:
    """How a stage is named in reports: ``decode(rgb)``, ``map(crop)``, ``batched``..."""
    f = getattr(stage, "f", None)
    if f is not None and isinstance(getattr(stage, "args", None), tuple):
        name = getattr(f, "__name__", type(f).__name__).lstrip("_")
        if name == "decode" and stage.args:
            specs = [
                getattr(h, "imagespec", None) or getattr(h, "__name__", type(h).__name__)
                for h in getattr(stage.args[0], "handlers", ())
                if type(h).__name__ not in _DEFAULT_DECODERS
            ]
            return f"decode({', '.join(str(x) for x in specs)})"
        inner = [a for a in stage.args if callable(a)]
        if name in ("map", "select", "map_dict", "map_tuple") and inner:
            return f"{name}({_name(inner[0])})"
        return name
    if hasattr(stage, "func"):  # functools.partial
        return _name(stage.func)
    return _name(stage)


def _name(f: Any) -> str:
    name = getattr(f, "__name__", None)
    return str(name).lstrip("_") if name else type(f).__name__


def watch_stage(rec: Recorder, source: Any, stage: Any) -> None:
    """``source`` (what running ``stage`` returned) is a generator: charge the time in its
    frame to the stage, while the calling thread is in a profiled pass (the pipelines' one
    way of running a stage calls this once per stage and pass)."""
    thread = rec.watched()
    if thread is None or thread.depth == 0:
        return
    if hasattr(source, "_tasks_outstanding"):  # torch's multi-process DataLoader iterator
        rec.gauge("loader batches in flight", source, _loader_in_flight)
        rec.gauge("loader batches ready", source, _loader_ready)
        return
    frame = getattr(source, "gi_frame", None)
    if frame is not None:
        label = stage_label(stage)
        rec.watch(thread, frame, label)
        if label == "shuffle":
            rec.gauge("shuffle buffer", source, _shuffle_fill)


# Gauges, read by the sampler at each look (``Recorder.gauge``); each reads what its owner
# already keeps, so nothing runs per sample or per batch.


def _loader_in_flight(it: Any) -> float:
    """Batches a DataLoader has asked of its workers and not handed out yet (at most
    ``num_workers * prefetch_factor``)."""
    return float(it._tasks_outstanding)


def _loader_ready(it: Any) -> float:
    """Batches the workers have delivered and the DataLoader has not handed out yet: in its
    result queue, or received out of order and held."""
    try:
        queued = it._data_queue.qsize()
    except NotImplementedError:  # macOS multiprocessing queues
        queued = 0
    held = sum(1 for info in list(it._task_info.values()) if len(info) == 2)
    return float(queued + held)


def _shuffle_fill(gen: Any) -> float:
    """Items in a shuffle stage's buffer: the ``buf`` of its generator, or of the one it
    delegates to (``core/shuffle.py``'s ``buffer_shuffle``)."""
    for _ in range(3):
        frame = getattr(gen, "gi_frame", None)
        if frame is None:
            return 0.0
        buf = frame.f_locals.get("buf")
        if buf is not None:
            return float(len(buf))
        gen = gen.gi_yieldfrom
    return 0.0


def profiled_iter(
    it: Iterator[Any], dump: str | None, listed: float | None = None, timed: bool = False
) -> Iterator[Any]:
    """``it`` (a profiled pipeline's iterator) under the recorder.

    The outermost one of its thread is watched by the sampler from now until it ends (or is
    dropped); a nested one is returned as it is (its stages are watched through
    :func:`watch_stage`). With ``timed`` (a pipeline that ends in batches) each ``next()``
    is timed exactly and marked in the trace (:func:`_outermost`); without, the wait is the sampler's (a
    per-sample ``next()`` is too fast to time within the overhead budget), and the pass costs
    one C-level ``itertools.chain`` step per item. ``listed``: the seconds the pipeline took
    to list its shards, recorded once, in the main process.
    """
    rec = recorder(dump)
    if listed is not None and rec.worker < 0:
        rec.add("list shards", listed)
    thread = rec.thread(IDLE if rec.worker >= 0 else CONSUMER)
    if thread.depth > 0:
        return it
    frame = getattr(it, "gi_frame", None)
    if timed:
        outer = _outermost(rec, thread, it)
        frame = getattr(outer, "gi_frame", None)
        if frame is not None:
            rec.watch(thread, frame, "loader")  # its own time: the timing of next()
        return outer
    rec.enter(thread)
    if frame is not None:
        rec.watch(thread, frame, "loader")  # the pipeline's own loop (epochs, resume ledger)
    return itertools.chain(it, _PassEnd(rec, thread))


class _PassEnd:
    """The end of an untimed outermost pass: reached as the (empty) tail of its chain, or
    when the chain is dropped, whichever comes first."""

    def __init__(self, rec: Recorder, thread: ThreadRecord) -> None:
        self.rec = rec
        self.thread = thread
        self.done = False

    def end(self) -> None:
        if not self.done:
            self.done = True
            self.rec.leave(self.thread)

    def __iter__(self) -> Iterator[Any]:
        self.end()
        return iter(())

    def __del__(self) -> None:  # the chain was dropped before its end
        self.end()


def _outermost(
    rec: Recorder, thread: ThreadRecord, source: Iterator[Any]
) -> Generator[Any, None, None]:
    """A timed outermost pass: watched from its first ``next()`` to its end (or until it is
    dropped), each ``next()`` of ``source`` timed into ``consumer wait`` (a worker: ``worker
    batch``) and marked as a ``batch`` span (two ints appended to the thread's arrays,
    :meth:`Recorder.batch_track`: no object kept per batch). One generator, its loop inlined:
    it runs per batch, in the process that is often the bottleneck."""
    rec.enter(thread)
    clock = time.perf_counter_ns
    slot = rec.timers.setdefault(CONSUMER_WAIT if rec.worker < 0 else WORKER_BATCH, [0.0, 0, 0])
    starts, durs = rec.batch_track(threading.get_ident())
    cap = profile.MAX_BATCH_SPANS  # read once a pass, from its one place
    try:
        while True:
            start = clock()
            try:
                item = next(source)
            except StopIteration:
                return
            end = clock()
            slot[0] += (end - start) / 1e9
            slot[1] += 1
            if len(durs) < cap:
                starts.append(start)
                durs.append(end - start)
            else:
                rec.dropped += 1
            yield item
    finally:
        rec.leave(thread)


# -- batches read on request (make_loader(order="global")) ----------------------------------


def batch_worker(dump: str | None) -> Recorder:
    """This process's recorder, its calling thread watched from now on: a process handed
    batches to read (a global-order DataLoader worker) has no pass that ends, so it is watched
    from its first batch to its exit, its totals written every ``DUMP_EVERY`` seconds and when
    it exits (a multiprocessing finalizer: DataLoader workers are multiprocessing processes)."""
    rec = recorder(dump)
    thread = rec.thread(IDLE if rec.worker >= 0 else CONSUMER)
    if thread.depth == 0:
        rec.enter(thread)
        if rec.dump is not None:
            from multiprocessing.util import Finalize

            Finalize(rec, rec.write_dump, exitpriority=10)
    return rec


def timed_batch_read(rec: Recorder, read: Callable[[], list[Any]]) -> list[Any]:
    """``read()`` (one batch's samples), timed into timer ``batch read`` with the bytes of the
    samples' fields, and marked as a ``batch read`` span."""
    start = time.perf_counter_ns()
    samples = read()
    end = time.perf_counter_ns()
    nbytes = sum(
        len(value)
        for sample in samples
        if isinstance(sample, dict)
        for value in sample.values()
        if isinstance(value, bytes | bytearray | memoryview)
    )
    rec.add("batch read", (end - start) / 1e9, 1, nbytes)
    rec.span("batch read", "batch", start, end)
    return samples


def run_batch_stages(
    rec: Recorder | None, stages: Iterable[Callable[[Any], Any]], samples: list[Any]
) -> list[Any]:
    """``samples`` through ``stages`` (curried pipeline stages), each stage's generator frame
    watched while they run (``rec``: the recorder, None when profiling is off), then forgotten:
    a batch's stages live as long as the batch."""
    out: Any = iter(samples)
    thread = rec.watched() if rec is not None else None
    if rec is None or thread is None or thread.depth == 0:
        for stage in stages:
            out = stage(out)
        return list(out)
    before = len(thread.frames)
    for stage in stages:
        out = stage(out)
        watch_stage(rec, out, stage)
    try:
        return list(out)
    finally:
        if len(thread.frames) > before:
            rec.unwatch(thread, len(thread.frames) - before)
