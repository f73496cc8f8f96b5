""":func:`upload_shards`, over the sinks of :func:`wds_cloud.openers.registry.open_sink`
(re-exported here).

A *sink* is a :class:`~wds_cloud.openers.streams.writer.CommittingWriter` from the target's opener:
``open_sink(target)`` is ``registry.for_url(target).create(target)`` for every scheme, so every
target follows the same rules: ``close()`` commits (the file or object appears under its final
name, completely) and everything else discards (``abort()``, an exception, a failed write,
garbage collection). Which writer each target gets:

============================  =============================================================
target                        sink (``create()`` of the target's opener)
============================  =============================================================
local path / ``file:`` URL    ``AtomicFileWriter``: temp file ``.<name>.tmp-<pid>-<rand>``
                              in the same directory, ``fsync`` + ``os.replace`` on close
existing FIFO / device path   ``DirectWriter``: written in place (nothing to rename)
``-``                         standard output (close flushes, does not close it)
``pipe:CMD``                  ``PipeWriter``: ``CMD`` run by the shell with the bytes on its
                              stdin, refused while ``pipe:`` is switched off; close fails
                              unless it exits 0, abort kills it
``s3://`` ``gs://`` ``ais://``  multipart / resumable uploads, completed on close
============================  =============================================================
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Any

from wds_cloud.errors import ConfigError, UploadError
from wds_cloud.openers.registry import OpenerRegistry, abort_quietly, open_sink

__all__ = ["abort_quietly", "open_sink", "upload_shards"]

_COPY_CHUNK = 8 << 20


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
