"""The coalescing planner of batch reads: requested byte ranges -> the ranged reads to make.

A pure function (:func:`plan_fetches`): no I/O, no settings. Requests of the same object whose
ranges are closer than ``gap`` bytes are read with one ranged request spanning them (the bytes
between them are read and dropped); a read that spans a gap (or joins touching ranges) never
exceeds ``max_span`` bytes. Overlapping and duplicate requests are always served by one read,
whatever its span, so no byte is read twice; a single long range is read whole, never cut. What it guarantees, and
``tests/index/test_batchplan.py`` checks on thousands of layouts:

- every requested byte lies in the read that serves its request;
- a read covers only requested bytes and gaps of at most ``gap`` bytes between them;
- a read longer than ``max_span`` bytes is one range, or ranges that each overlap the ones
  before them;
- no two reads overlap.

Reads come out sorted by ``(url, offset)``; each names the requests it serves, so results can
be handed back in the order asked (:func:`slices`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from wds_cloud.errors import ConfigError
from wds_cloud.openers.capabilities import RangeRequest

__all__ = ["Fetch", "plan_fetches", "slices"]


@dataclass(frozen=True)
class Fetch:
    """One ranged read: bytes ``offset .. offset + length`` of ``url``, serving the requests
    whose positions (in the request list) are ``serves``."""

    url: str
    offset: int
    length: int
    serves: tuple[int, ...]

    @property
    def end(self) -> int:
        """One past the last byte read."""
        return self.offset + self.length


def plan_fetches(requests: Sequence[RangeRequest], *, gap: int, max_span: int) -> list[Fetch]:
    """The ranged reads that serve ``requests``, merging those of one object that lie within
    ``gap`` bytes of each other while the merged span stays within ``max_span`` bytes.

    Args:
        requests: the ranges asked for, in any order; duplicates and overlaps allowed.
        gap: the most bytes between two requested ranges that one read may span (0 merges only
            touching or overlapping ranges; -1 never merges).
        max_span: the most bytes one merged read may span (at least 1).

    Raises:
        ConfigError: a negative offset or length, ``gap < -1``, ``max_span < 1``.
    """
    if gap < -1 or max_span < 1:
        raise ConfigError(f"coalescing needs gap >= -1 and max_span >= 1, got {gap}, {max_span}")
    for r in requests:
        if r.offset < 0 or r.length < 0:
            raise ConfigError(f"a batch range needs offset >= 0 and length >= 0, got {r}")
    order = sorted(
        range(len(requests)),
        key=lambda i: (requests[i].url, requests[i].offset, -requests[i].length),
    )
    fetches: list[Fetch] = []
    url, start, end = "", 0, 0
    serves: list[int] = []
    for i in order:
        r = requests[i]
        r_end = r.offset + r.length
        if serves and r.url == url:
            overlapping = r.offset < end or r_end <= end  # no byte of it would be read twice
            near = gap >= 0 and r.offset - end <= gap
            if overlapping or (near and max(end, r_end) - start <= max_span):
                end = max(end, r_end)
                serves.append(i)
                continue
        if serves:
            fetches.append(Fetch(url, start, end - start, tuple(serves)))
        url, start, end, serves = r.url, r.offset, r_end, [i]
    if serves:
        fetches.append(Fetch(url, start, end - start, tuple(serves)))
    return fetches


def slices(
    requests: Sequence[RangeRequest], fetches: Sequence[Fetch], data: Sequence[bytes]
) -> list[bytes]:
    """Each request's bytes, in request order, cut from ``data`` (the bytes of each fetch).

    Raises:
        ValueError: a fetch's data is not ``length`` bytes long (a reader bug).
    """
    out: list[bytes | None] = [None] * len(requests)
    for fetch, blob in zip(fetches, data, strict=True):
        if len(blob) != fetch.length:
            raise ValueError(f"a read of {fetch.length} bytes returned {len(blob)}")
        view = memoryview(blob)
        for i in fetch.serves:
            r = requests[i]
            at = r.offset - fetch.offset
            out[i] = (
                blob if (at == 0 and r.length == len(blob)) else bytes(view[at : at + r.length])
            )
    missing = [i for i, b in enumerate(out) if b is None]
    if missing:
        raise ValueError(f"requests {missing[:5]} were served by no fetch")
    return [b for b in out if b is not None]
