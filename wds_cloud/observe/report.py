""":class:`ProfileReport`: what the recorders of a process and its workers measured, as plain
data (an autotuner reads the same fields the table prints), with :meth:`~ProfileReport.table`
and :meth:`~ProfileReport.verdict`.

Stage times come from the sampler: per watched thread they add up to the thread's watched
wall time (``docs/observability.md`` gives the tolerance). Timers are exact: ``open``,
``first byte``, ``read wait (<scheme>)`` with bytes, ``list shards``, ``consumer wait``.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from wds_cloud.observe.profile import CONSUMER, CONSUMER_WAIT, IDLE, current, dump_dirs

__all__ = ["ProcessTimes", "ProfileReport", "Timer", "collect", "distributed", "read_dumps"]


@dataclass(frozen=True)
class Timer:
    """An exact timer: total seconds, how many events, bytes (reads only)."""

    seconds: float
    count: int
    nbytes: int = 0

    @property
    def mb_per_s(self) -> float:
        """Bytes per second of wait, in MB/s (0 without bytes)."""
        return self.nbytes / self.seconds / 1e6 if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class ProcessTimes:
    """One process: the main one (``worker == -1``) or a DataLoader worker.

    Attributes:
        role: ``"main"`` or ``"worker <i>"``.
        pid, rank, worker: which process.
        wall: seconds its threads were watched (summed over threads).
        stages: stage -> seconds, from the sampler (threads of this process summed).
        timers: exact timers.
        items: items its outermost pipeline delivered (batches in a worker).
    """

    role: str
    pid: int
    rank: int
    worker: int
    wall: float
    stages: dict[str, float]
    timers: dict[str, Timer]
    items: int


@dataclass(frozen=True)
class ProfileReport:
    """Everything measured so far, per process; aggregated by the methods below.

    Attributes:
        processes: the main processes first, then the workers (by rank, worker, pid).
        events: the raw trace events per pid (for :mod:`.trace`; empty unless asked).
        threads: ``pid -> {thread id: name}``.
        start_ns: the earliest recorder start (the trace's time zero).
        ranks: the ranks whose processes are here: ``(0, 1, ...)`` when gathered across the
            ranks of ``torch.distributed``, else this process's rank alone.
    """

    processes: tuple[ProcessTimes, ...]
    events: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict, repr=False)
    threads: dict[int, dict[int, str]] = field(default_factory=dict, repr=False)
    start_ns: int = 0
    ranks: tuple[int, ...] = ()

    # -- aggregates ------------------------------------------------------------------------

    @property
    def main(self) -> ProcessTimes | None:
        """The main process of the first rank (None when only workers were profiled)."""
        return next((p for p in self.processes if p.worker < 0), None)

    @property
    def mains(self) -> tuple[ProcessTimes, ...]:
        """The main process of each rank."""
        return tuple(p for p in self.processes if p.worker < 0)

    def rank(self, rank: int) -> ProfileReport:
        """The report of one rank's processes (its main process and its workers)."""
        pids = {p.pid for p in self.processes if p.rank == rank}
        return replace(
            self,
            processes=tuple(p for p in self.processes if p.rank == rank),
            events={k: v for k, v in self.events.items() if k in pids},
            threads={k: v for k, v in self.threads.items() if k in pids},
            ranks=(rank,) if rank in self.ranks else (),
        )

    @property
    def workers(self) -> tuple[ProcessTimes, ...]:
        """The DataLoader workers."""
        return tuple(p for p in self.processes if p.worker >= 0)

    def stages(self, workers: bool) -> dict[str, float]:
        """Stage seconds summed over the workers (``workers=True``) or the main processes."""
        out: dict[str, float] = {}
        for p in self.processes:
            if (p.worker >= 0) == workers:
                for stage, seconds in p.stages.items():
                    out[stage] = out.get(stage, 0.0) + seconds
        return out

    def timer(self, name: str) -> Timer:
        """Timer ``name`` summed over every process."""
        seconds, count, nbytes = 0.0, 0, 0
        for p in self.processes:
            t = p.timers.get(name)
            if t is not None:
                seconds, count, nbytes = seconds + t.seconds, count + t.count, nbytes + t.nbytes
        return Timer(seconds, count, nbytes)

    def timer_names(self) -> list[str]:
        """Every timer measured, sorted."""
        return sorted({n for p in self.processes for n in p.timers})

    @property
    def wall(self) -> float:
        """The consumers' watched seconds (the main processes, summed over ranks; else the
        longest worker)."""
        mains = self.mains
        if mains:
            return sum(p.wall for p in mains)
        return max((p.wall for p in self.processes), default=0.0)

    @property
    def items(self) -> int:
        """Items the consumers received (the main processes' outermost pipelines)."""
        mains = self.mains
        return sum(p.items for p in (mains or self.processes))

    @property
    def rate(self) -> float:
        """Items per second received by the consumers (summed over ranks)."""
        mains = self.mains
        if not mains:
            wall = self.wall
            return self.items / wall if wall > 0 else 0.0
        return sum(p.items / p.wall for p in mains if p.wall > 0)

    @property
    def consumer_wait(self) -> float:
        """Seconds the training loops spent blocked in ``next()`` on the loader (summed over
        ranks): exact for a loader of batches, else the sampler's (its time not in the
        training step)."""
        timer = self.timer(CONSUMER_WAIT)
        if timer.count:
            return timer.seconds
        return sum(p.wall - p.stages.get(CONSUMER, 0.0) for p in self.mains)

    @property
    def loader_idle(self) -> float:
        """Share of the consumer's time it was not waiting on the loader (0..1)."""
        wall = self.wall
        return max(0.0, 1.0 - self.consumer_wait / wall) if wall > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-serialisable)."""
        return {
            "ranks": list(self.ranks),
            "wall": self.wall,
            "items": self.items,
            "consumer_wait": self.consumer_wait,
            "loader_idle": self.loader_idle,
            "processes": [asdict(p) for p in self.processes],
            "verdict": self.verdict(),
        }

    # -- text ------------------------------------------------------------------------------

    def verdict(self) -> str:
        """One line: where the time goes and what to change (:func:`.verdict.verdict`)."""
        from wds_cloud.observe.verdict import verdict

        return verdict(self)

    def table(self) -> str:
        """The per-stage table, the timers and the verdict, as text."""
        wall = self.wall
        ranks = f" on {len(self.ranks)} ranks" if len(self.ranks) > 1 else ""
        lines = [
            f"profile{ranks}: {wall:.2f} s watched, {self.items} items ({self.rate:.1f}/s), "
            f"consumer waited {self.consumer_wait:.2f} s (loader idle {self.loader_idle:.0%})"
        ]
        groups = [("main", self.stages(False), sum(p.wall for p in self.processes if p.worker < 0))]
        if self.workers:
            n = len({p.role for p in self.workers})
            groups.append((f"workers ({n})", self.stages(True), sum(p.wall for p in self.workers)))
        lines.append(f"{'process':<12} {'stage':<32} {'seconds':>9} {'share':>7}")
        for name, stages, total in groups:
            for stage, seconds in sorted(stages.items(), key=lambda kv: -kv[1]):
                share = seconds / total if total > 0 else 0.0
                lines.append(f"{name:<12} {stage:<32} {seconds:>9.3f} {share:>7.1%}")
        lines.append(f"{'timer':<45} {'seconds':>9} {'count':>7} {'MB/s':>8}")
        for name in self.timer_names():
            t = self.timer(name)
            speed = f"{t.mb_per_s:>8.1f}" if t.nbytes else f"{'':>8}"
            lines.append(f"{name:<45} {t.seconds:>9.3f} {t.count:>7} {speed}")
        lines.append(f"verdict: {self.verdict()}")
        return "\n".join(line.rstrip() for line in lines)


def read_dumps(directory: str) -> list[tuple[dict[str, Any], list[tuple[Any, ...]]]]:
    """The totals and events each worker process wrote to ``directory``."""
    out: list[tuple[dict[str, Any], list[tuple[Any, ...]]]] = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return out
    for name in names:
        if not name.endswith(".totals"):
            continue
        base = os.path.join(directory, name[: -len(".totals")])
        try:
            with open(base + ".totals", "rb") as f:
                snap = pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError):
            continue
        events: list[tuple[Any, ...]] = []
        try:
            with open(base + ".events", "rb") as f:
                while True:
                    events.extend(pickle.load(f))
        except (OSError, EOFError, pickle.UnpicklingError):
            pass
        out.append((snap, events))
    return out


def _process(snap: dict[str, Any]) -> ProcessTimes:
    stages: dict[str, float] = {}
    walls: dict[str, float] = {}
    for (thread, stage), seconds in snap["stages"].items():
        stages[stage] = stages.get(stage, 0.0) + seconds
        walls[thread] = walls.get(thread, 0.0) + seconds
    timers = {k: Timer(v[0], int(v[1]), int(v[2])) for k, v in snap["timers"].items()}
    return ProcessTimes(
        role=snap["role"],
        pid=snap["pid"],
        rank=snap["rank"],
        worker=snap["worker"],
        wall=sum(walls.values()),
        stages=stages,
        timers=timers,
        items=snap["items"],
    )


Found = list[tuple[dict[str, Any], list[tuple[Any, ...]]]]


def collect(events: bool = False, gather: bool = True) -> ProfileReport:
    """The report of this process and the workers of its profiled loaders (their totals are
    at most ``DUMP_EVERY`` seconds old while they run). ``events``: keep the trace events.

    ``gather``: under an initialised ``torch.distributed`` group of several ranks, gather the
    measurements of every rank (``all_gather_object``: a collective, every rank must call it
    at the same point, as ``state_dict()``); each rank gets the whole report. False: this
    rank's processes only, no collective.
    """
    found: Found = []
    rec = current()
    if rec is not None:
        found.append((rec.snapshot(), rec.trace_events() if events else []))
    for directory in dump_dirs():
        found.extend(read_dumps(directory))
    dist = distributed() if gather else None
    if dist is not None:
        found, ranks = _gather(dist, found)
    else:
        ranks = (rec.rank if rec is not None else _own_rank(found),)
    found.sort(key=lambda x: (x[0]["worker"] >= 0, x[0]["rank"], x[0]["worker"], x[0]["pid"]))
    return ProfileReport(
        processes=tuple(_process(snap) for snap, _ in found),
        events={snap["pid"]: evs for snap, evs in found} if events else {},
        threads={snap["pid"]: dict(snap["threads"]) for snap, _ in found},
        start_ns=min((snap["start_ns"] for snap, _ in found), default=0),
        ranks=ranks,
    )


def _own_rank(found: Found) -> int:
    return min((snap["rank"] for snap, _ in found), default=0)


def distributed() -> Any:
    """``torch.distributed`` when it is imported, initialised and has several ranks."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist if dist.get_world_size() > 1 else None


