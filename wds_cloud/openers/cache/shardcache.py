"""A local shard cache filled while shards are streamed.

``ShardCache(cache_dir).open(url)`` returns the cached file when there is one; otherwise it opens
the shard through the registry and returns a *tee* stream: every byte the reader consumes is also
written to a temporary file under ``<cache_dir>/%tmp/``. Only when the stream reaches a clean end
(for ``pipe:`` that includes a zero exit status; for HTTP the announced length) is the file
fsynced and atomically renamed to its final name. A partial file is never served.

Closing a stream before its end first reads on for at most ``drain_bytes`` (default 1 MiB, which
covers the zero padding after a tar's end-of-archive marker); if the end is reached the file is
committed, otherwise the temporary file is deleted and the rest of the shard is *not* downloaded.

Cache file names keep the URL readable: ``s3://bucket/a/x.tar`` is cached as
``<cache_dir>/s3/bucket/a/x.tar``; characters outside ``[A-Za-z0-9._-]`` are percent-encoded, a
query string becomes ``%3F<hash>`` after the name (``?etl=a`` and ``?etl=b`` differ), and names
longer than 200 characters per component (or ``pipe:`` commands) live under ``%long/<sha256>``.
Different URLs therefore never share a cache file.

``url_to_name=`` replaces that naming (webdataset's ``FileCache`` passes its flat
``url_to_cache_name``); :meth:`ShardCache.fetch` downloads a whole shard into the cache and returns
its path.

Several processes may share one cache directory: two may download the same shard at once (the
second rename wins, both files are complete), and readers only ever open renamed, complete files.
With ``max_bytes`` set, each commit evicts the least recently used files (by access time, which
every cache hit refreshes with ``os.utime``) until the total is at most ``max_bytes``; the file just
added and temporary files are never evicted (:func:`wds_cloud.openers.cache.lru.evict_lru`).

Environment (read when a :class:`ShardCache` is created, :data:`CACHE_SETTINGS`):
``WDS_CLOUD_CACHE_DIR`` or webdataset's ``WDS_CACHE`` (default directory),
``WDS_CLOUD_CACHE_SIZE`` or ``WDS_CACHE_SIZE`` (default ``max_bytes``, in bytes; ``1e11``
notation and binary units such as ``100G`` are accepted), ``WDS_CLOUD_CACHE_VERBOSE`` or
``WDS_VERBOSE_CACHE=1`` (report every hit, miss, commit and eviction on stderr, as webdataset
does; they are always logged at DEBUG), ``WDS_CLOUD_CACHE_DRAIN_BYTES``.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from wds_cloud.errors import ConfigError
from wds_cloud.openers.cache.lru import TEMP_DIR, cache_files, evict_lru
from wds_cloud.openers.local import url_to_path
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme
from wds_cloud.openers.streams.stream import ReadStream
from wds_cloud.redact import redact_url
from wds_cloud.settings import BOOL, BYTES, ConfigTable, Field, Kind, at_least, bytes_kind

log = logging.getLogger(__name__)

LONG_DIR = "%long"
_MAX_COMPONENT = 200
_SAFE = "-._~"


def _directory(value: Any) -> str:
    if not isinstance(value, str | os.PathLike):
        raise TypeError(value)
    return os.fspath(value)


#: How each :class:`ShardCache` setting is resolved: argument > ``WDS_CLOUD_CACHE_<FIELD>`` >
#: webdataset's variable > default (``docs/openers.md`` has the table in words). ``dir`` is the
#: ``cache_dir`` argument, ``size`` is ``max_bytes``.
CACHE_SETTINGS = ConfigTable(
    section="CACHE",
    owner="ShardCache",
    what="cache",
    fields=(
        Field(
            "dir",
            Kind("a directory", lambda text, source: os.path.expanduser(text), _directory),
            env=("WDS_CACHE",),
            argument="cache_dir",
        ),
        Field(
            "size",
            bytes_kind(fraction=True, exponent=True),
            env=("WDS_CACHE_SIZE",),
            argument="max_bytes",
        ),
        Field("verbose", BOOL, False, env=("WDS_VERBOSE_CACHE",)),
        Field("drain_bytes", BYTES, 1 << 20, checks=(at_least(0),)),
    ),
)


def _setting(name: str, environ: Mapping[str, str] | None) -> Any:
    return CACHE_SETTINGS.values({}, environ=environ)[name]


def env_cache_dir(environ: Mapping[str, str] | None = None) -> str | None:
    """The cache directory the environment asks for (``WDS_CLOUD_CACHE_DIR``, ``WDS_CACHE``)."""
    directory: str | None = _setting("dir", environ)
    return directory


def env_cache_size(environ: Mapping[str, str] | None = None) -> int | None:
    """The cache size bound the environment asks for (``WDS_CLOUD_CACHE_SIZE``,
    ``WDS_CACHE_SIZE``), in bytes (:func:`~wds_cloud.settings.parse_bytes`: ``1e11`` notation,
    fractions, binary units such as ``100G``, and a sign are accepted; ``<= 0`` means no bound).

    Raises:
        ConfigError: the value is not a byte count.
    """
    size: int | None = _setting("size", environ)
    return size


def cache_name(url: str) -> str:
    """The path of ``url``'s cache file relative to the cache directory (``/``-separated)."""
    if url_scheme(url) == "pipe":
        return _long_name(url)
    parts = urlsplit(url)
    components = [parts.scheme, parts.netloc, *parts.path.lstrip("/").split("/")]
    if any(c == "" for c in components[2:]):
        return _long_name(url)  # "a//b" or a trailing "/" would not be a file name
    encoded = [quote(c, safe=_SAFE) for c in components]
    encoded = ["%2E" if c == "." else "%2E%2E" if c == ".." else c for c in encoded]
    if parts.query or url.endswith("?"):
        digest = hashlib.sha256(parts.query.encode()).hexdigest()[:16]
        encoded[-1] += "%3F" + digest
    if any(len(c) > _MAX_COMPONENT for c in encoded):
        return _long_name(url)
    return "/".join(encoded)


