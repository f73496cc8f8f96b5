"""Helpers for the index tests: write generated archives to files, read them sequentially."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wds_cloud.core.samples import tar_samples


def write(directory: Path, name: str, blob: bytes) -> str:
    """Store ``blob`` as ``directory/name``; return the path."""
    path = directory / name
    path.write_bytes(blob)
    return str(path)


def sequential(url: str, registry: Any = None) -> list[dict[str, Any]] | BaseException:
    """The samples ``WebDataset`` yields for one shard (with ``__local_path__`` for files), or
    the error the reader raises."""
    from wds_cloud.openers.registry import default_registry, url_scheme

    registry = registry or default_registry()
    stream = registry.open(url)
    local = url if url_scheme(url) == "file" else None
    try:
        return list(tar_samples(stream, url, local_path=local))
    except Exception as exc:
        return exc
    finally:
        stream.close()
