"""Running pipeline stages while keeping track of which source samples each output came from.

Every item travels as ``(item, tags)``; ``tags`` lists the ids of the source samples the item
stands for (:class:`Rows`, one list per row, for a batch). A stage is run on a *tap*: an
iterator that hands the stage plain items and notes the tags of every item the stage pulls.
When the stage yields, the output gets tags by the stage's kind:

- ``stream`` (map, decode, to_tuple, select, rename, user generators, ...): the tags of every
  input pulled since the previous output. A filtered-out sample thus counts as delivered with
  the next sample that passes; a generator yielding several items per input ties the input to
  its first output (resume is then at source-sample granularity, see ``docs/resume.md``).
- ``batch`` (``batched``, ``listed``): :class:`Rows`, the tags of each member in order.
- ``unbatch`` (``unbatched``, ``unlisted``): row ``i`` of an input batch gets the batch's
  ``i``-th row of tags.
- ``identity`` (``shuffle``, ``detshuffle``): the output is one of the inputs; its tags are
  found by object identity.

A ``shuffle`` stage without ``seed=``/``rng=`` gets a seed derived from the pipeline's seed,
epoch, resume generation, reader (rank, worker) and stage position, so a seeded pipeline gives
the same order every run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from wds_cloud.core import batching
from wds_cloud.core.curry import FilterFunction
from wds_cloud.core.pipeline_base import invoke_stage
from wds_cloud.core.shuffle import _shuffle, detshuffle, stable_seed


class Rows(list[Any]):
    """Tags of a batch: one list of sample ids per row."""


def flat(tags: list[Any]) -> list[Any]:
    """All sample ids in ``tags``."""
    if isinstance(tags, Rows):
        return [sid for row in tags for sid in row]
    return tags


class Tagged:
    """An item and its tags, as they cross from a DataLoader worker to the main process."""

    __slots__ = ("item", "tags")

    def __init__(self, item: Any, tags: list[Any]) -> None:
        self.item = item
        self.tags = tags

    def __reduce__(self) -> tuple[Any, ...]:
        return (Tagged, (self.item, self.tags))


class TaggedCollate:
    """A DataLoader ``collate_fn`` that collates the items of :class:`Tagged` values and
    carries their tags along (plain values go to the wrapped function unchanged)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, data: Any) -> Any:
        if isinstance(data, Tagged):
            return Tagged(self.fn(data.item), data.tags)
        if isinstance(data, list) and data and isinstance(data[0], Tagged):
            return Tagged(self.fn([d.item for d in data]), Rows(flat(d.tags) for d in data))
        return self.fn(data)


def stage_kind(stage: Any) -> str:
    """``stream``, ``batch``, ``unbatch`` or ``identity`` (see the module docstring)."""
    if isinstance(stage, detshuffle):
        return "identity"
    f = getattr(stage, "f", None) if isinstance(stage, FilterFunction) else None
    if f is _shuffle:
        return "identity"
    if f is batching._batched or f is batching._listed:
        return "batch"
    if f is batching._unbatched or f is batching._unlisted:
        return "unbatch"
    return "stream"


def seeded(stage: Any, ctx: dict[str, Any], position: int) -> Any:
    """``stage`` with a derived seed if it is a ``shuffle`` without ``seed``/``rng``."""
    if not (isinstance(stage, FilterFunction) and stage.f is _shuffle):
        return stage
    if stage.kw.get("seed") is not None or stage.kw.get("rng") is not None:
        return stage
    if len(stage.args) >= 3 and stage.args[2] is not None:  # rng given by position
        return stage
    from wds_cloud.core.shards import worker_info

    rank, _, worker, _ = worker_info()
    seed = stable_seed(
        "shuffle",
        ctx.get("seed", 0),
        ctx.get("epoch", 0),
        ctx.get("generation", 0),
        ctx.get("place", "reader"),
        rank,
        worker,
        position,
    )
    return FilterFunction(_shuffle, *stage.args, **{**stage.kw, "seed": seed})


def _passthrough(stage: Any) -> bool:
    """Whether ``stage`` yields its inputs unchanged, one for one (``check_empty``, which
    WebDataset puts after its reader): it can run on the pairs themselves."""
    from functools import partial

    from wds_cloud.core.extras import check_empty

    return stage is check_empty or (isinstance(stage, partial) and stage.func is check_empty)


def _run_stream(stage: Any, pairs: Iterator[Any]) -> Iterator[tuple[Any, Any]]:
    """A ``stream`` stage: an output gets the tags of every input pulled since the previous
    output (the tap is a generator: cheaper per item than an iterator class)."""
    pending: list[Any] = []
    append = pending.append

    def tap() -> Iterator[Any]:
        for item, tags in pairs:
            append(tags)
            yield item

    for item in invoke_stage(stage, tap()):
        if len(pending) == 1:
            yield item, pending.pop()
        else:
            tags = [sid for t in pending for sid in flat(t)]
            pending.clear()
            yield item, tags


def run_stage(stage: Any, pairs: Iterator[Any]) -> Iterator[tuple[Any, Any]]:
    """Run one stage on ``(item, tags)`` pairs; yield ``(output, tags)`` pairs."""
    if _passthrough(stage):
        return invoke_stage(stage, pairs)
    kind = stage_kind(stage)
    if kind == "stream":
        return _run_stream(stage, pairs)
    if kind == "identity":
        return _run_identity(stage, pairs)
    return _run_other(stage, kind, pairs)


class _Many(deque[Any]):
    """Tags of one object held more than once (the same item pulled again before it left)."""


def _run_identity(stage: Any, pairs: Iterator[Any]) -> Iterator[tuple[Any, Any]]:
    """An ``identity`` stage (a shuffle): an output is one of the inputs; its tags are found
    by the object's ``id`` (one dict entry per held item, a deque only for repeats)."""
    table: dict[int, Any] = {}

    def tap() -> Iterator[Any]:
        for item, tags in pairs:
            key = id(item)
            held = table.get(key)
            if held is None:
                table[key] = tags
            elif type(held) is _Many:
                held.append(tags)
            else:
                table[key] = _Many((held, tags))
            yield item

    for item in invoke_stage(stage, tap()):
        held = table.pop(id(item), None)
        if held is None:
            yield item, []
        elif type(held) is _Many:
            tags = held.popleft()
            if held:
                table[id(item)] = held
            yield item, tags
        else:
            yield item, held


def _run_other(stage: Any, kind: str, pairs: Iterator[Any]) -> Iterator[tuple[Any, Any]]:
    """A ``batch`` or ``unbatch`` stage."""
    pending: list[Any] = []
    append = pending.append

    def tap() -> Iterator[Any]:
        for item, tags in pairs:
            append(tags)
            yield item

    out = invoke_stage(stage, tap())
    if kind == "batch":
        for item in out:
            rows = Rows(t if type(t) is list else flat(t) for t in pending)
            pending.clear()
            yield item, rows
    else:
        queue: deque[Any] = deque()
        for item in out:
            if pending:
                for t in pending:
                    if isinstance(t, Rows):
                        queue.extend(t)
                    else:
                        queue.append(t)
                pending.clear()
            yield item, (queue.popleft() if queue else [])


def run_stages(
    stages: list[Any], pairs: Iterator[Any], ctx: dict[str, Any]
) -> Iterator[tuple[Any, Any]]:
    """Run ``stages`` in order on ``(item, tags)`` pairs."""
    for position, stage in enumerate(stages):
        pairs = run_stage(seeded(stage, ctx, position), pairs)
    return pairs
