"""Parquet input for ``convert``: each row a sample, each column a member (pyarrow, imported
only here; it comes with ``ray[data]``).

The dataset is a local ``.parquet`` file or directory, or a URL on any backend: one object
(``s3://b/t/part-0.parquet``, ``https://host/x.parquet``), a prefix ending in ``/`` or a glob
listed by the backend (every ``.parquet`` object under it, sorted). Remote files are read
through the wds_cloud openers with a seekable :class:`~wds_cloud.openers.streams.rangefile.RangeFile`
(ranged reads, a bounded block cache): the driver reads each file's footer once (and its size,
kept in the plan), a task reads only the row groups of its rows, a batch at a time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from wds_cloud.errors import ConfigError, MissingDependencyError, ShardReadError
from wds_cloud.openers.local import url_to_path
from wds_cloud.openers.registry import OpenerRegistry, url_scheme
from wds_cloud.redact import redact_url

_BATCH_ROWS = 256
_SUFFIX = ".parquet"


@dataclass(frozen=True)
class ParquetSource:
    """Rows ``[start, stop)`` of a Parquet file; each row is a sample.

    Attributes:
        path: the Parquet file (a local path or any URL the registry reads ranges of).
        start: first row.
        stop: row after the last.
        key: the column holding the sample key; None: ``<file stem>/<row number>``.
        columns: the columns written as members (None: all but ``key``).
        size: the file's size in bytes when the plan knows it (remote files: no size request
            per task).
    """

    path: str
    start: int
    stop: int
    key: str | None = None
    columns: tuple[str, ...] | None = None
    size: int | None = None

    def describe(self) -> Any:
        return [self.path, self.start, self.stop, self.key, self.columns, self.size]

    def read(self, registry: OpenerRegistry) -> Iterator[tuple[dict[str, Any], int]]:
        yield from read_rows(self, registry)


def _pq() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError(
            "Parquet input needs pyarrow: pip install 'wds_cloud[ray]'"
        ) from exc
    return pq


def parquet_files(path: str | Sequence[str], registry: OpenerRegistry | None = None) -> list[str]:
    """The ``.parquet`` files of ``path``: a local file, a local directory walked in sorted
    order, or a URL: one object, or a prefix ending in ``/`` or a glob, listed; or a list of
    those, in its order.

    Raises:
        ConfigError: a local path that is neither a file nor a directory, or holds none.
        ShardNotFoundError: a remote prefix or glob with no ``.parquet`` object.
    """
    if not isinstance(path, str):
        return [f for p in path for f in parquet_files(p, registry)]
    if url_scheme(path) != "file":
        from wds_cloud.listing import list_pattern

        return list_pattern(path, registry=registry, extensions=(_SUFFIX,))
    local = url_to_path(path)
    if os.path.isfile(local):
        return [path]
    if not os.path.isdir(local):
        raise ConfigError(f"Parquet input {path!r} is neither a file nor a directory")
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(local):
        dirnames.sort()
        found.extend(os.path.join(dirpath, n) for n in sorted(filenames) if n.endswith(_SUFFIX))
    if not found:
        raise ConfigError(f"no .parquet files under {path!r}")
    return found


def is_parquet(path: str) -> bool:
    """True for a local ``.parquet`` file or a directory whose files are all ``.parquet``."""
    if os.path.isfile(path):
        return path.endswith(_SUFFIX)
    if not os.path.isdir(path):
        return False
    names = [n for _, _, files in os.walk(path) for n in files if not n.startswith(".")]
    return bool(names) and all(n.endswith(_SUFFIX) for n in names)


def open_parquet(
    url: str, registry: OpenerRegistry | None = None, size: int | None = None
) -> tuple[Any, Any]:
    """``(pyarrow ParquetFile, file object)`` for ``url``: a local path read by pyarrow
    itself, anything else through a :class:`RangeFile` (``size`` when known: no size request).

    Raises:
        ShardNotFoundError: no such object (naming the URL).
        ShardReadError: the bytes are not Parquet (naming the URL).
    """
    from wds_cloud.openers.streams.rangefile import RangeFile

    pq = _pq()
    import pyarrow as pa

    if url_scheme(url) == "file":
        handle: Any = open(url_to_path(url), "rb")
    else:
        handle = RangeFile(url, registry=registry, size=size)
    try:
        return pq.ParquetFile(handle), handle
    except (pa.ArrowException, OSError) as exc:
        handle.close()
        if isinstance(exc, ShardReadError):
            raise
        raise ShardReadError(
            f"{redact_url(url)} is not a readable Parquet file ({exc})", url=url
        ) from exc


def plan_parquet(
    path: str | Sequence[str],
    maxcount: int,
    key: str | None,
    columns: list[str] | None,
    registry: OpenerRegistry | None = None,
) -> list[ParquetSource]:
    """One source per ``maxcount`` rows of each file (a shard never spans two files)."""
    sources = []
    for file in parquet_files(path, registry):
        meta, handle = open_parquet(file, registry)
        try:
            names = meta.schema_arrow.names
            rows = meta.metadata.num_rows
        finally:
            handle.close()
        for col in ([key] if key else []) + (columns or []):
            if col not in names:
                raise ConfigError(
                    f"{redact_url(file)}: no column {col!r} (columns: {', '.join(names)})"
                )
        size = getattr(handle, "size", None)
        for start in range(0, rows, maxcount):
            sources.append(
                ParquetSource(
                    file,
                    start,
                    min(rows, start + maxcount),
                    key,
                    tuple(columns) if columns else None,
                    size,
                )
            )
    return sources


def _member(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, sort_keys=True, default=str).encode()


def _stem(url: str) -> str:
    name = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    return os.path.splitext(os.path.basename(name))[0]


def read_rows(
    source: ParquetSource, registry: OpenerRegistry | None = None
) -> Iterator[tuple[dict[str, Any], int]]:
    """The samples of rows ``[start, stop)``: bytes as is, text as UTF-8, other values as JSON;
    a null value gives no member. Only the row groups holding those rows are read."""
    file, handle = open_parquet(source.path, registry, source.size)
    try:
        yield from _rows(file, source, _stem(source.path))
    finally:
        handle.close()


def _rows(file: Any, source: ParquetSource, stem: str) -> Iterator[tuple[dict[str, Any], int]]:
    groups, row, first = [], 0, None
    for g in range(file.metadata.num_row_groups):
        n = file.metadata.row_group(g).num_rows
        if row + n > source.start and row < source.stop:
            groups.append(g)
            first = row if first is None else first
        row += n
    row = first or 0
    wanted = None
    if source.columns is not None:
        wanted = list(dict.fromkeys(([source.key] if source.key else []) + list(source.columns)))
    for batch in file.iter_batches(batch_size=_BATCH_ROWS, row_groups=groups, columns=wanted):
        for record in batch.to_pylist():
            if row >= source.stop:
                return
            if row >= source.start:
                key = record.pop(source.key) if source.key else f"{stem}/{row:09d}"
                sample: dict[str, Any] = {"__key__": str(key)}
                size = 0
                for col, value in record.items():
                    if source.columns is not None and col not in source.columns:
                        continue
                    data = _member(value)
                    if data is not None:
                        sample[col.lower()] = data
                        size += len(data)
                yield sample, size
            row += 1
        if row >= source.stop:
            return


__all__ = [
    "ParquetSource",
    "is_parquet",
    "open_parquet",
    "parquet_files",
    "plan_parquet",
    "read_rows",
]
