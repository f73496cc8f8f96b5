"""Parquet input for ``convert``: each row a sample, each column a member (pyarrow, imported
only here; it comes with ``ray[data]``). Files are local; tasks read row ranges batch by batch."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from wds_cloud.errors import ConfigError, MissingDependencyError
from wds_cloud.jobs.sources import ParquetSource

_BATCH_ROWS = 256


def _pq() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise MissingDependencyError(
            "Parquet input needs pyarrow: pip install 'wds_cloud[ray]'"
        ) from exc
    return pq


def parquet_files(path: str) -> list[str]:
    """The ``.parquet`` files of ``path`` (a file, or a directory walked in sorted order)."""
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise ConfigError(f"Parquet input {path!r} is neither a file nor a directory")
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        found.extend(os.path.join(dirpath, n) for n in sorted(filenames) if n.endswith(".parquet"))
    if not found:
        raise ConfigError(f"no .parquet files under {path!r}")
    return found


def is_parquet(path: str) -> bool:
    """True for a local ``.parquet`` file or a directory whose files are all ``.parquet``."""
    if os.path.isfile(path):
        return path.endswith(".parquet")
    if not os.path.isdir(path):
        return False
    names = [n for _, _, files in os.walk(path) for n in files if not n.startswith(".")]
    return bool(names) and all(n.endswith(".parquet") for n in names)


def plan_parquet(
    path: str, maxcount: int, key: str | None, columns: list[str] | None
) -> list[ParquetSource]:
    """One source per ``maxcount`` rows of each file (a shard never spans two files)."""
    pq = _pq()
    sources = []
    for file in parquet_files(path):
        meta = pq.ParquetFile(file)
        names = meta.schema_arrow.names
        for col in ([key] if key else []) + (columns or []):
            if col not in names:
                raise ConfigError(f"{file}: no column {col!r} (columns: {', '.join(names)})")
        rows = meta.metadata.num_rows
        for start in range(0, rows, maxcount):
            sources.append(
                ParquetSource(
                    file,
                    start,
                    min(rows, start + maxcount),
                    key,
                    tuple(columns) if columns else None,
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


def read_rows(source: ParquetSource) -> Iterator[tuple[dict[str, Any], int]]:
    """The samples of rows ``[start, stop)``: bytes as is, text as UTF-8, other values as JSON;
    a null value gives no member."""
    pq = _pq()
    file = pq.ParquetFile(source.path)
    stem = os.path.splitext(os.path.basename(source.path))[0]
    groups, row, first = [], 0, None
    for g in range(file.metadata.num_row_groups):
        n = file.metadata.row_group(g).num_rows
        if row + n > source.start and row < source.stop:
            groups.append(g)
            first = row if first is None else first
        row += n
    row = first or 0
    for batch in file.iter_batches(batch_size=_BATCH_ROWS, row_groups=groups):
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


__all__ = ["is_parquet", "parquet_files", "plan_parquet", "read_rows"]
