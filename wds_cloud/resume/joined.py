"""Resuming a join (``wds.join``): rows of shards, tracked per shard of each asked set.

The epoch's order in the ledger lists the asked sets' shards row by row (``img_7, txt_7,
img_2, txt_2, ...``, the rows in the shuffled order), and a merged sample carries the ids of the
sample of each set it was made of (and of the samples dropped before it), so each set's shard
is done when all of its samples went out. What is left of an epoch (:func:`~wds_cloud.resume.
state.remaining`) is grouped back into rows (:func:`group`); a row is shared among readers as
one shard, and read (:func:`read_rows`) with each set's work item from its own byte offsets.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from wds_cloud.core.curry import FilterFunction
from wds_cloud.core.join import WINDOW, JoinedShards, close_all, merge_rows
from wds_cloud.core.samples import StopShards
from wds_cloud.core.shardopen import ShardOpener
from wds_cloud.resume.reader import Pair, read_item
from wds_cloud.resume.state import WorkItem


def flat_order(shards: JoinedShards, firsts: list[str]) -> list[str]:
    """The ledger's order of the rows whose first shards are ``firsts``, in that order."""
    return [url for first in firsts for url in shards.row(first)]


def group(shards: JoinedShards, items: list[Any]) -> list[list[Any]]:
    """Work items (in the ledger's order) grouped by row, in order."""
    first_of = {url: row[0] for row in shards.rows for url in row}
    rows: dict[str, list[Any]] = {}
    for item in items:
        rows.setdefault(first_of[item.url], []).append(item)
    return list(rows.values())


def read_rows(
    shards: JoinedShards, items: list[WorkItem], reader: FilterFunction
) -> Iterator[Pair]:
    """The merged samples of the rows of ``items`` with their ids (``reader``: the
    ``join_to_samples`` stage, whose options it takes).

    A row with a set's shard already done (all its samples delivered) and another's not has
    only samples the merge dropped last time: it is read no more."""
    kw = dict(reader.kw)
    handler = kw.pop("handler", None)
    options: dict[str, Any] = {} if handler is None else {"handler": handler}
    clash, window = kw.pop("clash", "error"), kw.pop("window", WINDOW)
    opener = ShardOpener(
        kw.pop("registry", None), kw.pop("cache_dir", None), kw.pop("cache_size", None), **kw
    )
    for row in group(shards, items):
        urls = shards.row(row[0].url)
        if len(row) != len(urls):
            continue
        streams = [read_item(w, opener, **options) for w in row]
        try:
            yield from merge_rows(
                streams, urls, shards.columns, clash=clash, window=window, **options
            )
        except StopShards:
            return
        finally:
            close_all(streams)
