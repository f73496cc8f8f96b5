"""Readers on threads, delivered in DataLoader order: the thread executor's engine (no torch).

:class:`ThreadWorkers` runs ``n`` readers, each on its own thread, each with its own bounded
queue, and yields their items round-robin in reader order, skipping a reader once it is
exhausted: the order a torch ``DataLoader`` gives its iterable-dataset workers' outputs, and
one that does not depend on thread timing. Inside reader ``i``'s thread,
:func:`thread_worker_info` is ``(i, n)``; :func:`wds_cloud.core.shards.worker_info` reads it,
so shard splitting, per-reader seeds and resume see reader ``i`` of ``n`` exactly as in
DataLoader worker ``i``.

The threads are named ``wds-cloud-reader-<i>``. They stop when the iteration ends, when it
raises, when :meth:`ThreadWorkers.close` is called, or when the iterator is garbage-collected
(each reader checks a stop flag between items, and ``put`` waits at most
:data:`POLL_SECONDS` at a time). A reader that raises ends the iteration: the exception is
re-raised in the consumer with its original traceback.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["THREAD_PREFIX", "ThreadWorkers", "thread_worker_info"]

#: Prefix of the names of the reader threads (tests count them by it).
THREAD_PREFIX = "wds-cloud-reader"
#: How long a blocked reader waits before it checks whether it should stop.
POLL_SECONDS = 0.1

_SCOPE = threading.local()
_ITEM, _END, _ERROR = 0, 1, 2


def thread_worker_info() -> tuple[int, int] | None:
    """``(reader, readers)`` inside a :class:`ThreadWorkers` reader thread, else None."""
    info: tuple[int, int] | None = getattr(_SCOPE, "info", None)
    return info


class _Stop:
    """The stop flag and queues one iteration shares with its reader threads."""

    def __init__(self, n: int, depth: int) -> None:
        self.event = threading.Event()
        self.queues: list[queue.Queue[tuple[int, Any]]] = [
            queue.Queue(maxsize=depth) for _ in range(n)
        ]
        self.threads: list[threading.Thread] = []

    def close(self) -> None:
        """Stop the readers and wait for their threads (not from one of them)."""
        self.event.set()
        for q in self.queues:  # unblock a reader waiting to put
            _drain(q)
        current = threading.current_thread()
        for t in self.threads:
            if t is not current:
                t.join()


def _drain(q: queue.Queue[tuple[int, Any]]) -> None:
    try:
        while True:
            q.get_nowait()
    except queue.Empty:
        pass


def _put(stop: _Stop, q: queue.Queue[tuple[int, Any]], entry: tuple[int, Any]) -> bool:
    """Put ``entry`` unless the iteration stops first; whether it was put."""
    while not stop.event.is_set():
        try:
            q.put(entry, timeout=POLL_SECONDS)
            return True
        except queue.Full:
            continue
    return False


def _run(stop: _Stop, index: int, n: int, reader: Iterable[Any], out: Callable[[Any], Any]) -> None:
    _SCOPE.info = (index, n)
    q = stop.queues[index]
    it: Iterator[Any] | None = None
    try:
        it = iter(reader)
        for item in it:
            if not _put(stop, q, (_ITEM, out(item))):
                return
        _put(stop, q, (_END, None))
    except BaseException as exc:  # handed to the consumer, which re-raises it
        _put(stop, q, (_ERROR, exc))
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()  # the reader's generators release their streams here, in their thread
        it = None
        _SCOPE.info = None


class ThreadWorkers:
    """Iterate ``readers`` on one thread each, yielding their items round-robin.

    Args:
        readers: one iterable per reader (each iterated once, on its own thread).
        depth: items each reader may hold ready ahead of the consumer (>= 1).
        out: applied to each item on the reader's thread before it is queued.
        name: added to the thread names (``wds-cloud-reader-<name>-<i>``).
    """

    def __init__(
        self,
        readers: list[Iterable[Any]],
        *,
        depth: int = 2,
        out: Callable[[Any], Any] | None = None,
        name: str = "",
    ) -> None:
        if not readers:
            raise ValueError("ThreadWorkers: needs at least one reader")
        if depth < 1:
            raise ValueError(f"ThreadWorkers: depth must be >= 1, got {depth}")
        self._stop = _Stop(len(readers), depth)
        out = out if out is not None else _identity
        prefix = f"{THREAD_PREFIX}-{name}-" if name else f"{THREAD_PREFIX}-"
        n = len(readers)
        for i, reader in enumerate(readers):
            t = threading.Thread(
                target=_run, args=(self._stop, i, n, reader, out), name=f"{prefix}{i}", daemon=True
            )
            self._stop.threads.append(t)
        # stop the threads when this object is collected (they hold only the _Stop, not it)
        self._finalizer = weakref.finalize(self, self._stop.close)
        for t in self._stop.threads:
            t.start()

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        stop = self._stop
        queues = stop.queues
        order: list[int] = self.__dict__.setdefault("_order", list(range(len(queues))))
        while order:
            if stop.event.is_set():
                raise StopIteration
            index = order.pop(0)
            kind, value = queues[index].get()
            if kind == _ITEM:
                order.append(index)
                return value
            if kind == _ERROR:
                self.close()
                raise value
        self.close()
        raise StopIteration

    def close(self) -> None:
        """Stop every reader and wait for its thread to end; idempotent."""
        self._finalizer()


def _identity(item: Any) -> Any:
    return item
