"""``ProcessLocal``: a client made on first use in each process and never pickled.

Openers hold configurations, not live clients: an SDK client (its connection pool, its
threads, its locks) must not be used by a forked child nor travel in a pickle to a spawned
one. Each opener keeps its clients in :class:`ProcessLocal` holders, which make the client on
first use, make another one in a process that did not make it (a DataLoader worker after a
fork), and pickle empty, so an opener pickles as its configuration alone.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

__all__ = ["ProcessLocal"]


class ProcessLocal(Generic[T]):
    """One value per process, made by the ``make`` given to :meth:`get` on first use there.

    Thread-safe: threads of one process asking at once get the same value, made once. A
    pickled or copied-by-fork holder keeps nothing from its origin: the value, the process id
    and the lock (a lock held by a thread of the parent at fork time stays held in the child,
    where that thread does not exist) are made again in the new process.
    """

    def __init__(self) -> None:
        self._value: T | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()

    def get(self, make: Callable[[], T]) -> T:
        """This process's value; ``make()`` is called for it when there is none yet.

        Raises:
            Whatever ``make`` raises (nothing is kept then; the next call tries again).
        """
        pid = os.getpid()
        value = self._value
        if value is not None and self._pid == pid:
            return value
        with self._process_lock(pid):
            if self._value is None or self._pid != pid:
                self._value = make()
                self._pid = pid
            return self._value

    def peek(self) -> T | None:
        """This process's value, or None when it has not been made here."""
        return self._value if self._pid == os.getpid() else None

    def _process_lock(self, pid: int) -> threading.Lock:
        if self._lock_pid != pid:  # the lock came through a fork: it may be held for ever
            self._lock, self._lock_pid = threading.Lock(), pid
        return self._lock

    def __reduce__(self) -> tuple[Any, ...]:
        return (ProcessLocal, ())

    def __repr__(self) -> str:
        made = "made" if self.peek() is not None else "not made"
        return f"ProcessLocal({made} in process {os.getpid()})"
