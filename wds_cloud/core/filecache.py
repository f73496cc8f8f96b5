"""webdataset 1.0.2's ``webdataset.cache`` names, as thin adapters over wds_cloud's one cache.

``FileCache`` downloads whole shards into a directory before they are read, ``StreamingOpen``
opens them without caching; both are pipeline stages turning ``{"url": ...}`` into
``{"url", "stream", "local_path"}`` dicts, as in webdataset. Their downloads go through
:class:`~wds_cloud.openers.cache.shardcache.ShardCache` (the opener registry, an atomic commit, a partial
file never served) and their size bound through :class:`~wds_cloud.openers.cache.lru.LRUCleanup`.

``default_cache_dir`` (``WDS_CLOUD_CACHE_DIR``, ``WDS_CACHE``, else ``./_cache``) and
``default_cache_size`` (``WDS_CLOUD_CACHE_SIZE``, ``WDS_CACHE_SIZE``, else ``1e18``) are read from
the environment when they are looked up, not when this module is imported.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any
from urllib.parse import urlparse

from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.openers.cache.lru import LRUCleanup
from wds_cloud.openers.cache.shardcache import ShardCache, env_cache_dir, env_cache_size, publish
from wds_cloud.openers.local import url_to_path
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme
from wds_cloud.redact import redact_url

log = logging.getLogger(__name__)


_DEFAULT_DIR = "./_cache"
_DEFAULT_SIZE = 1e18
_PLAIN_SCHEMES = ("", "file", "http", "https", "ftp", "ftps", "gs", "s3", "ais")
_PIPE_URL = re.compile(r"^(https?|hdfs|gs|ais|s3):")


class NotAUrlError(TypeError, AssertionError):
    """A URL argument that is not a string (an ``AssertionError`` too: webdataset asserts)."""


def _default_cache_dir() -> str:
    return env_cache_dir() or _DEFAULT_DIR


def _default_cache_size() -> float:
    size = env_cache_size()
    return float(size) if size is not None else _DEFAULT_SIZE


def __getattr__(name: str) -> Any:
    if name == "default_cache_dir":
        return _default_cache_dir()
    if name == "default_cache_size":
        return _default_cache_size()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check_str(url: Any) -> str:
    if not isinstance(url, str):
        raise NotAUrlError(f"expected a URL string, got {type(url).__name__}: {url!r}")
    return url


def islocal(url: str) -> bool:
    """True for a plain path or ``file:`` URL (wds_cloud's reading of the URL, as every opener)."""
    return url_scheme(url) == "file"


def url_to_cache_name(url: str, ndir: int = 0) -> str:
    """webdataset's cache file name for ``url``: its last ``ndir + 1`` path components.

    For URLs with an unknown scheme (``pipe:``, ...) it is the whole URL percent-encoded, last
    128 characters. Different URLs with the same file name share a name; wds_cloud's own
    :func:`~wds_cloud.openers.cache.shardcache.cache_name` keeps them apart.

    Raises:
        NotAUrlError: ``url`` is not a string (a ``TypeError`` and an ``AssertionError``).
    """
    _check_str(url)
    parsed = urlparse(url)
    if parsed.scheme in _PLAIN_SCHEMES:
        components = parsed.path.lstrip("/").split("/")
        return "/".join(components[-1 - ndir :])
    return urllib.parse.quote(url, safe="_+{}*,-")[-128:]


def pipe_cleaner(spec: str) -> str:
    """The URL inside a ``pipe:`` command (its first ``http(s)``/``hdfs``/``gs``/``ais``/``s3``
    word), else the command without ``pipe:``; other specs are returned unchanged."""
    if spec.startswith("pipe:"):
        spec = spec[len("pipe:") :]
        for word in spec.split(" "):
            if _PIPE_URL.match(word):
                return word
    return spec


def magic_filetype(fname: str) -> str:
    """``"<fname>: gzip compressed data"``, ``"<fname>: POSIX tar archive"`` or ``"<fname>: data"``
    from the file's first 512 bytes."""
    with open(fname, "rb") as f:
        header = f.read(512)
    if header[:2] == b"\x1f\x8b":
        return f"{fname}: gzip compressed data"
    if header[257:262] == b"ustar":
        return f"{fname}: POSIX tar archive"
    return f"{fname}: data"


def _require_file(fname: str) -> None:
    if not os.path.exists(fname):
        raise FileNotFoundError(f"no such file: {fname!r}")


def get_filetype(fname: str) -> str:
    """The ``file`` command's description of ``fname`` (:func:`magic_filetype` without it).

    Raises:
        FileNotFoundError: ``fname`` does not exist.
    """
    _require_file(fname)
    command = shutil.which("file")
    if command is None:
        return magic_filetype(fname)
    result = subprocess.run([command, "--", fname], stdout=subprocess.PIPE, text=True, check=True)
    return result.stdout


def check_tar_format(fname: str) -> bool:
    """True if ``fname`` starts like a tar archive or gzip data (webdataset's validator).

    Raises:
        FileNotFoundError: ``fname`` does not exist.
    """
    _require_file(fname)
    ftype = magic_filetype(fname).lower()
    return "tar archive" in ftype or "gzip compressed" in ftype


def _registry(registry: OpenerRegistry | None) -> OpenerRegistry:
    return registry or default_registry()


def download(
    url: str,
    dest: str,
    chunk_size: int = 1024**2,
    verbose: bool = False,
    *,
    registry: OpenerRegistry | None = None,
) -> None:
    """Copy ``url`` (any URL the opener registry opens) to the file ``dest``, atomically.

    The bytes go to a temporary file beside ``dest`` that is renamed only after a complete
    read; on any error it is deleted and ``dest`` is left as it was.
    """
    dest = os.fspath(dest)
    fd, temp = tempfile.mkstemp(
        prefix=f"{os.path.basename(dest)}.temp{os.getpid()}-", dir=os.path.dirname(dest) or "."
    )
    try:
        with _registry(registry).open(url) as stream:
            while data := stream.read(chunk_size):
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
        fd, owned = -1, fd
        publish(owned, temp, dest)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise
    log.debug("downloaded %s to %s", redact_url(url), dest)
    if verbose:
        print(f"# downloaded {redact_url(url)} to {dest}", file=sys.stderr)


class StreamingOpen:
    """Stage: open each shard URL for streaming, without a cache.

    Yields ``{"url", "stream"}``, plus ``"local_path"`` for local files.

    Args:
        verbose: kept for webdataset compatibility (events are logged at DEBUG).
        handler: called with an exception opening a URL: True continues with the next URL,
            False stops, raising propagates.
        registry: the opener registry (the default registry when None).
    """

    def __init__(
        self,
        verbose: bool = False,
        handler: Handler = reraise_exception,
        *,
        registry: OpenerRegistry | None = None,
    ) -> None:
        self.verbose = verbose
        self.handler = handler
        self.registry = registry

    def __call__(self, urls: Iterable[Any]) -> Iterator[dict[str, Any]]:
        for item in urls:
            url = item["url"] if isinstance(item, dict) else item
            try:
                stream = _registry(self.registry).open(url)
            except Exception as exn:
                if self.handler(exn):
                    continue
                break
            result: dict[str, Any] = {"url": url, "stream": stream}
            if islocal(url) and url != "-":
                result["local_path"] = url_to_path(url)
            yield result


class FileCache:
    """Stage: download each shard into ``cache_dir`` (once), then open the local copy.

    Yields ``{"url", "stream", "local_path"}``; local files are opened where they are.

    Args:
        cache_dir: the cache directory; default ``default_cache_dir``.
        url_to_name: names a URL's file inside ``cache_dir`` (default :func:`url_to_cache_name`,
            the URL's file name).
        verbose: report downloads and evictions on stderr.
        validator: ``validator(path)`` must accept a downloaded file, else it is deleted and a
            ``ValueError`` raised (default :func:`check_tar_format`; None accepts anything).
        handler: called with an exception getting a URL: True retries it (up to
            ``retries`` attempts, waiting ``retry_delay`` seconds, 1.5 times longer each time,
            then the URL is skipped), False stops, raising propagates.
        cache_size: bound in bytes for ``cache_dir``; the oldest files go first
            (:class:`LRUCleanup`, checked before each download); ``<= 0``: unbounded.
        cache_cleanup_interval: at most one cleanup per this many seconds.
        registry: the opener registry for downloads (the default registry when None).
    """

    retries = 10
    retry_delay = 1.0

    def __init__(
        self,
        cache_dir: str | None = None,
        *,
        url_to_name: Callable[[str], str] = url_to_cache_name,
        verbose: bool = False,
        validator: Callable[[str], bool] | None = check_tar_format,
        handler: Handler = reraise_exception,
        cache_size: int = -1,
        cache_cleanup_interval: int = 30,
        registry: OpenerRegistry | None = None,
    ) -> None:
        self.url_to_name = url_to_name
        self.validator = validator
        self.handler = handler
        self.cache_dir = _default_cache_dir() if cache_dir is None else cache_dir
        self.verbose = verbose
        self.registry = registry
        self.cleaner: LRUCleanup | None = None
        if cache_size > 0:
            self.cleaner = LRUCleanup(
                self.cache_dir, cache_size, verbose=verbose, interval=cache_cleanup_interval
            )

    def _cache(self) -> ShardCache:
        return ShardCache(
            self.cache_dir,
            max_bytes=0,  # the size bound is the cleaner's, as in webdataset
            registry=self.registry,
            verbose=bool(self.verbose),
            url_to_name=self.url_to_name,
        )

    def get_file(self, url: str) -> str:
        """The local path of ``url``: the file itself if local, else its (new) cached copy.

        Raises:
            NotAUrlError: ``url`` is not a string.
            ValueError: the downloaded file fails ``validator`` (it is deleted).
        """
        _check_str(url)
        if islocal(url):
            return url_to_path(url)
        cache = self._cache()
        dest = cache.path_for(url)
        if not os.path.exists(dest):
            if self.cleaner is not None:
                self.cleaner.cleanup()
            cache.fetch(url)
            if self.validator is not None and not self.validator(dest):
                ftype = get_filetype(dest)
                with open(dest, "rb") as f:
                    head = f.read(200)
                os.remove(dest)
                raise ValueError(
                    f"{dest} ({redact_url(url)}) is not a tar archive, but {ftype.strip()}; "
                    f"it starts with {head!r}"
                )
        return dest

    def __call__(self, urls: Iterable[Any]) -> Iterator[dict[str, Any]]:
        for item in urls:
            url = item["url"] if isinstance(item, dict) else item
            delay = self.retry_delay
            for _ in range(self.retries):
                try:
                    dest = self.get_file(url)
                    stream: IO[bytes] = open(dest, "rb")
                except Exception as exn:
                    if self.handler(exn):
                        time.sleep(delay)
                        delay *= 1.5
                        continue
                    return
                yield {"url": url, "stream": stream, "local_path": dest}
                break

    def __repr__(self) -> str:
        return f"FileCache({self.cache_dir!r})"
