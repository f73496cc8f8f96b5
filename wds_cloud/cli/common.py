"""Helpers shared by the subcommands: shard listing, progress bars, JSON output."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from typing import Any


def shard_urls(specs: Iterable[str]) -> list[str]:
    """Expand shard specs (braces, globs, prefixes, ``::``) into URLs via ``list_shards``."""
    from wds_cloud.listing import list_shards

    return list_shards(list(specs))


def progress(items: Iterable[Any], *, total: int | None, desc: str, enabled: bool) -> Iterator[Any]:
    """Iterate ``items`` with a tqdm bar on stderr when ``enabled`` and stderr is a terminal."""
    if not enabled:
        yield from items
        return
    from tqdm import tqdm

    yield from tqdm(items, total=total, desc=desc, unit="shard", leave=False, file=sys.stderr)


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    print(json.dumps(data, indent=2, sort_keys=True, default=str))


def percentile(sorted_values: list[int], q: float) -> int:
    """The ``q`` quantile (0..1) of sorted values by the nearest-rank method."""
    if not sorted_values:
        return 0
    rank = max(1, -(-len(sorted_values) * q // 1))
    return sorted_values[min(len(sorted_values), int(rank)) - 1]
