"""Sinks (where shard bytes go) and :func:`upload_shards`.

A *sink* is a writable binary stream with two ways to end: ``close()`` commits (the object or
file appears under its final name, completely) and ``abort()`` discards. :func:`open_sink` picks
one for a target:

============================  =============================================================
target                        sink
============================  =============================================================
local path / ``file://``      :class:`AtomicFileWriter`: temp file ``.<name>.tmp-<pid>-<rand>``
                              in the same directory, ``fsync`` + ``os.replace`` on close
existing FIFO / device path   written directly (nothing to rename)
``-``                         standard output (close flushes, does not close it)
``pipe:CMD``                  ``CMD`` run by the shell with the bytes on its stdin; close
                              fails unless it exits 0, abort kills it
any other URL (``s3://`` ..)  ``registry.for_url(url).create(url)`` from the backend
============================  =============================================================
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import IO, Any, Protocol, runtime_checkable

from wds_cloud.errors import ConfigError, UnsupportedSchemeError, UploadError
from wds_cloud.openers.local import AtomicFileWriter
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme

_COPY_CHUNK = 8 << 20


@runtime_checkable
class Sink(Protocol):
    """A writable binary stream that commits on ``close()`` and discards on ``abort()``."""

    def write(self, data: Any) -> Any:  # pragma: no cover - protocol
        """Write bytes."""
        ...

    def close(self) -> None:  # pragma: no cover - protocol
        """Commit."""
        ...

    def abort(self) -> None:  # pragma: no cover - protocol
        """Discard everything written."""
        ...


class _PlainSink:
    """A stream we write directly: FIFOs, devices, stdout. ``abort`` only closes."""

    def __init__(self, stream: IO[bytes], name: str, *, own: bool) -> None:
        self.name = name
        self._stream = stream
        self._own = own

    def write(self, data: Any) -> int:
        return self._stream.write(data)

    def close(self) -> None:
        self._stream.flush()
        if self._own:
            self._stream.close()

    def abort(self) -> None:
        if self._own:
            try:
                self._stream.close()
            except OSError:
                pass


class PipeSink:
    """``pipe:CMD``: run ``CMD`` in a shell and write to its stdin.

    ``close()`` waits for the command and raises :class:`UploadError` unless it exits with 0;
    ``abort()`` kills it.
    """

    def __init__(self, url: str) -> None:
        self.name = url
        self._proc = subprocess.Popen(url[len("pipe:") :], shell=True, stdin=subprocess.PIPE)
        assert self._proc.stdin is not None
        self._stdin: IO[bytes] = self._proc.stdin

    def write(self, data: Any) -> int:
        return self._stdin.write(data)

    def close(self) -> None:
        try:
            self._stdin.close()
        finally:
            rc = self._proc.wait()
        if rc != 0:
            raise UploadError(f"the pipe command exited with status {rc}", url=self.name)

    def abort(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        try:
            self._stdin.close()
        except OSError:
            pass
        self._proc.wait()


def local_path(target: str) -> str | None:
    """The local path for a local target (plain path or ``file://``), else None.

    Raises:
        ConfigError: a ``file://`` URL with a host other than ``localhost``.
    """
    if target == "-" or target.startswith("pipe:") or url_scheme(target) != "file":
        return None
    if target.startswith("file://"):
        rest = target[len("file://") :]
        if rest.startswith("localhost/"):
            rest = rest[len("localhost") :]
        if not rest.startswith("/"):
            raise ConfigError(f"{target!r}: file:// URLs must name a local absolute path")
        return rest
    return target


def open_sink(target: str | os.PathLike[str], registry: OpenerRegistry | None = None) -> Any:
    """Open the sink for ``target`` (see the module docstring for which one).

    Raises:
        UnsupportedSchemeError: the target's backend cannot write (no ``create``).
        MissingDependencyError: the backend's SDK is not installed.
        UploadError: the destination cannot be created.
    """
    target = os.fspath(target)
    if target == "-":
        return _PlainSink(sys.stdout.buffer, "-", own=False)
    if target.startswith("pipe:"):
        return PipeSink(target)
    path = local_path(target)
    if path is not None:
        try:
            regular = not os.path.exists(path) or os.path.isfile(path)
        except OSError:
            regular = True
        if regular:
            return AtomicFileWriter(path)
        return _PlainSink(open(path, "wb"), path, own=True)
    opener = (registry or default_registry()).for_url(target)
    create = getattr(opener, "create", None)
    if not callable(create):
        raise UnsupportedSchemeError(
            f"the {url_scheme(target)}:// opener {type(opener).__name__} cannot write "
            f"(it has no create(url)); cannot write {target!r}"
        )
    try:
        return create(target)
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


def _upload_one(path: str, url: str, registry: OpenerRegistry | None, progress: Any) -> str:
    sink = open_sink(url, registry)
    try:
        with open(path, "rb") as src:
            while True:
                chunk = src.read(_COPY_CHUNK)
                if not chunk:
                    break
                sink.write(chunk)
                if progress is not None:
                    progress.update(len(chunk))
        sink.close()
    except BaseException as exc:
        abort_quietly(sink)
        if not isinstance(exc, Exception):
            raise
        reason = exc.reason if isinstance(exc, UploadError) else f"{type(exc).__name__}: {exc}"
        raise UploadError(f"uploading {path!r} failed: {reason}", url=url) from exc
    return url


def upload_shards(
    paths: Iterable[str | os.PathLike[str]],
    dest_url_prefix: str,
    *,
    concurrency: int = 4,
    progress: bool = True,
    registry: OpenerRegistry | None = None,
) -> list[str]:
    """Upload local shard files to ``dest_url_prefix/<basename>``, several at a time.

    Each file is streamed into the destination's sink (see :func:`open_sink`): an object
    appears only once it is complete. On the first failure the uploads not yet started are
    cancelled, those running finish, and :class:`UploadError` names the file and the URL;
    shards already uploaded stay.

    Args:
        paths: local shard files.
        dest_url_prefix: ``s3://bucket/prefix``, ``gs://...``, ``ais://...``, a local directory.
        concurrency: number of uploads in flight.
        progress: show a tqdm progress bar (bytes) on stderr.
        registry: opener registry for remote destinations (the default one when None).

    Returns:
        The destination URLs, in the order of ``paths``.

    Raises:
        UploadError: an upload failed (the partial object was aborted).
        ConfigError: ``concurrency`` < 1 or two paths share a basename.
    """
    if concurrency < 1:
        raise ConfigError(f"concurrency must be >= 1, got {concurrency}")
    files = [os.fspath(p) for p in paths]
    prefix = dest_url_prefix.rstrip("/")
    urls = [f"{prefix}/{os.path.basename(p)}" for p in files]
    if len(set(urls)) != len(urls):
        raise ConfigError(f"two of the paths have the same basename; uploads to {prefix} collide")
    total = 0
    for path in files:
        try:
            total += os.path.getsize(path)
        except OSError as exc:
            raise UploadError(f"cannot upload {path!r}: {exc}", url=None) from exc
    bar: Any = None
    if progress and files:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="B", unit_scale=True, desc="upload", leave=False)
    lock = threading.Lock()

    class _Progress:
        def update(self, n: int) -> None:
            with lock:
                bar.update(n)

    reporter = _Progress() if bar is not None else None
    failed: list[BaseException] = []  # the first failure; later uploads do not start

    def task(path: str, url: str) -> None:
        if failed:
            return
        try:
            _upload_one(path, url, registry, reporter)
        except BaseException as exc:
            with lock:
                failed.append(exc)
            raise

    try:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            futures: list[Future[None]] = [
                pool.submit(task, path, url) for path, url in zip(files, urls, strict=True)
            ]
            _, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for future in pending:
                future.cancel()
            wait(futures)
        if failed:
            raise failed[0]
    finally:
        if bar is not None:
            bar.close()
    return urls
