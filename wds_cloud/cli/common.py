"""Helpers shared by the subcommands: shard listing, progress bars, JSON output."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any


def shard_urls(specs: Iterable[str], *, prefixes: bool = False) -> list[str]:
    """Expand shard specs (braces, globs, prefixes, ``::``) into URLs via ``list_shards``.

    With ``prefixes`` (``ls``), a plain URL is a name prefix: what is at or under it is
    listed, and nothing there is an error (``list_shards(..., prefixes=True)``).

    An argument that names an existing file or directory is that local path, taken literally
    (no brace, ``::`` or glob expansion) and never a command, even when it starts with
    ``pipe:`` (as a shell-expanded ``*.tar`` may): a file stays a path (made absolute when its
    name would read as a URL), a directory is listed. Only a ``pipe:`` string that is not an
    existing file runs a command.
    """
    from wds_cloud.listing import list_pattern, list_shards

    urls: list[str] = []
    for spec in specs:
        if spec == "-" or not os.path.lexists(spec):
            urls.extend(list_shards(spec, prefixes=prefixes))
        elif os.path.isdir(spec):
            urls.extend(list_pattern(os.path.join(os.path.abspath(spec), "")))
        else:
            urls.append(shard_url(spec))
    return urls


def shard_url(spec: str) -> str:
    """One shard argument as a URL: an existing file is a path (never a command), see
    :func:`shard_urls`; anything else is the URL as written."""
    from wds_cloud.openers.local import is_file_url
    from wds_cloud.openers.registry import url_scheme

    if spec == "-" or not os.path.lexists(spec) or os.path.isdir(spec):
        return spec
    plain = url_scheme(spec) == "file" and not is_file_url(spec)
    return spec if plain else os.path.abspath(spec)


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