def _clock() -> tuple[str, int]:
    """This machine's name and the offset of the wall clock from the monotonic one (ns)."""
    return socket.gethostname(), time.time_ns() - time.perf_counter_ns()


def _gather(dist: Any, found: Found) -> tuple[Found, tuple[int, ...]]:
    """Every rank's ``found``, each process marked with the rank that sent it. Another
    machine's monotonic clock is moved onto this one's by the difference of their wall
    clocks; a pid already seen from another rank gets a number of its own (``rank + 1`` in
    bits 22 and up: Linux pids are below ``2**22``)."""
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, (dist.get_rank(), _clock(), found))
    host, offset = _clock()
    merged: Found = []
    seen: set[int] = set()
    for rank, (their_host, their_offset), theirs in out:
        shift = 0 if their_host == host else their_offset - offset
        for snap, evs in theirs:
            snap = {**snap, "rank": rank}
            if snap["pid"] in seen:
                snap["pid"] = (rank + 1) << 22 | snap["pid"] & ((1 << 22) - 1)
            seen.add(snap["pid"])
            if shift:
                snap["start_ns"] += shift
                snap["now_ns"] += shift
                evs = [(*e[:4], e[4] + shift, *e[5:]) for e in evs]
            merged.append((snap, evs))
    return merged, tuple(rank for rank, _, _ in out)


#: Stages that are not the loader's work: the training step, a worker waiting to hand over.
NOT_WORK = frozenset({CONSUMER, IDLE})
