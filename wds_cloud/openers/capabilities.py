"""What an opener can do besides ``open``: one run-time checkable protocol per capability.

Every opener has ``open(url, **options)`` (:class:`~wds_cloud.openers.registry.Opener`). The
rest is optional, and each optional method is a :class:`typing.Protocol` here (the built-in
openers that have it in brackets):

- :class:`Lister`: ``list(url) -> list[str]``, the full URLs under a prefix (local, s3, gs, ais,
  hf);
- :class:`SizedLister`: ``list_sizes(url) -> list[(url, size or None)]``, the same with the
  sizes the listing carries (s3, gs, ais, hf);
- :class:`Creator`: ``create(url) -> writer`` whose ``close()`` commits (local, pipe, s3, gs,
  ais);
- :class:`RangeReader`: ``read_range(url, offset, length) -> bytes`` with one request (local,
  http, s3, gs, ais, hf);
- :class:`Seekable`: ``open_at(url, offset) -> stream`` from byte ``offset`` (http, s3, gs, ais,
  hf);
- :class:`BatchReader`: ``read_batch(requests) -> list[bytes]``, many byte ranges (of one or
  many objects) in one call, in the order asked, with whatever the backend does best (one
  AIStore GetBatch request on ais; coalesced concurrent ranged GETs on s3, gs, http). A
  :class:`RangeRequest` is one ``(url, offset, length)``.

``registry.capability(url, Lister)`` returns the opener of ``url`` typed as a :class:`Lister`
when it has ``list``, else None; ``isinstance(opener, Lister)`` is the same check on an opener
in hand. A method that is missing or set to None is absent.

An opener also says whether its streams come over a network: a class attribute
``remote: bool`` (True on the http, s3, gs, ais and hf openers). The registry reads such streams
ahead in a background thread and opens the next shard early
(:mod:`wds_cloud.openers.streams.readahead`). An opener without the attribute is taken as
local (:func:`is_remote`), so a plugin that reads over a network declares ``remote = True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from wds_cloud.openers.streams.stream import ReadStream

__all__ = [
    "BatchReader",
    "Creator",
    "Lister",
    "RangeReader",
    "RangeRequest",
    "Seekable",
    "SizedLister",
    "is_remote",
]


@runtime_checkable
class Lister(Protocol):
    """An opener that lists: ``list(url)`` gives the full URLs (of the opener's scheme, never
    relative names) of every object whose URL starts with ``url``, recursively, sorted."""

    def list(self, url: str) -> Sequence[str]:  # pragma: no cover - protocol
        """Every object URL under the prefix ``url``."""
        ...


@runtime_checkable
class SizedLister(Protocol):
    """An opener whose listing carries sizes: ``list_sizes(url)`` is what ``list(url)`` gives,
    each URL with its size in bytes (None where the listing cannot tell)."""

    def list_sizes(
        self, url: str
    ) -> Sequence[tuple[str, int | None]]:  # pragma: no cover - protocol
        """``(url, size)`` of every object under the prefix ``url``."""
        ...


@runtime_checkable
class Creator(Protocol):
    """An opener that writes: ``create(url)`` returns a writable binary stream whose
    ``close()`` commits and ``abort()`` discards (a
    :class:`~wds_cloud.openers.streams.writer.CommittingWriter` on every built-in backend)."""

    def create(self, url: str) -> Any:  # pragma: no cover - protocol
        """A writer for ``url``."""
        ...


@runtime_checkable
class RangeReader(Protocol):
    """An opener with ranged reads: ``read_range(url, offset, length)`` returns bytes
    ``offset .. offset + length`` with one request (``pread`` on local files)."""

    def read_range(
        self, url: str, offset: int, length: int, **options: Any
    ) -> bytes:  # pragma: no cover - protocol
        """Bytes ``offset .. offset + length`` of ``url``."""
        ...


@runtime_checkable
class Seekable(Protocol):
    """An opener that streams from an offset: ``open_at(url, offset)`` is the stream of
    ``open(url)`` without its first ``offset`` bytes, fetched with one ranged request."""

    def open_at(
        self, url: str, offset: int, **options: Any
    ) -> ReadStream:  # pragma: no cover - protocol
        """Open ``url`` for reading from byte ``offset``."""
        ...


@dataclass(frozen=True)
class RangeRequest:
    """One entry of a batch read: bytes ``offset .. offset + length`` of ``url``."""

    url: str
    offset: int
    length: int


@runtime_checkable
class BatchReader(Protocol):
    """An opener that reads many ranges in one call: ``read_batch(requests)`` returns each
    request's bytes, in the order of ``requests``; a range it cannot read raises
    :class:`~wds_cloud.errors.ShardReadError` naming the URL and offset."""

    def read_batch(
        self, requests: Sequence[RangeRequest], **options: Any
    ) -> list[bytes]:  # pragma: no cover - protocol
        """The bytes of every request, in order."""
        ...


def is_remote(opener: object) -> bool:
    """The opener's ``remote`` attribute: whether its streams come over a network (False when
    it has none)."""
    return bool(getattr(opener, "remote", False))
