"""The opener registry: URL scheme -> backend that turns a URL into a binary stream.

A registry is a plain object. A default one exists (:func:`default_registry`), tests and users
can build their own, and it pickles into DataLoader workers with the dataset. Built-in backends
are registered as lazy ``"package.module:Class"`` strings, so ``import wds_cloud`` never imports
boto3, google-cloud-storage, aistore or torch.
"""

from __future__ import annotations

import functools
import importlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar, runtime_checkable

from wds_cloud.errors import (
    ConfigError,
    MissingDependencyError,
    UnsupportedSchemeError,
    UploadError,
    WdsCloudError,
)
from wds_cloud.openers.capabilities import Creator, RangeReader, is_remote
from wds_cloud.openers.streams.readahead import DEFAULT_READAHEAD, ReadAhead, readahead_bytes
from wds_cloud.openers.streams.stream import ReadStream, read_full, skip_bytes
from wds_cloud.redact import redact_url


@runtime_checkable
class Opener(Protocol):
    """What a backend provides: ``open(url, **options)`` returning a
    :class:`~wds_cloud.openers.streams.stream.ReadStream`.

    Backends may also provide ``list``, ``list_sizes``, ``create``, ``read_range`` and
    ``open_at``, each a protocol of :mod:`wds_cloud.openers.capabilities`
    (:meth:`OpenerRegistry.capability` finds them), and declare ``remote = True`` when their
    streams come over a network (read ahead by the registry).
    """

    def open(self, url: str, **options: Any) -> ReadStream:  # pragma: no cover - protocol
        """Open ``url`` for reading."""
        ...


C = TypeVar("C")

# USE_AIS_FOR (webdataset's switch): these schemes may be read through AIStore, see get()
_USE_AIS_FOR = "USE_AIS_FOR"
_ROUTABLE = frozenset({"s3", "gs", "gcs"})

# scheme -> (lazy target, extra that provides its SDK)
BUILTIN_OPENERS: dict[str, tuple[str, str | None]] = {
    "abfs": ("wds_cloud.openers.azure.opener:AzureOpener", "azure"),
    "abfss": ("wds_cloud.openers.azure.opener:AzureOpener", "azure"),
    "ais": ("wds_cloud.openers.ais.opener:AisOpener", "ais"),
    "az": ("wds_cloud.openers.azure.opener:AzureOpener", "azure"),
    "azure": ("wds_cloud.openers.azure.opener:AzureOpener", "azure"),
    "file": ("wds_cloud.openers.local:LocalOpener", None),
    "gcs": ("wds_cloud.openers.gcs.opener:GcsOpener", "gcs"),
    "gs": ("wds_cloud.openers.gcs.opener:GcsOpener", "gcs"),
    "http": ("wds_cloud.openers.http.opener:HttpOpener", None),
    "hf": ("wds_cloud.openers.hf.opener:HfOpener", None),
    "https": ("wds_cloud.openers.http.opener:HttpOpener", None),
    "pipe": ("wds_cloud.openers.pipe:PipeOpener", None),
    "s3": ("wds_cloud.openers.s3.opener:S3Opener", "s3"),
}


def url_scheme(url: str) -> str:
    """Return the registry scheme of ``url``: ``"file"`` for plain paths and ``-``.

    ``pipe:CMD`` has scheme ``pipe``; ``s3://b/k`` has ``s3``. A single letter before a colon
    (``C:\\data``) is treated as a local path.
    """
    if url.startswith("pipe:"):
        return "pipe"
    colon = url.find(":")
    if colon <= 1:
        return "file"
    head = url[:colon]
    if not head.replace("+", "").replace("-", "").replace(".", "").isalnum():
        return "file"
    if url[colon + 1 : colon + 3] != "//" and head != "file":
        # "name:with:colons.tar" is a local file; schemes we know always use "//".
        return "file"
    return head.lower()


