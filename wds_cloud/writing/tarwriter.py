"""``TarWriter``: write samples (dicts) as WebDataset tar shards, byte-for-byte reproducibly.

Headers and encoding are :mod:`wds_cloud.writing.tarformat`'s (ustar with an integer ``mtime``,
PAX only where a member needs it); this module writes them to a stream or URL, optionally
gzipped with ``mtime=0`` and no file name in the gzip header, so two runs give identical bytes.
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Mapping
from typing import Any

from wds_cloud.errors import ConfigError, UploadError
from wds_cloud.openers.registry import OpenerRegistry, abort_quietly, open_sink
from wds_cloud.openers.streams.writer import CommitsOnExit, warn_discarded
from wds_cloud.writing.compression import GzipStream, wants_gzip
from wds_cloud.writing.indexing import check_indexable, index_target, open_index
from wds_cloud.writing.tarformat import BLOCK, DEFAULT_MTIME, FormattedSample, SampleFormatter

_END_OF_ARCHIVE = bytes(2 * BLOCK)
_JOIN_LIMIT = 256 << 10  # samples up to this size are joined and written in one call


_FORMATS = (None, tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT, "USTAR_FORMAT", "PAX_FORMAT")


class TarWriter(CommitsOnExit):
    """Write samples to a tar shard (webdataset-compatible arguments, deterministic output).

    A target given by name is opened with its backend's ``create()`` (see
    :func:`~wds_cloud.openers.registry.open_sink`) and committed only by :meth:`close` (or by a
    ``with`` block that exits normally). :meth:`abort`, an exception leaving the ``with``
    block, a failed write and garbage collection (which also emits a :class:`ResourceWarning`)
    discard it: nothing appears under the final name.

    Args:
        fileobj: a writable binary stream, or a target: local path (written to a temp file
            renamed on :meth:`close`), ``file:`` URL, ``-`` (stdout), ``pipe:CMD``, or a URL
            whose backend can ``create()`` (``s3://``, ``gs://``, ``ais://``).
        user: ``uname`` of every member.
        group: ``gname`` of every member.
        mode: permission bits of every member.
        compress: None (gzip when the name ends in ``.gz``/``.tgz``), False, True or ``"gz"``.
        encoder: True (default extension table), False (bytes and str only), a dict
            (extension -> function, replacing the table) or a callable on the whole sample.
        keep_meta: also write fields starting with ``_``.
        mtime: integer modification time of every member (None means the fixed default).
        format: accepted for compatibility: None, ustar or pax (output is always ustar with
            PAX records only where needed, which is valid for both).
        registry: opener registry for URL targets (the default one when None).
        compresslevel: gzip level.
        index: also write the shard's DALI ``.idx`` (``docs/indexes.md``): True puts it beside
            a named target (``x.tar`` -> ``x.idx``), a string names where; it is committed
            right after the shard and discarded with it. Sample keys with whitespace are then
            refused (:class:`SampleError`): the format cannot hold them.

    Attributes:
        index: the :class:`~wds_cloud.index.format.ShardIndex` written (after :meth:`close`).

    Raises:
        ConfigError: a bad argument, or a ``pipe:`` target while ``pipe:`` is switched off.
        UploadError: the target cannot be created.
    """

    def __init__(
        self,
        fileobj: Any,
        user: str = "bigdata",
        group: str = "bigdata",
        mode: int = 0o444,
        compress: bool | str | None = None,
        encoder: Any = True,
        keep_meta: bool = False,
        mtime: int | float | None = DEFAULT_MTIME,
        format: Any = None,
        *,
        registry: OpenerRegistry | None = None,
        compresslevel: int = 6,
        index: bool | str = False,
    ) -> None:
        if format not in _FORMATS:
            raise ConfigError(f"format must be None, ustar or pax, got {format!r}")
        self.formatter = SampleFormatter(
            encoder=encoder, keep_meta=keep_meta, user=user, group=group, mode=mode, mtime=mtime
        )
        gz = wants_gzip(fileobj, compress)
        if isinstance(fileobj, str | os.PathLike):
            self.name: str | None = os.fspath(fileobj)
            self._sink: Any = open_sink(self.name, registry)
            self._own = True
        else:
            name = getattr(fileobj, "name", None)
            self.name = name if isinstance(name, str) else None
            self._sink = fileobj
            self._own = False
        self._gzip = GzipStream(self._sink, compresslevel) if gz else None
        self._stream: Any = self._gzip if self._gzip is not None else self._sink
        self.size = 0  # uncompressed tar bytes written so far
        self.count = 0  # samples written so far
        self.closed = False
        self.index: Any = None
        self._registry = registry
        self._index_target: str | None = None
        self._entries: list[tuple[str, int, int]] | None = None
        if index:
            self._index_target = index_target(index, self.name)
            self._entries = []

    def write(self, obj: Mapping[str, Any]) -> int:
        """Write one sample.

        Returns:
            The uncompressed tar bytes this sample took (headers, data, padding).

        Raises:
            SampleError: the sample is malformed or cannot be encoded (nothing was written).
            UploadError: writing to the destination failed (an owned target is aborted).
        """
        formatted = self.formatter.format(obj)
        if self._entries is not None:
            check_indexable(formatted, key=obj.get("__key__"))
        return self.write_formatted(formatted)

    def write_formatted(self, formatted: FormattedSample) -> int:
        """Write a sample already laid out by :attr:`formatter` (see :class:`ShardWriter`)."""
        if self.closed:
            raise ValueError(f"write to a closed TarWriter ({self.name or 'stream'})")
        if self._entries is not None:
            start = self.size
            self._entries.extend(
                (name, start + offset, size)
                for name, offset, size in zip(
                    formatted.names, formatted.offsets, formatted.sizes, strict=True
                )
            )
        try:
            if formatted.size <= _JOIN_LIMIT:
                self._stream.write(b"".join(formatted.chunks))  # one call for small samples
            else:
                for chunk in formatted.chunks:
                    self._stream.write(chunk)
        except Exception as exc:
            self.abort()
            reason = exc.reason if isinstance(exc, UploadError) else f"{type(exc).__name__}: {exc}"
            raise UploadError(
                f"writing {formatted.names[0] if formatted.names else 'a sample'!r} at tar "
                f"offset {self.size} failed: {reason}",
                url=self.name,
            ) from exc
        self.size += formatted.size
        self.count += 1
        return formatted.size

    def close(self) -> None:
        """Write the end-of-archive blocks and commit (closing the target if we opened it).

        Raises:
            UploadError: finishing the stream or committing failed (the target is aborted).
        """
        if self.closed:
            return
        index_sink: Any = None
        try:
            self._stream.write(_END_OF_ARCHIVE)
            if self._gzip is not None:
                self._gzip.finish()
            if self._entries is not None:
                index_sink = self._open_index()
            if self._own:
                self._sink.close()
            else:
                flush = getattr(self._sink, "flush", None)
                if callable(flush):
                    flush()
        except Exception as exc:
            if index_sink is not None:
                abort_quietly(index_sink)
            self.abort()
            if isinstance(exc, UploadError):
                raise
            raise UploadError(
                f"finishing the shard failed: {type(exc).__name__}: {exc}", url=self.name
            ) from exc
        self.closed = True
        if index_sink is not None:
            try:
                index_sink.close()
            except Exception as exc:
                reason = exc.reason if isinstance(exc, UploadError) else repr(exc)
                raise UploadError(
                    f"the shard was committed but its index {self._index_target!r} was not: "
                    f"{reason}; rebuild it with 'wds-cloud index'",
                    url=self.name,
                ) from exc

    def _open_index(self) -> Any:
        """The ``.idx`` of what was written, in an uncommitted sink (committed after the shard)."""
        assert self._entries is not None and self._index_target is not None
        self.index, sink = open_index(self._entries, self._index_target, self._registry)
        return sink

    @property
    def filesize(self) -> int | None:
        """Bytes stored (compressed when gzip), once closed; None when unknown."""
        written = getattr(self._sink, "bytes_written", None)
        if isinstance(written, int):
            return written
        return None if self._gzip is not None else self.size + len(_END_OF_ARCHIVE)

    def abort(self) -> None:
        """Discard the shard: an owned target is aborted (no file or object appears).

        A stream passed in by the caller is left as it is (it cannot be un-written).
        """
        if self.closed:
            return
        self.closed = True
        if self._own:
            abort_quietly(self._sink)

    def __del__(self) -> None:
        # Never commit on garbage collection: discard a target we opened, and say so.
        if getattr(self, "closed", True) or not getattr(self, "_own", False):
            return
        warn_discarded(type(self).__name__, self.name)
        self.abort()
