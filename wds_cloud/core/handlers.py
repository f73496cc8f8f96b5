"""Error policies for pipeline stages (webdataset-compatible, without the 0.5 s sleep).

A handler is called with an exception and returns True to skip the failing item and go on,
False to stop the iteration quietly, or raises. The built-in policies are picklable objects that
count what they handled: ``wds.warn_and_continue.count`` tells how many items were skipped in
this process, ``.last`` holds the last exception. Build a private one with
``ContinueHandler(warn=False)`` to count per dataset.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

Handler = Callable[[BaseException], bool]


class _CountingHandler:
    """Base of the built-in policies: counts calls, remembers the last exception."""

    name = "handler"
    result = True

    def __init__(self, *, warn: bool = False) -> None:
        self.warn = warn
        self.count = 0
        self.last: BaseException | None = None
        self._lock = threading.Lock()

    def __call__(self, exn: BaseException) -> bool:
        with self._lock:
            self.count += 1
            self.last = exn
        if self.warn:
            warnings.warn(f"{self.name}: {exn!r}", stacklevel=2)
        return self.result

    def reset(self) -> None:
        """Set the count back to zero."""
        with self._lock:
            self.count = 0
            self.last = None

    def __repr__(self) -> str:
        return f"<{self.name} count={self.count}>"

    def __getstate__(self) -> dict[str, object]:
        return {"warn": self.warn, "name": self.name}

    def __setstate__(self, state: dict[str, object]) -> None:
        _CountingHandler.__init__(self, warn=bool(state["warn"]))
        self.name = str(state["name"])

    def __deepcopy__(self, memo: dict[int, object]) -> _CountingHandler:
        """The handler itself: a deep copy of a pipeline (the thread executor's readers, one
        copy each) counts into the same handler, which is thread-safe."""
        return self


class ContinueHandler(_CountingHandler):
    """Skip the failing item and continue; ``count`` is the number skipped."""

    name = "continue"
    result = True


class StopHandler(_CountingHandler):
    """Stop the iteration at the first error, quietly; ``count`` is the number of stops."""

    name = "stop"
    result = False


def reraise_exception(exn: BaseException) -> bool:
    """Re-raise every exception (the default policy)."""
    raise exn


ignore_and_continue = ContinueHandler(warn=False)
warn_and_continue = ContinueHandler(warn=True)
ignore_and_stop = StopHandler(warn=False)
warn_and_stop = StopHandler(warn=True)
ignore_and_continue.name = "ignore_and_continue"
warn_and_continue.name = "warn_and_continue"
ignore_and_stop.name = "ignore_and_stop"
warn_and_stop.name = "warn_and_stop"


def handled(
    data: Iterable[Any],
    f: Callable[[Any], Any],
    handler: Handler,
    *,
    drop_none: bool = False,
) -> Iterator[Any]:
    """``f(item)`` for every item of ``data``, with ``handler`` deciding on an exception.

    The one try/continue/stop loop of the per-sample stages: the handler returns True to skip
    the failing item, False to end the iteration quietly, or raises. With ``drop_none`` a result
    of ``None`` is skipped too (``map``'s filtering).
    """
    for item in data:
        try:
            result = f(item)
        except Exception as exn:
            if handler(exn):
                continue
            return
        if drop_none and result is None:
            continue
        yield result
