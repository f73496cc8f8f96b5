"""The memory of a process tree, and a watcher that samples it during a trial.

A DataLoader forks its workers: they share most pages with the main process (torch, the
interpreter) until they write them. Summing the workers' RSS counts those pages once per
worker; the proportional set size (PSS, ``/proc/<pid>/smaps_rollup``, Linux >= 4.14) splits
each shared page between the processes that map it, so the tree's PSS is the memory it really
holds. Where PSS cannot be read, RSS (``/proc/<pid>/statm``) is used: an overestimate, so a
budget is never exceeded unnoticed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

__all__ = ["MemoryWatch", "descendants", "process_memory", "tree_memory"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def descendants(pid: int) -> list[int]:
    """The pids of every live descendant of ``pid`` (children, grandchildren...)."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        # the command name (field 2) is in parentheses and may hold spaces: split after it
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            parents.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def process_memory(pid: int) -> int:
    """Bytes ``pid`` holds: its PSS, or its RSS where PSS cannot be read; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def tree_memory(pid: int | None = None) -> int:
    """Bytes held by ``pid`` (default: this process) and all its descendants (PSS summed)."""
    root = os.getpid() if pid is None else pid
    return sum(process_memory(p) for p in [root, *descendants(root)])


class MemoryWatch:
    """Sample :func:`tree_memory` every ``interval`` seconds on a thread, keep the peak, and
    call ``over()`` once when it exceeds ``budget`` (the trial stops itself then).

    Use as a context manager; :attr:`peak` is the largest sample (one is taken on entry and
    one on exit, so a watch always has one).
    """

    def __init__(
        self,
        budget: int,
        over: Callable[[], None],
        *,
        interval: float = 0.1,
        measure: Callable[[], int] = tree_memory,
    ) -> None:
        self.budget = budget
        self.over = over
        self.interval = interval
        self.measure = measure
        self.peak = 0
        self.exceeded = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wds-tune-memory", daemon=True)

    def sample(self) -> int:
        """Take one sample now; note the peak and whether the budget is exceeded."""
        now = self.measure()
        self.peak = max(self.peak, now)
        if now > self.budget and not self.exceeded:
            self.exceeded = True
            self.over()
        return now

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> MemoryWatch:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
