"""Joined sources: column sets of shards whose samples share keys, read in lockstep.

``wds.join({"img": "images-{000..099}.tar", "txt": "captions-{000..099}.tar",
"emb": "embeddings-{000..099}.tar"}, columns=["img", "txt"])`` is a shard list (a
:class:`JoinedShards`) whose item ``i`` names shard ``i`` of every asked set; given to
``WebDataset`` (or ``make_loader``) it is shuffled and split among ranks and workers as one shard
list, so the sets stay aligned, and :func:`join_samples` opens shard ``i`` of each asked set, reads
them side by side and merges the samples that have the same ``__key__``. Sets not asked for are
never resolved nor opened: their bytes are not transferred.

The samples of each shard must come in the same key order in every set. A key missing in one
set, or out of order, is a :class:`~wds_cloud.errors.SampleError` naming the key and both shards;
under a skipping handler the samples that have no partner are dropped, each counted by the
handler (see :func:`merge_rows`). See ``docs/mixing.md``, "Joined sources".
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from wds_cloud.core.curry import pipelinefilter
from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.core.samples import StopShards, tar_samples
from wds_cloud.core.shardopen import ShardOpener
from wds_cloud.core.shards import SimpleShardList
from wds_cloud.errors import ConfigError, SampleError
from wds_cloud.listing import resolve_shards
from wds_cloud.redact import redact_url

__all__ = [
    "CLASHES",
    "JoinedShards",
    "close_all",
    "join",
    "join_samples",
    "join_to_samples",
    "merge_rows",
]

#: What to do when two sets have a field of the same name: ``"error"`` (a ``SampleError``), or
#: ``"prefix"``: every field is named ``<column>.<field>`` (``img.jpg``, ``txt.txt``).
CLASHES = ("error", "prefix")

#: Samples read ahead in each set, at most, to find where the sets meet again after a key that
#: is missing in one of them (under a skipping handler).
WINDOW = 64

#: One sample and the positions it stands for (empty when not tracked for resume).
Pair = tuple[dict[str, Any], list[Any]]


class JoinedShards(SimpleShardList):
    """The shard list of a join: item ``i`` is ``{"url": shard i of the first asked set,
    "join": (shard i of each asked set), "columns": (the asked sets' names)}``.

    Args:
        sets: set name -> shard spec (anything :func:`~wds_cloud.listing.resolve_shards`
            takes: braces, globs, prefixes, a dataset JSON, a list of URLs).
        columns: the sets to read, in this order (default: all, in the order given).
        clash: ``"error"`` or ``"prefix"`` (see :data:`CLASHES`).
        window: see :data:`WINDOW`.
        registry: opener registry used to list globs and prefixes.

    Raises:
        ConfigError: no sets, an unknown column, a set without shards, a shard in two sets,
            or asked sets with different shard counts (naming both specs and counts).
    """

    def __init__(
        self,
        sets: Mapping[str, str | Iterable[str]],
        columns: Sequence[str] | None = None,
        *,
        clash: str = "error",
        window: int = WINDOW,
        registry: Any = None,
    ) -> None:
        if not isinstance(sets, Mapping) or not sets:
            raise ConfigError(f"join: sets must be a non-empty dict name -> shard spec: {sets!r}")
        names = list(sets) if columns is None else list(columns)
        unknown = [c for c in names if c not in sets]
        if not names or unknown or len(set(names)) != len(names):
            raise ConfigError(
                f"join: columns must be distinct names among the sets {sorted(sets)}, "
                f"got {list(names)!r}"
            )
        if clash not in CLASHES:
            raise ConfigError(f"join: clash must be one of {CLASHES}, got {clash!r}")
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigError(f"join: window must be an integer >= 1, got {window!r}")
        self.columns = tuple(names)
        self.clash = clash
        self.window = window
        self.specs = {c: sets[c] for c in names}
        self.sets = {c: resolve_shards(sets[c], registry=registry) for c in names}
        for c in names:
            if not self.sets[c]:
                raise ConfigError(f"join: set {c!r} ({_spec(sets[c])}) has no shards")
        first = names[0]
        for c in names[1:]:
            if len(self.sets[c]) != len(self.sets[first]):
                raise ConfigError(
                    f"join: set {first!r} ({_spec(sets[first])}) has {len(self.sets[first])} "
                    f"shards but set {c!r} ({_spec(sets[c])}) has {len(self.sets[c])}: joined "
                    "sets must have the same number of shards, shard i of each holding the "
                    "same keys"
                )
        owner: dict[str, str] = {}
        for c in names:
            for url in self.sets[c]:
                if owner.setdefault(url, c) != c:
                    raise ConfigError(
                        f"join: shard {redact_url(url)} is in set {owner[url]!r} and in set "
                        f"{c!r}: each set must have shards of its own"
                    )
        self.urls = list(self.sets[first])
        self.rows = [tuple(self.sets[c][i] for c in names) for i in range(len(self.urls))]
        self.seed = None  # shuffling is WebDataset's (shardshuffle=), applied to whole rows

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for row in self.rows:
            yield {"url": row[0], "join": row, "columns": self.columns}

    def row(self, url: str) -> tuple[str, ...]:
        """The URLs of the row whose first asked set's shard is ``url``."""
        index = self.__dict__.get("_index")
        if index is None:
            index = self._index = {r[0]: r for r in self.rows}
        return index[url]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_index", None)
        return state

    def __repr__(self) -> str:
        return (
            f"JoinedShards(columns={list(self.columns)}, {len(self.rows)} shards each, "
            f"first={redact_url(self.urls[0])!r})"
        )


def join(
    sets: Mapping[str, str | Iterable[str]],
    columns: Sequence[str] | None = None,
    *,
    clash: str = "error",
    window: int = WINDOW,
    registry: Any = None,
) -> JoinedShards:
    """Column sets of shards read in lockstep and merged per key; pass the result as
    ``WebDataset``'s (or ``make_loader``'s) ``urls``. See :class:`JoinedShards`."""
    return JoinedShards(sets, columns, clash=clash, window=window, registry=registry)


def _spec(spec: Any) -> str:
    if isinstance(spec, str):
        return redact_url(spec)
    items = list(spec)
    shown = ", ".join(redact_url(str(u)) for u in items[:2])
    return f"[{shown}{', ...' if len(items) > 2 else ''}] ({len(items)} URLs)"


# -- merging ---------------------------------------------------------------------------------


def _key(pair: Pair) -> str:
    return str(pair[0].get("__key__"))


def merge_rows(
    streams: Sequence[Iterator[Pair]],
    urls: Sequence[str],
    columns: Sequence[str],
    *,
    handler: Handler = reraise_exception,
    clash: str = "error",
    window: int = WINDOW,
) -> Iterator[Pair]:
    """Merge the samples of one row (shard ``i`` of each set) by key.

    Each stream yields ``(sample, ids)`` in its shard's order; a merged sample carries the ids
    of the samples it was made of, and of the samples dropped before it (so that a resumed
    reader does not read them again). When the heads of the streams have different keys, up to
    ``window`` samples of each are read ahead to find the next key all of them hold; every
    sample before it is dropped through ``handler`` with a ``SampleError`` naming its key, its
    shard and the shard it is missing from (a raising handler raises the first; True skips and
    counts each; False ends the iteration: ``StopShards``). A merged sample is yielded once the
    next one is made, so that samples dropped at the end of the shard go with the last one.

    Raises:
        SampleError: under the default handler, the first key missing or out of order, or two
            sets with a field of the same name (``clash="error"``).
        StopShards: the handler asked to stop.
    """
    n = len(streams)
    pending: list[deque[Pair]] = [deque() for _ in range(n)]
    ended = [False] * n
    dropped: list[Any] = []
    held: Pair | None = None

    def pull(c: int) -> bool:
        if ended[c]:
            return False
        item = next(streams[c], None)
        if item is None:
            ended[c] = True
            return False
        pending[c].append(item)
        return True

    def drop(c: int, why: str) -> None:
        ids = pending[c].popleft()[1]
        dropped.extend(ids)
        if not handler(SampleError(why)):
            raise StopShards

    try:
        while True:
            for c in range(n):
                if not pending[c]:
                    pull(c)
            if not any(pending):
                break
            keys = [_key(p[0]) if p else None for p in pending]
            if None not in keys and len(set(keys)) == 1:
                heads = [p.popleft() for p in pending]
                merged = _merged(heads, urls, columns, clash)
                if isinstance(merged, SampleError):
                    dropped.extend(i for h in heads for i in h[1])
                    if not handler(merged):
                        raise StopShards
                    continue
                if held is not None:
                    yield held
                held = (merged[0], merged[1] + dropped) if dropped else merged
                dropped = []
                continue
            common = _meet(pending, pull, ended, window)
            for c in range(n):
                while pending[c] and (common is None or _key(pending[c][0]) != common):
                    drop(c, _missing(c, pending, urls, columns, keys, common))
    except StopShards:
        if held is not None:  # made before the handler said to stop: it goes out
            yield held
        raise
    if held is not None:
        if dropped:
            held = (held[0], held[1] + dropped)
        yield held


def _meet(
    pending: list[deque[Pair]], pull: Callable[[int], bool], ended: list[bool], window: int
) -> str | None:
    """The first key (in the first set's order) every set holds among its next ``window``
    samples, reading ahead as needed; None when there is none."""
    while True:
        held = [[_key(p) for p in q] for q in pending]
        if all(held):
            others = [set(h) for h in held[1:]]
            for k in held[0]:
                if all(k in o for o in others):
                    return k
        grew = False
        for c, q in enumerate(pending):
            if len(q) < window and not ended[c]:
                grew = pull(c) or grew
        if not grew:
            return None


def _missing(
    c: int,
    pending: list[deque[Pair]],
    urls: Sequence[str],
    columns: Sequence[str],
    heads: list[str | None],
    common: str | None,
) -> str:
    """Why the head sample of set ``c`` is dropped: the key, its shard and the other's."""
    key = _key(pending[c][0])
    o = next((j for j, h in enumerate(heads) if j != c and h != key), (c + 1) % len(columns))
    where = f"set {columns[c]!r} shard {redact_url(urls[c])}"
    other = f"set {columns[o]!r} shard {redact_url(urls[o])}"
    if common is None:
        found = "has no more samples" if heads[o] is None else f"has key {heads[o]!r} there"
        return (
            f"join: key {key!r} of {where} is missing or out of order in {other}, which "
            f"{found} (no key common to all sets within the next samples)"
        )
    return (
        f"join: key {key!r} of {where} is missing in {other} (or out of order: the sets meet "
        f"again at key {common!r})"
    )


def _merged(
    heads: list[Pair], urls: Sequence[str], columns: Sequence[str], clash: str
) -> Pair | SampleError:
    """One sample from the samples of the same key, or the ``SampleError`` of a field name
    clash."""
    first = heads[0][0]
    out: dict[str, Any] = {"__key__": first["__key__"], "__url__": urls[0]}
    ids: list[Any] = []
    for c, (sample, sample_ids) in enumerate(heads):
        ids.extend(sample_ids)
        for field, value in sample.items():
            if field.startswith("__"):
                continue
            name = f"{columns[c]}.{field}" if clash == "prefix" else field
            if name in out:
                j = next(j for j in range(c) if name in heads[j][0])
                return SampleError(
                    f"join: field {name!r} of key {first['__key__']!r} is in set "
                    f"{columns[j]!r} shard {redact_url(urls[j])} and in set {columns[c]!r} "
                    f"shard {redact_url(urls[c])}; pass clash='prefix' to name fields "
                    "<column>.<field>"
                )
            out[name] = value
    return out, ids


# -- the reader stage --------------------------------------------------------------------------


def _row(item: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if isinstance(item, dict) and "join" in item and "columns" in item:
        return tuple(item["join"]), tuple(item["columns"])
    raise ConfigError(
        f"join_to_samples reads the items of wds.join(...) (dicts with 'join'), got {item!r}"
    )


def join_samples(
    src: Iterable[Any],
    *,
    handler: Handler = reraise_exception,
    clash: str = "error",
    window: int = WINDOW,
    registry: Any = None,
    cache_dir: str | None = None,
    cache_size: int | None = None,
    **open_options: Any,
) -> Iterator[dict[str, Any]]:
    """For each row of a :class:`JoinedShards`, open shard ``i`` of each asked set and yield
    the merged samples (:func:`merge_rows`). Open and read errors go to ``handler`` as in
    ``tarfile_to_samples``."""
    opener = ShardOpener(registry, cache_dir, cache_size, **open_options)
    for item in src:
        urls, columns = _row(item)
        streams = [_shard_pairs(opener, url, handler) for url in urls]
        try:
            for sample, _ in merge_rows(
                streams, urls, columns, handler=handler, clash=clash, window=window
            ):
                yield sample
        except StopShards:
            return
        finally:
            close_all(streams)


join_to_samples = pipelinefilter(join_samples)
"""Stage: ``join_to_samples(handler=..., clash=..., window=..., registry=..., **open_options)``
reads the rows of a :class:`JoinedShards` (after shuffling and splitting) as merged samples."""


def close_all(streams: Iterable[Iterator[Any]]) -> None:
    """Close the generators of a row (their shards' streams), whatever is left of them."""
    for s in streams:
        close = getattr(s, "close", None)
        if close is not None:
            close()


def _shard_pairs(opener: ShardOpener, url: str, handler: Handler) -> Iterator[Pair]:
    """The samples of one shard as ``(sample, [])``; an open error goes to ``handler``."""
    try:
        stream, _ = opener.open(url)
    except Exception as exc:
        if handler(exc):
            return
        raise StopShards from exc
    with contextlib.closing(stream):
        samples = tar_samples(stream, url, handler=handler)
        while True:
            try:
                sample = next(samples)
            except StopIteration as end:
                if end.value:  # the handler asked to stop
                    raise StopShards from None
                return
            yield sample, []
