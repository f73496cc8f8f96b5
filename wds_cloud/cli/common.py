"""Helpers shared by the subcommands: spec arguments, progress bars, JSON output.

Every shard argument is resolved by :func:`wds_cloud.listing.resolve_shards`, each argument a
spec of its own (``ls`` with ``prefixes=True``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any


def spec_input(values: Sequence[str]) -> str | list[str]:
    """The input of a command that hands its shards to a library call (``index``, ``job``):
    one spec argument is passed as it is, so the call resolves it itself (a dataset JSON keeps
    its counts, an ``ais://`` template can go to dSort as a template); several are each
    resolved (:func:`~wds_cloud.listing.resolve_shards`) and joined in order, a list the call
    takes as given."""
    if len(values) == 1:
        return values[0]
    from wds_cloud.listing import resolve_shards

    return resolve_shards(values)


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
