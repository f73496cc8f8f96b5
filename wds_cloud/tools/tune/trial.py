"""One measured trial: build a loader with a setting, read it for a few seconds, measure
samples/s in steady state and the memory of the process tree meanwhile.

The rate leaves out the start-up (workers starting, first opens: until the first batch) and the
batches the workers had ready in advance (``num_workers x prefetch_factor`` inner batches,
which arrive at queue speed, not loading speed), and at least the first fifth of the trial. A
trial whose memory goes over the budget is stopped at the next batch (the memory is sampled
every 0.1 s) and measured no further.
"""

from __future__ import annotations

import gc
import math
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from wds_cloud.core.collate import batch_samples
from wds_cloud.tools.tune.memory import MemoryWatch
from wds_cloud.tools.tune.space import Setting

__all__ = ["OK", "OVER_BUDGET", "Trial", "run_trial"]

OK = "ok"
OVER_BUDGET = "over budget"
SKIPPED = "skipped"
WARM_SHARE = 0.2  # the first part of a trial that is never measured

Build = Callable[[Setting, bool], Iterable[Any]]


@dataclass
class Trial:
    """One row of the trials table.

    Attributes:
        setting: what was tried.
        status: ``"ok"``, ``"over budget"`` (stopped: its memory went over the budget),
            ``"skipped"`` (its estimated memory is over the budget: not run) or
            ``"failed: <error>"``.
        error: the exception of a failed trial.
        samples_per_s: the steady-state rate (None unless ``ok``).
        memory: peak bytes of the process tree (PSS) while it ran; for a skipped setting the
            estimate.
        seconds: wall time of the trial, start-up included (0 when not run).
        samples: samples read.
        verdict: the profiler's verdict when the trial was profiled, else None.
    """

    setting: Setting
    status: str
    samples_per_s: float | None = None
    memory: int = 0
    seconds: float = 0.0
    samples: int = 0
    verdict: str | None = None
    error: Exception | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Measured within the budget."""
        return self.status == OK


def _close(iterator: Any) -> None:
    """Stop a loader's iterator now: its workers exit before the next trial starts."""
    close = getattr(iterator, "close", None)
    if close is not None:
        close()
    gc.collect()


def run_trial(
    build: Build,
    setting: Setting,
    *,
    seconds: float,
    budget: int,
    batch_size: int,
    profile: bool = False,
) -> Trial:
    """Measure ``setting``: ``build(setting, profile)`` gives the loader (an endless one).

    Args:
        build: makes the loader of a setting (``profile``: with profiling on).
        setting: the setting.
        seconds: how long to read after the first batch.
        budget: bytes the process tree may hold; over it the trial stops.
        batch_size: the loader's batch size (the queue of ready batches is counted in them).
        profile: profile the trial and keep the verdict.

    Returns:
        The trial (``failed: ...`` when the loader raised; the error is not raised).
    """
    stop = threading.Event()
    with warnings.catch_warnings():  # more workers than cores is what some trials try
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        return _measure(
            build(setting, profile), setting, stop, seconds, budget, batch_size, profile
        )


def _measure(
    loader: Iterable[Any],
    setting: Setting,
    stop: threading.Event,
    seconds: float,
    budget: int,
    batch_size: int,
    profile: bool,
) -> Trial:
    queued = setting.num_workers * setting.prefetch_factor
    ready = math.ceil(queued * setting.inner_batch / batch_size) + 1  # served from the queue
    start = time.perf_counter()
    first = now = start
    mark: tuple[float, int] | None = None
    batches = samples = 0
    iterator: Any = None
    try:
        with MemoryWatch(budget, stop.set) as watch:
            iterator = iter(loader)
            for batch in iterator:
                now = time.perf_counter()
                batches += 1
                samples += batch_samples(batch)
                if batches == 1:
                    first = now
                elif mark is None and batches > ready and now - first >= WARM_SHARE * seconds:
                    mark = (now, samples)
                if stop.is_set() or now - first >= seconds:
                    break
    except Exception as exc:  # a setting the loader cannot run is a result, not the end
        _close(iterator)
        elapsed = time.perf_counter() - start
        return Trial(setting, f"failed: {exc}", seconds=elapsed, error=exc)
    _close(iterator)
    trial = Trial(setting, OK, memory=watch.peak, seconds=now - start, samples=samples)
    if watch.exceeded:
        trial.status = OVER_BUDGET
        return trial
    if mark is not None and now > mark[0]:
        trial.samples_per_s = (samples - mark[1]) / (now - mark[0])
    else:  # too few batches for a steady state: the rate since the first batch
        trial.samples_per_s = samples / max(now - start, 1e-9)
    if profile:
        trial.verdict = _verdict(loader)
    return trial


def _verdict(loader: Any) -> str | None:
    report = getattr(loader, "profile_report", None)
    if report is None:
        return None
    try:
        return str(report().verdict())
    except Exception:  # the verdict only orders the search; without it the default order
        return None
