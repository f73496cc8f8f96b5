"""The one-line verdict: which part of the loader is the bottleneck, and what to change.

1. **consumer-bound** when the training loop waited on the loader less than
   :data:`CONSUMER_BOUND` of its time: the data arrives faster than it is used.
2. Otherwise the loader's work is looked at where it runs: the workers, unless they are idle
   (waiting for the main process) most of the time, then the main process.
3. The stage with most of that time names the kind: ``read wait``/``open`` ->
   **network-bound** (with MB/s per stream from the read timers), ``decode(...)`` ->
   **decode-bound**, ``map(f)`` and other user stages -> **compute-bound**, ``tar parse`` /
   ``sample grouping`` -> **parse-bound**, ``transfer`` -> **transfer-bound**, ``device
   copy`` -> **copy-bound**, anything else in the main process -> **main-process-bound**.
"""

from __future__ import annotations

import os
from typing import Any

from wds_cloud.observe.profile import CONSUMER, IDLE, UNSAMPLED

# a ProfileReport (typed loosely: report.py imports this module, for ProfileReport.verdict())
ProfileReport = Any

__all__ = ["CONSUMER_BOUND", "verdict"]

#: The training loop waiting on the loader less than this share of its time: consumer-bound.
CONSUMER_BOUND = 0.25
#: The names of the thread executor's reader threads start with this
#: (``wds_cloud.core.threadworkers.THREAD_PREFIX``; observe sits below core, so it is not imported).
READER_THREADS = "wds-cloud-reader"
#: Workers idle (waiting for the main process) more than this share: look at the main process.
WORKERS_IDLE = 0.5


def _more_workers(report: ProfileReport) -> int:
    n = len({p.role for p in report.workers})
    return max(2 * n, min(8, os.cpu_count() or 8), 2)


def _network(report: ProfileReport, share: float, where: str) -> str:
    reads = [(report.timer(n), n) for n in report.timer_names() if n.startswith("read wait (")]
    if not reads:
        return f"network-bound: {share:.0%} of {where} opening shards; try prefetch=16"
    timer, name = max(reads, key=lambda x: x[0].seconds)
    scheme = name[len("read wait (") : -1]
    return (
        f"network-bound: {share:.0%} of {where} waiting on {scheme} reads at "
        f"{timer.mb_per_s:.0f} MB/s per stream; try prefetch=16"
    )


def verdict(report: ProfileReport) -> str:
    """One line saying where the time goes and what to change (see the module docstring)."""
    if report.wall <= 0 or not report.processes:
        return "no measurements yet: iterate the loader with profiling on"
    if report.mains and report.consumer_wait / report.wall < CONSUMER_BOUND:
        return (
            "consumer-bound: the training step is the bottleneck "
            f"(loader idle {report.loader_idle:.0%})"
        )
    workers = report.workers
    stages, where = report.stages(True), "worker time"
    total = sum(p.wall for p in workers)
    if not workers or (total > 0 and stages.get(IDLE, 0.0) / total > WORKERS_IDLE):
        stages, where = report.stages(False), "main-process time"
        total = sum(p.wall for p in report.processes if p.worker < 0)
    skip = {CONSUMER, IDLE, UNSAMPLED, "loader"}
    readers = _reader_threads(report)
    if readers:  # the training thread's wait for the reader threads: they are the work
        skip.add("transfer")
    work = {k: v for k, v in stages.items() if k not in skip}
    if not work or total <= 0:
        return "no loader work measured yet: iterate longer"
    stage, seconds = max(work.items(), key=lambda kv: kv[1])
    share = seconds / total
    n = _more_workers(report)
    if stage in ("read wait", "open"):
        return _network(report, share, where)
    if stage == "batch read":
        timer = report.timer("batch read")
        speed = f" at {timer.mb_per_s:.0f} MB/s per reader" if timer.nbytes else ""
        return (
            f"network-bound: {share:.0%} of {where} reading batches{speed}; "
            "try batches_in_flight=4 or more num_workers"
        )
    if stage.startswith("decode"):
        if readers:
            return f"decode-bound: {share:.0%} of {where} in {stage}; {thread_hint(readers)}"
        return f"decode-bound: {share:.0%} of {where} in {stage}; {decode_hint(n)}"
    if stage in ("tar parse", "sample grouping"):
        return f"parse-bound: {share:.0%} of {where} in {stage}; try num_workers={n}"
    if stage == "transfer":
        return (
            f"transfer-bound: {share:.0%} of {where} moving batches between processes; "
            "try larger inner batches (inner_batch=), so fewer cross"
        )
    if stage == "device copy":
        return (
            f"copy-bound: {share:.0%} of {where} copying to the device; try pin_memory=True "
            "and prefetch_to_device=True"
        )
    if where == "main-process time" and workers:
        return (
            f"main-process-bound: {share:.0%} of {where} in {stage}; try a smaller "
            "shuffle_buffer or larger inner batches"
        )
    return f"compute-bound: {share:.0%} of {where} in {stage}; try num_workers={n}"


def _reader_threads(report: ProfileReport) -> int:
    """The thread executor's reader threads seen by the profiler (0: process workers)."""
    return sum(
        1
        for names in report.threads.values()
        for name in names.values()
        if name.rpartition(" / ")[2].startswith(READER_THREADS)
    )


def thread_hint(readers: int, cores: int | None = None) -> str:
    """What to try when the thread executor's readers are decode-bound: a reader per core,
    else the cores are the limit."""
    cores = cores or os.cpu_count() or 1
    if readers < cores:
        return f"try num_workers={cores} (reader threads; {readers} now, {cores} cores)"
    return (
        f"{readers} reader threads decode on {cores} cores: the machine's decode limit; "
        "smaller images or more cores"
    )


def decode_hint(workers: int, fast_jpeg: bool | None = None) -> str:
    """What to try when decoding is the limit: more workers, and the fast JPEG path when
    simplejpeg is missing (``fast_jpeg``: whether it is installed; None: look), else the
    thread executor (the decoders release the GIL, so threads decode on every core with no
    hand-over between processes)."""
    if fast_jpeg is None:
        import importlib.util

        fast_jpeg = importlib.util.find_spec("simplejpeg") is not None
    if not fast_jpeg:
        return f"try num_workers={workers} or the fast JPEG path (pip install 'wds_cloud[jpeg]')"
    return f'try num_workers={workers} or make_loader(executor="threads")'