class OpenerRegistry:
    """Maps URL schemes to openers.

    Args:
        builtins: register the built-in backends (lazily) when True.
        readahead: bytes read ahead per stream of a remote opener (one whose ``remote`` is
            True: ``s3``, ``gs``, ``http``, ``ais``) by a background thread, with the next shard
            opened early; ``0`` turns both off; None: ``WDS_CLOUD_READAHEAD`` or 16 MiB (see :mod:`wds_cloud.openers.streams.readahead`).

    Raises:
        ConfigError: ``readahead`` (or ``WDS_CLOUD_READAHEAD``) is not a byte count.
    """

    def __init__(self, *, builtins: bool = True, readahead: int | str | None = None) -> None:
        self.readahead = readahead_bytes(readahead)
        self._entries: dict[str, Any] = {}
        self._extras: dict[str, str | None] = {}
        self._resolved: dict[str, Any] = {}
        # (scheme, protocol) -> (the opener asked, its answer), see capability()
        self._capable: dict[tuple[str, type], tuple[Any, bool]] = {}
        self._routes: dict[str, Any] = {}  # scheme -> AisRoute (USE_AIS_FOR)
        self._lock = threading.Lock()
        if builtins:
            for scheme, (target, extra) in BUILTIN_OPENERS.items():
                self.register(scheme, target, extra=extra)

    def register(
        self,
        scheme: str,
        opener: Any,
        *,
        override: bool = False,
        extra: str | None = None,
    ) -> None:
        """Register ``opener`` for ``scheme``.

        Args:
            scheme: URL scheme without ``://`` (``"s3"``), or ``"file"`` for local paths.
            opener: an object with ``open(url, **options)``, or a lazy ``"pkg.mod:Class"``
                string instantiated without arguments on first use.
            override: replace an existing registration instead of raising.
            extra: the ``wds_cloud`` extra that installs the backend's SDK, named in
                :class:`MissingDependencyError` when its import fails.

        Raises:
            ValueError: the scheme is taken and ``override`` is False, or ``opener`` is neither
                a dotted path nor an object with ``open``.
        """
        scheme = scheme.lower()
        if isinstance(opener, str):
            if ":" not in opener:
                raise ValueError(f"lazy opener {opener!r} must look like 'package.module:Class'")
        elif not callable(getattr(opener, "open", None)):
            raise ValueError(f"opener for {scheme!r} has no open(url, **options) method")
        with self._lock:
            if scheme in self._entries and not override:
                raise ValueError(
                    f"scheme {scheme!r} is already registered; pass override=True to replace it"
                )
            self._entries[scheme] = opener
            self._extras[scheme] = extra
            self._resolved.pop(scheme, None)

    def unregister(self, scheme: str) -> None:
        """Remove ``scheme``; unknown schemes raise :class:`UnsupportedSchemeError`."""
        scheme = scheme.lower()
        with self._lock:
            if scheme not in self._entries:
                raise self._unknown(scheme)
            del self._entries[scheme]
            self._extras.pop(scheme, None)
            self._resolved.pop(scheme, None)

    def schemes(self) -> tuple[str, ...]:
        """The registered schemes, sorted."""
        return tuple(sorted(self._entries))

    def __contains__(self, scheme: object) -> bool:
        return isinstance(scheme, str) and scheme.lower() in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.schemes())

    def _unknown(self, scheme: str) -> UnsupportedSchemeError:
        known = ", ".join(self.schemes()) or "(none)"
        return UnsupportedSchemeError(f"no opener registered for scheme {scheme!r}; known: {known}")

    def get(self, scheme: str) -> Any:
        """Return the opener for ``scheme``, importing a lazy entry on first use.

        A built-in opener is made again when the environment it was made from changed (its
        ``environment_changed()`` says so: the ``ais://`` opener watches its endpoint and
        token variables), so a refreshed ``AIS_AUTHN_TOKEN`` is used from the next shard on.

        When ``USE_AIS_FOR`` lists ``scheme`` (``s3``, ``gs``), the answer is an
        :class:`~wds_cloud.openers.ais.route.AisRoute`: reads and listings go through the
        ``ais`` opener to the AIStore cluster, writes to the scheme's own opener. The
        variable is read on every call, never at import.

        Raises:
            UnsupportedSchemeError: nothing is registered for ``scheme``.
            MissingDependencyError: the backend's SDK is not installed.
            ConfigError: ``USE_AIS_FOR`` lists ``scheme`` but names no cluster
                (``AIS_ENDPOINT``), or has a bad value.
        """
        scheme = scheme.lower()
        if scheme in _ROUTABLE and os.environ.get(_USE_AIS_FOR, "").strip():
            route = self._ais_route(scheme)
            if route is not None:
                return route
        return self._registered(scheme)

    def _registered(self, scheme: str) -> Any:
        """The opener registered for ``scheme`` (see :meth:`get`), never routed."""
        opener = self._resolved.get(scheme)
        if opener is not None and not _environment_changed(opener, self._entries.get(scheme)):
            return opener
        with self._lock:
            if scheme not in self._entries:
                raise self._unknown(scheme)
            entry = self._entries[scheme]
            if isinstance(entry, str):
                entry = self._load(scheme, entry)
            self._resolved[scheme] = entry
            return entry

    def _ais_route(self, scheme: str) -> Any:
        """The :class:`~wds_cloud.openers.ais.route.AisRoute` for ``scheme``, or None when
        ``USE_AIS_FOR`` does not list it (one per scheme and ``ais`` opener, kept)."""
        from wds_cloud.openers.ais.route import AisRoute, require_endpoint, routed_provider

        provider = routed_provider(scheme)
        if provider is None:
            return None
        if isinstance(self._entries.get("ais"), str):  # the built-in one: from the environment
            require_endpoint(scheme)
        try:
            ais = self._registered("ais")
        except ConfigError as exc:
            raise ConfigError(
                f"{_USE_AIS_FOR} reads {scheme}:// URLs through AIStore, whose settings are "
                f"bad: {exc}"
            ) from exc
        route = self._routes.get(scheme)
        if route is None or route.ais is not ais or route.provider != provider:
            direct = functools.partial(self._registered, scheme)
            route = self._routes[scheme] = AisRoute(ais, scheme, provider, direct)
        return route

    def _load(self, scheme: str, target: str) -> Any:
        module_name, _, attr = target.partition(":")
        extra = self._extras.get(scheme)
        try:
            module = importlib.import_module(module_name)
        except MissingDependencyError:
            raise
        except ImportError as exc:
            raise MissingDependencyError(
                f"the {scheme}:// backend could not be imported ({exc})", extra=extra
            ) from exc
        return getattr(module, attr)()

    def for_url(self, url: str) -> Any:
        """Return the opener responsible for ``url``."""
        return self.get(url_scheme(url))

    def open(self, url: str, **options: Any) -> ReadStream:
        """Open ``url`` for reading with the opener registered for its scheme; streams of the
        remote schemes are read ahead by a background thread (:attr:`readahead` bytes)."""
        opener: Opener = self.for_url(url)
        stream = opener.open(url, **options)
        if self.reads_ahead(url):
            return ReadAhead(stream, url=url, limit=self.readahead)
        return stream

    def reads_ahead(self, url: str) -> bool:
        """Whether :meth:`open` reads ``url`` ahead (and shard readers open it early): read-ahead
        is on and the opener of ``url`` is ``remote``. False when there is no opener to be had
        (an unknown scheme, a missing SDK): opening ``url`` raises that error."""
        if self.readahead <= 0:
            return False
        try:
            return is_remote(self.for_url(url))
        except WdsCloudError:
            return False

    def capability(self, url: str, kind: Callable[..., C]) -> C | None:
        """The opener of ``url`` as a ``kind`` when it has that capability, else None.

        The answer is kept per scheme, ``kind`` and opener object (a run-time protocol check
        costs microseconds, and random access asks once per sample).

        Args:
            url: the URL whose opener is asked.
            kind: a protocol of :mod:`wds_cloud.openers.capabilities` (``Lister``,
                ``SizedLister``, ``Creator``, ``RangeReader``, ``Seekable``).

        Raises:
            UnsupportedSchemeError: nothing is registered for the scheme of ``url``.
            MissingDependencyError: the backend's SDK is not installed.
            TypeError: ``kind`` is not a class.
        """
        # Callable[..., C], not type[C]: mypy accepts no protocol where type[C] is expected
        # (its type-abstract check), and these are all protocols.
        if not isinstance(kind, type):
            raise TypeError(f"capability() needs a protocol class, got {kind!r}")
        scheme = url_scheme(url)
        opener = self.get(scheme)
        known = self._capable.get((scheme, kind))
        if known is None or known[0] is not opener:
            known = self._capable[(scheme, kind)] = (opener, isinstance(opener, kind))
        found: C | None = opener if known[1] else None
        return found

    def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes:
        """Bytes ``offset .. offset + length`` of ``url``: the opener's ``read_range`` (one
        ranged request on every built-in network backend, ``pread`` on local files), or for an
        opener without one (``pipe:``, a plugin) a stream opened and read up to the range.

        Raises:
            ShardReadError: the object ends before ``offset + length``.
            ShardError: the opener's errors.
        """
        reader = self.capability(url, RangeReader)
        if reader is not None:
            return bytes(reader.read_range(url, offset, length, **options))
        from wds_cloud.errors import ShardReadError

        stream = self.for_url(url).open(url, **options)
        try:
            data = read_full(stream, length) if skip_bytes(stream, offset) == 0 else b""
        finally:
            stream.close()
        if len(data) < length:
            raise ShardReadError(
                f"the stream ended before byte {offset + length}", url=url, offset=offset
            )
        return data

    def __getstate__(self) -> dict[str, Any]:
        # Resolved lazy entries are re-imported in the child; explicit objects travel as is.
        return {
            "entries": dict(self._entries),
            "extras": dict(self._extras),
            "readahead": self.readahead,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.readahead = state.get("readahead", DEFAULT_READAHEAD)
        self._entries = state["entries"]
        self._extras = state["extras"]
        self._resolved = {}
        self._capable = {}
        self._routes = {}
        self._lock = threading.Lock()

    def copy(self) -> OpenerRegistry:
        """A registry with the same entries, to customise without touching this one."""
        new = OpenerRegistry(builtins=False, readahead=self.readahead)
        new._entries = dict(self._entries)
        new._extras = dict(self._extras)
        return new


def _environment_changed(opener: Any, entry: Any) -> bool:
    """Whether a built-in opener this registry made from the environment (a lazy entry) was
    made from other values than the environment holds now (``environment_changed()``, e.g.
    a refreshed ``AIS_AUTHN_TOKEN``); the registry then makes a new one. Openers registered as
    objects are the caller's and are never replaced."""
    if not isinstance(entry, str):
        return False
    changed = getattr(opener, "environment_changed", None)
    return callable(changed) and bool(changed())


_default: OpenerRegistry | None = None
_default_lock = threading.Lock()


def default_registry() -> OpenerRegistry:
    """The process-wide default registry (created on first use)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = OpenerRegistry()
    return _default


def register_opener(scheme: str, opener: Any, *, override: bool = False) -> None:
    """Register ``opener`` for ``scheme`` in the default registry."""
    default_registry().register(scheme, opener, override=override)


def open_url(url: str, *, registry: OpenerRegistry | None = None, **options: Any) -> ReadStream:
    """Open ``url`` for reading through ``registry`` (the default one when None)."""
    return (registry or default_registry()).open(url, **options)


def read_range(
    url: str, offset: int, length: int, *, registry: OpenerRegistry | None = None, **options: Any
) -> bytes:
    """Bytes ``offset .. offset + length`` of ``url`` (see :meth:`OpenerRegistry.read_range`)."""
    return (registry or default_registry()).read_range(url, offset, length, **options)


def open_sink(target: str | os.PathLike[str], registry: OpenerRegistry | None = None) -> Any:
    """Open the sink for ``target``: ``registry.for_url(target).create(target)``.

    Raises:
        UnsupportedSchemeError: the target's backend cannot write (no ``create``).
        MissingDependencyError: the backend's SDK is not installed.
        ConfigError: a ``pipe:`` target while ``pipe:`` is switched off, a NUL byte, a bad URL.
        UploadError: the destination cannot be created.
    """
    target = os.fspath(target)
    registry = registry or default_registry()
    creator = registry.capability(target, Creator)
    if creator is None:
        opener = registry.for_url(target)
        raise UnsupportedSchemeError(
            f"the {url_scheme(target)}:// opener {type(opener).__name__} cannot write "
            f"(it has no create(url)); cannot write {redact_url(target)!r}"
        )
    try:
        return creator.create(target)
    except UploadError:
        raise
    except OSError as exc:
        raise UploadError(f"cannot start writing: {exc}", url=target) from exc


def abort_quietly(sink: Any) -> BaseException | None:
    """Call ``sink.abort()`` (or ``close()`` when it has none); return what it raised."""
    try:
        abort = getattr(sink, "abort", None)
        if callable(abort):
            abort()
        else:
            sink.close()
    except Exception as exc:
        return exc
    return None