def publish(fd: int, temp: str, final: str) -> None:
    """Make the file written through ``fd`` at ``temp`` appear at ``final``, complete or not at
    all: fsync, close, refresh its times, atomic rename (the one commit every cache uses)."""
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.makedirs(os.path.dirname(final) or ".", exist_ok=True)
    now = time.time()
    os.utime(temp, (now, now))
    os.replace(temp, final)


def _long_name(url: str) -> str:
    digest = hashlib.sha256(url.encode()).hexdigest()
    tail = quote(url.rstrip("/").rsplit("/", 1)[-1], safe=_SAFE)[-60:]
    return f"{LONG_DIR}/{digest}-{tail}" if tail else f"{LONG_DIR}/{digest}"


class _TeeReader(io.RawIOBase):
    """Streams ``source`` and copies what is read into a temporary file; see the module doc."""

    def __init__(
        self, source: ReadStream, temp: str, final: str, cache: ShardCache, url: str
    ) -> None:
        super().__init__()
        self._source = source
        self._temp = temp
        self._final = final
        self._cache = cache
        self.url = url
        self._fd: int | None = os.open(temp, os.O_WRONLY)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._fd is None:
            return 0
        try:
            readinto = getattr(self._source, "readinto", None)
            if readinto is not None:
                n = readinto(buffer) or 0
            else:
                data = self._source.read(len(buffer))
                n = len(data)
                memoryview(buffer).cast("B")[:n] = data
            if n:
                view = memoryview(buffer).cast("B")[:n]
                while view:
                    view = view[os.write(self._fd, view) :]
            else:
                self._commit()
        except BaseException:
            self._discard()
            raise
        return n

    def _commit(self) -> None:
        fd, self._fd = self._fd, None
        assert fd is not None
        publish(fd, self._temp, self._final)
        self._cache.note("commit", self.url, self._final)
        self._cache._after_commit(self._final)

    def _discard(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
            try:
                os.unlink(self._temp)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._fd is not None:
                self._drain()
        except Exception as exc:  # the shard is unusable; the reader has what it asked for
            log.debug("not caching %s: %r", redact_url(self.url), exc)
            self._discard()
        finally:
            self._discard()
            try:
                self._source.close()
            finally:
                super().close()

    def _drain(self) -> None:
        budget = self._cache.drain_bytes
        buffer = bytearray(min(budget, 1 << 20) or 1)
        while self._fd is not None and budget > 0:
            n = self.readinto(memoryview(buffer)[:budget])
            if not n:
                return  # committed by readinto
            budget -= n


class ShardCache:
    """Caches remote shards on local disk while they are read; see the module docstring.

    Args:
        cache_dir: the cache directory (created if needed); env ``WDS_CLOUD_CACHE_DIR`` or
            ``WDS_CACHE``.
        max_bytes: size bound for the cached files; env ``WDS_CLOUD_CACHE_SIZE`` or
            ``WDS_CACHE_SIZE``; None or ``<= 0`` means unbounded.
        registry: the opener registry used for misses (the default registry when None).
        drain_bytes: how much more is read on an early ``close()`` to complete the file; env
            ``WDS_CLOUD_CACHE_DRAIN_BYTES``; default 1 MiB.
        verbose: report hits, misses, commits and evictions on stderr; env
            ``WDS_CLOUD_CACHE_VERBOSE`` or ``WDS_VERBOSE_CACHE`` (a boolean: ``1`` or any
            non-zero integer, ``true``/``yes``/``on``).
        environ: the environment to read (``os.environ`` when None).
        url_to_name: ``url_to_name(url)`` gives the cache file's path relative to
            ``cache_dir`` (``/``-separated); default :func:`cache_name`.

    Raises:
        ConfigError: no directory given and neither variable set, or a bad value (naming
            its variable or argument).
    """

    def __init__(
        self,
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        max_bytes: int | None = None,
        registry: OpenerRegistry | None = None,
        drain_bytes: int | None = None,
        verbose: bool | None = None,
        url_to_name: Callable[[str], str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        given = {
            "dir": cache_dir,
            "size": max_bytes,
            "verbose": verbose,
            "drain_bytes": drain_bytes,
        }
        values = CACHE_SETTINGS.values(given, environ=environ)
        if values["dir"] is None:
            raise ConfigError("ShardCache needs cache_dir= or WDS_CLOUD_CACHE_DIR (WDS_CACHE)")
        size: int | None = values["size"]
        self.cache_dir = os.path.abspath(values["dir"])
        self.max_bytes = size if size and size > 0 else None
        self.registry = registry
        self.drain_bytes: int = values["drain_bytes"]
        self.verbose: bool = values["verbose"]
        self.url_to_name = url_to_name

    def note(self, event: str, url: str, path: str) -> None:
        """Report a cache event (hit, miss, commit, evict): DEBUG log, and stderr if verbose."""
        shown = redact_url(url)
        log.debug("shard cache %s: %s (%s)", event, shown, path)
        if self.verbose:
            print(f"[wds_cloud cache] {event} {shown} -> {path}", file=sys.stderr, flush=True)

    def _registry(self) -> OpenerRegistry:
        return self.registry or default_registry()

    def path_for(self, url: str) -> str:
        """Where ``url`` is (or would be) cached.

        Raises:
            ConfigError: ``url_to_name`` gave an empty name or one leaving the directory.
        """
        if self.url_to_name is None:
            return os.path.join(self.cache_dir, *cache_name(url).split("/"))
        name = self.url_to_name(url)
        parts = str(name).split("/")
        if not name or any(p in ("", ".", "..") for p in parts) or os.path.isabs(name):
            raise ConfigError(
                f"cache name {name!r} for {redact_url(url)} is not a file name inside the cache"
            )
        return os.path.join(self.cache_dir, *parts)

    def local_path(self, url: str) -> str | None:
        """The local file holding ``url``: the file itself for local URLs, else the cached copy
        if one exists (None otherwise, and for stdin)."""
        if url_scheme(url) == "file":
            return None if url == "-" else url_to_path(url)
        path = self.path_for(url)
        return path if os.path.isfile(path) else None

    def open(self, url: str, **options: Any) -> ReadStream:
        """Open ``url``: directly when local, from the cache on a hit, else through a tee.

        Errors are those of the backend's ``open``; a failed read deletes the temporary file.
        """
        if url_scheme(url) == "file":
            return self._registry().open(url, **options)
        final = self.path_for(url)
        try:
            stream = open(final, "rb", buffering=0)
        except FileNotFoundError:
            pass
        else:
            now = time.time()
            try:
                os.utime(stream.fileno(), (now, os.fstat(stream.fileno()).st_mtime))
            except OSError:
                pass
            self.note("hit", url, final)
            return stream
        self.note("miss", url, final)
        source = self._registry().open(url, **options)
        try:
            temp_dir = os.path.join(self.cache_dir, TEMP_DIR)
            os.makedirs(temp_dir, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f"{os.getpid()}-", suffix=".part", dir=temp_dir)
            os.close(fd)
        except BaseException:
            source.close()
            raise
        return _TeeReader(source, temp, final, self, url)

    def fetch(self, url: str, **options: Any) -> str:
        """Download ``url`` into the cache (unless it is there) and return the file's path.

        Local URLs return their own path. The download goes through :meth:`open`, so it is
        committed atomically or not at all.

        Errors are those of :meth:`open` and of reading the stream; nothing is cached then.
        """
        if url_scheme(url) == "file":
            return url_to_path(url)
        stream = self.open(url, **options)
        try:
            if isinstance(stream, _TeeReader):  # a miss: reading to the end commits the file
                buffer = bytearray(1 << 20)
                while stream.readinto(buffer):
                    pass
        finally:
            stream.close()
        return self.path_for(url)

    def size(self) -> int:
        """Total bytes of the committed files in the cache."""
        return sum(size for _, size, _ in cache_files(self.cache_dir))

    def _after_commit(self, added: str) -> None:
        if self.max_bytes is None:
            return
        evict_lru(self.cache_dir, self.max_bytes, keep=(added,), verbose=self.verbose)
