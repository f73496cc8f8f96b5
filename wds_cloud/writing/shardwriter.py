"""``ShardWriter``: split a stream of samples into numbered shards, each committed atomically.

Rollover, exactly: a sample is laid out (encoded, headers built) before anything is written.
If the open shard already holds at least one sample and the sample's tar bytes would take the
shard's uncompressed size (members plus the 1024-byte end-of-archive) past ``maxsize``, the shard
is closed first; so a shard exceeds ``maxsize`` only when one sample alone does. A shard is also
closed right after its ``maxcount``-th sample. Shards are opened lazily: zero samples give zero
shards (``webdataset`` opens the first shard eagerly and leaves an empty one).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from wds_cloud.errors import ConfigError
from wds_cloud.openers.registry import OpenerRegistry, abort_quietly
from wds_cloud.openers.streams.writer import CommitsOnExit, warn_discarded
from wds_cloud.redact import redact_url
from wds_cloud.writing.compression import wants_gzip
from wds_cloud.writing.indexing import check_indexable
from wds_cloud.writing.tarformat import SampleFormatter
from wds_cloud.writing.tarwriter import TarWriter

_FORMATTER_KW = ("keep_meta", "user", "group", "mode", "mtime")
_TARWRITER_KW = (*_FORMATTER_KW, "format", "compresslevel")
_END_OF_ARCHIVE = 1024


class ShardWriter(CommitsOnExit):
    """Write samples into shards ``pattern % n`` (webdataset-compatible arguments).

    Every shard is streamed into ``registry.for_url(name).create(name)`` (local paths: a
    ``.<name>.tmp-<pid>-<rand>`` file renamed into place; ``s3://``, ``gs://``, ``ais://``:
    multipart or resumable uploads; ``pipe:CMD``: the command's stdin). A shard is committed
    when it is full, and the last one by :meth:`close` (or a ``with`` block that exits
    normally). A failure, :meth:`abort`, leaving a ``with`` block by an exception, and garbage
    collection of an unclosed writer (with a :class:`ResourceWarning`) discard the open shard:
    no half shard appears under a final name.

    Args:
        pattern: ``%``-format with one integer, e.g. ``"out/train-%06d.tar"`` or
            ``"s3://bucket/train-%06d.tar.gz"``.
        maxcount: most samples per shard.
        maxsize: most uncompressed tar bytes per shard (see the module docstring).
        post: called with the shard's name (path or URL) after each shard is committed.
        start_shard: number of the first shard.
        verbose: 1 prints ``# writing NAME`` to stderr when a shard opens.
        opener: ``opener(name) -> writable binary stream`` replaces the built-in targets; the
            stream is closed when its shard is finished, and aborted (``abort()`` when it has
            one, else ``close()``) when the shard is discarded.
        encoder: see :class:`TarWriter`.
        compress: see :class:`TarWriter` (None: gzip when the name ends in ``.gz``/``.tgz``).
        registry: opener registry for URL targets (the default one when None).
        index: write each shard's DALI ``.idx`` beside it (committed right after the shard)
            and, at :meth:`close`, the dataset JSON with every shard's sample count
            (``docs/indexes.md``): True puts it at ``index.json`` beside the first shard, a
            string names it; an existing JSON there is updated (other shards stay listed).
        **tarwriter_kw: ``keep_meta``, ``user``, ``group``, ``mode``, ``mtime``, ``format``,
            ``compresslevel`` for :class:`TarWriter`.

    Attributes:
        shards: names of the committed shards, in order.
        shard: number of the next shard to open.
        count: samples in the open shard.
        size: uncompressed tar bytes in the open shard (without the end-of-archive blocks).
        total: samples written into committed or open shards.
        fname: name of the open shard, or None.

    Raises:
        ConfigError: a bad pattern, limit or keyword.
    """

    def __init__(
        self,
        pattern: str,
        maxcount: int = 100000,
        maxsize: float = 3e9,
        post: Callable[[str], Any] | None = None,
        start_shard: int = 0,
        verbose: int = 0,
        opener: Callable[[str], Any] | None = None,
        *,
        encoder: Any = True,
        compress: bool | str | None = None,
        registry: OpenerRegistry | None = None,
        index: bool | str = False,
        **tarwriter_kw: Any,
    ) -> None:
        unknown = sorted(set(tarwriter_kw) - set(_TARWRITER_KW))
        if unknown:
            raise ConfigError(f"unknown ShardWriter arguments: {', '.join(unknown)}")
        try:
            first, second = pattern % start_shard, pattern % (start_shard + 1)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"pattern {pattern!r} must hold one integer format: {exc}")
        if first == second:
            raise ConfigError(f"pattern {pattern!r} gives the same name for every shard")
        if maxcount < 1:
            raise ConfigError(f"maxcount must be >= 1, got {maxcount}")
        if maxsize <= 0:
            raise ConfigError(f"maxsize must be > 0, got {maxsize}")
        wants_gzip(first, compress)  # validates compress and the name early
        if index and opener is not None:
            raise ConfigError("index= needs the built-in targets; it cannot be used with opener=")
        self.index = index
        self.index_shards: list[Any] = []  # ShardInfo of each committed shard (with index=)
        self.pattern = pattern
        self.maxcount = maxcount
        self.maxsize = maxsize
        self.post = post
        self.verbose = verbose
        self.opener = opener
        self.registry = registry
        self._compress = compress
        self._encoder = encoder
        self._kw = tarwriter_kw
        self.formatter = SampleFormatter(
            encoder=encoder, **{k: v for k, v in tarwriter_kw.items() if k in _FORMATTER_KW}
        )
        self.shards: list[str] = []
        self.shard = start_shard
        self.count = 0
        self.size = 0
        self.total = 0
        self.fname: str | None = None
        self.closed = False
        self._tar: TarWriter | None = None
        self._stream: Any = None

    def write(self, obj: Mapping[str, Any]) -> int:
        """Write one sample, opening or rolling over shards as needed.

        Returns:
            The uncompressed tar bytes the sample took.

        Raises:
            SampleError: the sample cannot be encoded (nothing was written; the writer goes on).
            UploadError: writing or committing a shard failed; that shard was discarded and its
                number will be reused by the next write.
        """
        if self.closed:
            raise ValueError("write to a closed ShardWriter")
        formatted = self.formatter.format(obj)
        if self.index:
            check_indexable(formatted, key=obj.get("__key__"))
        if (
            self._tar is not None
            and self.count > 0
            and self.size + formatted.size + _END_OF_ARCHIVE > self.maxsize
        ):
            self._finish()
        if self._tar is None:
            self._open()
        assert self._tar is not None
        try:
            size = self._tar.write_formatted(formatted)
        except BaseException:
            self._discard()
            raise
        self.count += 1
        self.total += 1
        self.size += size
        if self.count >= self.maxcount:
            self._finish()
        return size

    def _open(self) -> None:
        name = self.pattern % self.shard
        if self.verbose:
            print(
                f"# writing {redact_url(name)} (total {self.total} samples so far)", file=sys.stderr
            )
        if self.opener is not None:
            stream = self.opener(name)
            try:
                tar = TarWriter(
                    stream,
                    compress=wants_gzip(name, self._compress),
                    encoder=self._encoder,
                    **self._kw,
                )
            except BaseException:
                abort_quietly(stream)
                raise
            self._stream = stream
        else:
            tar = TarWriter(
                name,
                compress=self._compress,
                encoder=self._encoder,
                registry=self.registry,
                index=bool(self.index),
                **self._kw,
            )
        self._tar = tar
        self.fname = name
        self.count = 0
        self.size = 0

    def _finish(self) -> None:
        """Commit the open shard and call ``post``."""
        tar, name = self._tar, self.fname
        if tar is None or name is None:
            return
        try:
            tar.close()
            if self._stream is not None:
                stream, self._stream = self._stream, None
                stream.close()
        except BaseException:
            self._discard()
            raise
        self._tar = None
        self.fname = None
        self.shards.append(name)
        if tar.index is not None:
            from wds_cloud.index.datasetjson import ShardInfo

            self.index_shards.append(ShardInfo(name, len(tar.index), tar.filesize))
        self.shard += 1
        self.count = 0
        self.size = 0
        if self.post is not None:
            self.post(name)

    def _discard(self) -> None:
        """Abort the open shard (its samples are not counted in ``total`` any more)."""
        tar, self._tar = self._tar, None
        if tar is not None:
            tar.abort()
        stream, self._stream = self._stream, None
        if stream is not None:
            abort_quietly(stream)
        self.total -= self.count
        self.count = 0
        self.size = 0
        self.fname = None

    def finish(self) -> None:
        """Commit the open shard, if any (webdataset name; the writer stays usable)."""
        self._finish()

    def close(self) -> None:
        """Commit the open shard, if any, and refuse further writes."""
        if self.closed:
            return
        try:
            self._finish()
        finally:
            self.closed = True
        if self.index and self.index_shards:
            self._write_dataset_json()

    def _write_dataset_json(self) -> None:
        """Write (or update) the dataset JSON with the shards this writer committed."""
        from wds_cloud.index.datasetjson import (
            DatasetIndex,
            default_json_url,
            save_dataset_json,
        )

        target = self.index if isinstance(self.index, str) else default_json_url(self.shards)
        save_dataset_json(
            DatasetIndex(list(self.index_shards)), target, registry=self.registry, update=True
        )
        self.index_json = target

    def abort(self) -> None:
        """Discard the open shard, if any, and refuse further writes (committed shards stay)."""
        if not self.closed:
            self.closed = True
            self._discard()

    def __del__(self) -> None:
        # Never commit on garbage collection: the open shard is discarded, and a warning says so.
        if getattr(self, "closed", True) or getattr(self, "_tar", None) is None:
            return
        warn_discarded(type(self).__name__, self.fname)
        self.abort()
