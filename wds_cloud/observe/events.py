"""Trace events kept as numbers: no Python object per event.

A profiled process makes events all through its run: the sampler's stage spans and counters
at each look, a ``batch`` span per batch. Kept as tuples, each is a few long-lived objects made
between the short-lived objects of the batches the process is moving; they fragment the
allocator's pools, and every later batch's objects land in scattered pages. Measured in the
main process of a 2-worker loader of tiny samples: ~72 µs of main-thread CPU a batch with
profiling off, ~85 with the events as tuples (docs/observability.md, "Overhead"). So the
events that carry no ``args`` are kept here, in parallel ``array`` columns, and become tuples
(the form :mod:`.trace` reads) only when the trace is exported or a worker writes its dump.
"""

from __future__ import annotations

from array import array
from typing import Any

__all__ = ["EventColumns"]

_SPAN, _COUNTER = 0, 1


class EventColumns:
    """``X`` spans without args and ``C`` counters, one row per event in parallel arrays; the
    names and categories are kept once each. Not thread-safe: the caller serialises the
    appends (the recorder's lock)."""

    def __init__(self) -> None:
        self._strings: list[str] = []
        self._ids: dict[str, int] = {}
        self._ph = array("b")
        self._name = array("l")
        self._cat = array("l")
        self._track = array("q")
        self._start = array("q")
        self._dur = array("q")
        self._value = array("d")

    def __len__(self) -> int:
        return len(self._value)  # the last column appended

    def _id(self, text: str) -> int:
        found = self._ids.get(text)
        if found is None:
            found = self._ids[text] = len(self._strings)
            self._strings.append(text)
        return found

    def _add(
        self, ph: int, name: str, cat: str, track: int, start: int, dur: int, value: float
    ) -> None:
        self._ph.append(ph)
        self._name.append(self._id(name))
        self._cat.append(self._id(cat))
        self._track.append(track)
        self._start.append(start)
        self._dur.append(dur)
        self._value.append(value)

    def span(self, name: str, cat: str, track: int, start_ns: int, dur_ns: int) -> None:
        """An ``X`` span of ``track`` (a thread ident; negative: a thread's stage track)."""
        self._add(_SPAN, name, cat, track, start_ns, dur_ns, 0.0)

    def counter(self, name: str, at_ns: int, value: float) -> None:
        """A ``C`` counter sample."""
        self._add(_COUNTER, name, "counter", 0, at_ns, 0, value)

    def tuples(self, first: int = 0) -> list[tuple[Any, ...]]:
        """The events from row ``first`` on, as :mod:`.trace` reads them:
        ``(ph, name, cat, track, start_ns, dur_ns, args)``."""
        names = self._strings
        out: list[tuple[Any, ...]] = []
        for i in range(first, len(self)):
            name = names[self._name[i]]
            if self._ph[i] == _SPAN:
                out.append(
                    (
                        "X",
                        name,
                        names[self._cat[i]],
                        self._track[i],
                        self._start[i],
                        self._dur[i],
                        None,
                    )
                )
            else:
                out.append(("C", name, "counter", 0, self._start[i], 0, {name: self._value[i]}))
        return out
