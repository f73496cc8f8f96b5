"""The search: coordinate descent over the axes of :mod:`.space`, with short measured trials,
under a memory budget and a time budget.

1. The first trial is the seed (workers = cores, the loader's defaults), profiled: its
   verdict picks the axis to move first (network-bound: ``prefetch`` and ``readahead``;
   transfer- or main-process-bound: ``inner_batch`` and ``shm_batches``; otherwise
   ``num_workers``); with remote shards the read axes go first in any case.
2. Along one axis at a time, the two neighbours of the current setting are measured (on the
   ``num_workers`` axis also 0: reading in the main process moves no batch between processes,
   a mode of its own that the neighbours do not predict); the
   search moves to the better one when it beats the current rate by more than
   :data:`MIN_GAIN`, and keeps going that way while it does. Then the next axis; the axes are
   gone through again while a pass changed something and time remains.
3. Before a trial its memory is estimated from the trials so far (per reading process, plus the
   stream buffers the setting adds); a setting whose estimate is over the budget is skipped, a
   trial whose measured memory goes over it is stopped. Neither can be chosen.
4. No trial starts unless it is expected to end within ``seconds`` of the start, except when
   the seed is over the budget: then fewer workers are tried until one fits, however long.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from wds_cloud.errors import ConfigError
from wds_cloud.tools.tune.memory import tree_memory
from wds_cloud.tools.tune.result import TuneResult, format_bytes
from wds_cloud.tools.tune.space import AXES, Setting, Space
from wds_cloud.tools.tune.trial import SKIPPED, Trial, run_trial

__all__ = ["MIN_GAIN", "TUNED", "axis_order", "default_budget", "search"]

#: A move must beat the current rate by this share (trials on a busy machine are noisy).
MIN_GAIN = 0.03
#: The ``make_loader`` arguments the tuner sets (``registry`` for read-ahead).
TUNED = ("num_workers", "prefetch_factor", "inner_batch", "shm_batches", "registry", "prefetch")

Build = Callable[[Setting, bool], Iterable[Any]]


def default_budget() -> int:
    """Half the memory available now (``MemAvailable``) on top of what this process tree
    holds; 8 GiB where ``/proc/meminfo`` cannot be read."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return tree_memory() + int(line.split()[1]) * 1024 // 2
    except OSError:
        pass
    return 8 << 30


def axis_order(verdict: str | None, remote: bool = False) -> tuple[str, ...]:
    """The axes, the one the verdict points at first; with ``remote`` shards the read axes
    (``prefetch``, ``readahead``) come first whatever the verdict: how many reads a stream
    keeps in flight decides how many workers pay (4 MB samples over a 20 ms link: no worker
    and 16 parallel reads beat 4 workers; one stream without workers is the slowest)."""
    kind = (verdict or "").split(":")[0]
    reads: tuple[str, ...] = ("prefetch", "readahead")
    if kind == "network-bound":
        first: tuple[str, ...] = (*reads, "num_workers")
    elif kind in ("transfer-bound", "main-process-bound"):
        first = ("inner_batch", "shm_batches")
    else:
        first = ("num_workers",)
    if remote:
        first = (*reads, *(a for a in first if a not in reads))
    return first + tuple(a for a in AXES if a not in first)


