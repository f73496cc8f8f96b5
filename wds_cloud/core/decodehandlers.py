"""The decoder handler types: the :class:`KeyedHandler` base and the built-in handlers.

:class:`KeyedHandler` is the base of every handler whose applicability depends on the key
alone (the image, video and audio handlers derive from it); :class:`Decoder`
(:mod:`wds_cloud.core.decode`) resolves such handlers once per distinct key. Here too:
:class:`Continue` (re-dispatch under another key), :class:`DecodingError`, the basic-type and
gunzip handlers and :func:`handle_extension`. Everything is re-exported by
:mod:`wds_cloud.core.decode`, webdataset's ``autodecode`` names.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from typing import Any

from wds_cloud.core.loads import Decode, decoders
from wds_cloud.errors import SampleError


class DecodingError(SampleError):
    """Decoding one field of a sample failed.

    Attributes:
        url: the shard URL of the sample (``__url__``).
        key: the sample key (``__key__``).
        k: the field (member extension) that failed, e.g. ``"json"``.
        sample: the undecoded sample (not kept when the error is pickled).
    """

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        key: str | None = None,
        k: str | None = None,
        sample: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message, url=url, key=key)
        self.k = k
        self.sample = sample

    def __reduce__(self) -> tuple[Any, ...]:
        state = {k: v for k, v in self.__dict__.items() if k != "sample"}
        return (type(self), self.args, state)


class Continue:
    """Returned by a handler to re-dispatch ``data`` under ``key`` (e.g. after gunzip).

    Args:
        key: the new key, with its leading dot (``".txt"``).
        data: the new raw data.
    """

    __slots__ = ("data", "key")

    def __init__(self, key: str, data: bytes) -> None:
        self.key = key
        self.data = data


class KeyedHandler:
    """A handler whose applicability depends on the key alone.

    Subclasses implement :meth:`resolve`; :class:`Decoder` calls it once per distinct key and
    caches the answer. A subclass that overrides ``__call__`` is treated like any other
    callable (called for every value), so custom behaviour is never bypassed.
    """

    def resolve(self, key: str) -> Decode | None:
        """Return the function that decodes values stored under ``key``, or None.

        Args:
            key: the sample key with a leading dot, e.g. ``".seg.png"``.
        """
        raise NotImplementedError

    def __call__(self, key: str, data: bytes) -> Any:
        """Decode ``data`` when ``key`` is handled here; None otherwise."""
        fn = self.resolve(key)
        return None if fn is None else fn(data)


class BasicHandlers(KeyedHandler):
    """Decode the basic types by the key's last extension (see :data:`decoders`).

    Args:
        table: extension -> function; defaults to the module's :data:`decoders`.
    """

    def __init__(self, table: dict[str, Decode] | None = None) -> None:
        self.table = decoders if table is None else table

    def resolve(self, key: str) -> Decode | None:
        """Return the decoder for the last extension of ``key``, or None."""
        return self.table.get(key.rpartition(".")[2])

    def __reduce__(self) -> tuple[Any, ...]:
        if self.table is decoders:
            return (_basichandlers, ())
        return (BasicHandlers, (self.table,))


def _basichandlers() -> BasicHandlers:
    return basichandlers


class _Gunzip:
    """Gunzip ``data`` and continue under ``key`` (picklable, no closure)."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __call__(self, data: bytes) -> Continue:
        return Continue(self.key, gzip.decompress(data))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Gunzip, (self.key,))


class GzFilter(KeyedHandler):
    """Gunzip values whose key ends in ``.gz`` and re-dispatch them on the rest of the key."""

    def resolve(self, key: str) -> Decode | None:
        """Return a gunzip step for ``*.gz`` keys, else None."""
        if key.endswith(".gz"):
            return _Gunzip(key[:-3])
        return None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_gzfilter, ())


def _gzfilter() -> GzFilter:
    return gzfilter


basichandlers = BasicHandlers()
gzfilter = GzFilter()


def _targets(extensions: str | Iterable[str]) -> list[tuple[str, ...]]:
    """Extensions (a space-separated string or a list) as lowercased component tuples."""
    if isinstance(extensions, str):
        extensions = extensions.split()
    return [tuple(e.lower().split(".")) for e in extensions]


def _matches(key: str, targets: list[tuple[str, ...]]) -> bool:
    """True when the key's trailing dot-components equal one of ``targets`` (ignoring case)."""
    parts = key.lower().split(".")
    for target in targets:
        if len(target) <= len(parts) and tuple(parts[-len(target) :]) == target:
            return True
    return False


def call_extension_handler(
    key: str, data: bytes, f: Decode, extensions: str | Iterable[str]
) -> Any:
    """Return ``f(data)`` when ``key`` ends in one of ``extensions``, else None (webdataset's).

    Args:
        key: the sample key with its leading dot, e.g. ``".seg.png"``.
        data: the raw value.
        f: the decoding function.
        extensions: e.g. ``["seg.png", "jpg"]``; components compare without regard to case.
    """
    return f(data) if _matches(key, _targets(extensions)) else None


class ExtensionHandler(KeyedHandler):
    """Call ``f(data)`` for keys ending in one of ``extensions`` (see handle_extension)."""

    def __init__(self, extensions: str | Iterable[str], f: Decode) -> None:
        self.extensions = _targets(extensions)
        self.f = f

    def resolve(self, key: str) -> Decode | None:
        """Return ``f`` when the key's trailing components match an extension."""
        return self.f if _matches(key, self.extensions) else None


def handle_extension(extensions: str | Iterable[str], f: Decode) -> ExtensionHandler:
    """Return a handler that calls ``f(data)`` for the given extensions.

    Extensions are space separated and may contain dots: ``"seg.png"`` matches only keys that
    end in ``seg.png``. Matching is case-insensitive.

    Args:
        extensions: e.g. ``"jpg jpeg"`` or ``["seg.png"]``.
        f: decoding function taking the raw bytes.
    """
    return ExtensionHandler(extensions, f)