class _Estimator:
    """Memory of a setting, from the trials so far: without workers, ``base +`` what the
    main process added in such a trial ``+`` the setting's stream buffers; with ``w`` workers,
    ``base + w x (per worker + the setting's stream buffers)``, the cost per worker being the
    largest seen so far."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.per_worker = 0
        self.main = 0

    def learn(self, trial: Trial) -> None:
        if trial.memory <= 0 or trial.status.startswith(SKIPPED):
            return
        workers = trial.setting.num_workers
        extra = trial.memory - self.base - max(1, workers) * trial.setting.buffer_bytes()
        if workers:
            self.per_worker = max(self.per_worker, extra // workers)
        else:
            self.main = max(self.main, extra)

    def estimate(self, setting: Setting) -> int:
        workers = setting.num_workers
        if not workers:
            return self.base + self.main + setting.buffer_bytes()
        return self.base + workers * (self.per_worker + setting.buffer_bytes())


def search(
    build: Build,
    urls: Any,
    space: Space,
    *,
    batch_size: int,
    seconds: float = 60.0,
    budget: int | None = None,
    trial_seconds: float | None = None,
    fixed: Mapping[str, Any] | None = None,
    progress: Callable[[str], Any] | None = None,
) -> TuneResult:
    """Search ``space`` for the fastest setting within ``budget`` bytes and about ``seconds``.

    Args:
        build: ``build(setting, profile)`` -> an endless loader of that setting.
        urls: the shards (recorded in the result, for :meth:`TuneResult.as_code`).
        space: the axes and the seed.
        batch_size: the loader's batch size.
        seconds: the time budget of the whole search.
        budget: bytes the process tree may hold (default :func:`default_budget`).
        trial_seconds: measured seconds per trial (default ``seconds / 12``, at least 1).
        fixed: the caller's own ``make_loader`` arguments (recorded for ``as_code``).
        progress: called with one line per trial.

    Raises:
        ConfigError: the budget is below what this process already holds, the first trial
            failed (the loader's own error is chained), or no setting fitted the budget.
    """
    started = time.monotonic()
    base = tree_memory()
    budget = default_budget() if budget is None else budget
    if budget <= base:
        raise ConfigError(
            f"tune: memory budget {format_bytes(budget)} is not above what this process "
            f"already holds ({format_bytes(base)})"
        )
    per_trial = trial_seconds if trial_seconds is not None else max(1.0, seconds / 12)
    estimator = _Estimator(base)
    trials: list[Trial] = []
    seen: dict[tuple[Any, ...], Trial] = {}
    # start-up and shut-down seconds of the unprofiled trials (a profiled one can take far
    # longer to shut down: its workers write their last measurements)
    overheads: list[float] = []

    def time_left() -> bool:
        expected = statistics.median(overheads) if overheads else 1.0
        return time.monotonic() + per_trial + expected <= started + seconds

    def measure(setting: Setting, profile: bool = False) -> Trial:
        known = seen.get(setting.key())
        if known is not None:
            return known
        guess = estimator.estimate(setting)
        if guess > budget:
            trial = Trial(setting, SKIPPED, memory=guess)
        else:
            began = time.monotonic()
            trial = run_trial(
                build,
                setting,
                seconds=per_trial,
                budget=budget,
                batch_size=batch_size,
                profile=profile,
            )
            if not profile:
                overheads.append(time.monotonic() - began - per_trial)
            estimator.learn(trial)
        seen[setting.key()] = trial
        trials.append(trial)
        if progress is not None:
            rate = "-" if trial.samples_per_s is None else f"{trial.samples_per_s:,.0f}/s"
            progress(f"trial {len(trials)}: {setting.values()} {rate} {trial.status}")
        return trial

    def rate(trial: Trial) -> float:
        return trial.samples_per_s if trial.ok and trial.samples_per_s is not None else -math.inf

    seed = measure(space.seed, profile=True)
    if seed.error is not None and not isinstance(seed.error, ConfigError):
        # not the caller's arguments (a worker died): once more, without the profiler
        del seen[seed.setting.key()]
        seed = measure(space.seed)
    if seed.error is not None:
        raise ConfigError(f"tune: the first trial failed: {seed.error}") from seed.error
    current = seed
    # over the budget from the start: fewer workers until one fits (past the time budget if
    # need be: at most one trial per value of the axis, and without it there is no answer)
    workers = space.axes["num_workers"]
    while not current.ok and current.setting.num_workers in workers[1:]:
        fewer = workers[workers.index(current.setting.num_workers) - 1]
        current = measure(current.setting.with_value("num_workers", fewer))
    remote = any(len(space.axes.get(a, ())) > 1 for a in ("prefetch", "readahead"))
    order = [a for a in axis_order(seed.verdict, remote) if a in space.axes]
    changed = True
    while changed and time_left():
        changed = False
        for axis in order:
            if not space.applies(axis, current.setting):
                continue
            moved = _descend(axis, current, space, measure, rate, time_left)
            changed |= moved is not current
            current = moved
    fitting = [t for t in trials if t.ok and t.samples_per_s is not None]
    if not fitting:
        smallest = min((t.memory for t in trials if t.memory), default=0)
        raise ConfigError(
            f"tune: no setting fits the memory budget {format_bytes(budget)} (the smallest "
            f"trial held {format_bytes(smallest)}); raise the budget"
        )
    best = max(fitting, key=rate)
    return TuneResult(
        urls=urls,
        setting=best.setting,
        samples_per_s=float(best.samples_per_s or 0.0),
        memory=best.memory,
        trials=trials,
        budget=budget,
        seconds=time.monotonic() - started,
        verdict=seed.verdict,
        fixed=dict(fixed or {}),
        grid_size=space.size(),
    )


def _descend(
    axis: str,
    current: Trial,
    space: Space,
    measure: Callable[[Setting], Trial],
    rate: Callable[[Trial], float],
    time_left: Callable[[], bool],
) -> Trial:
    """Move along ``axis`` from ``current`` while a neighbour is better by ``MIN_GAIN``."""
    direction = 0
    while time_left():
        steps = space.neighbours(axis, current.setting)
        values = space.axes[axis]
        here = values.index(getattr(current.setting, axis))
        if direction:  # keep going the way that paid
            steps = [s for s in steps if (values.index(getattr(s, axis)) - here) * direction > 0]
        best = current
        for step in steps:
            if not time_left():
                break
            trial = measure(step)
            if rate(trial) > rate(best) * (1 + MIN_GAIN) or (
                rate(best) == -math.inf and rate(trial) > -math.inf
            ):
                best = trial
        if best is current:
            return current
        direction = 1 if values.index(getattr(best.setting, axis)) > here else -1
        current = best
    return current
