"""Running pipeline stages while keeping track of which source samples each output came from.

Every item travels as ``(item, tags)``; ``tags`` lists the ids of the source samples the item
stands for (:class:`Rows`, one list per row, for a batch). A stage is run on a *tap*: an
iterator that hands the stage plain items and notes the tags of every item the stage pulls.
When the stage yields, the output gets tags by the kind the stage declares
(:mod:`wds_cloud.core.stagekind`, read into the plan's :class:`~wds_cloud.resume.plan.Step`):

- ``stream`` (map, decode, to_tuple, select, rename, ...): the tags of every input pulled since
  the previous output. A filtered-out sample thus counts as delivered with the next sample that
  passes; a generator yielding several items per input ties the input to its first output
  (resume is then at source-sample granularity, see ``docs/resume.md``).
- ``batch`` (``batched``, ``listed``): :class:`Rows`, the tags of each member in order.
- ``unbatch`` (``unbatched``, ``unlisted``): row ``i`` of an input batch gets the batch's
  ``i``-th row of tags.
- ``identity`` (``shuffle``, ``detshuffle``): the output is one of the inputs; its tags are
  found by object identity.
- ``passthrough`` (``check_empty``): the stage runs on the pairs themselves.
- ``regroup`` (``pack``, ``group_by``): the stage names the inputs of each output by their
  arrival index (:class:`~wds_cloud.core.stagekind.Group`); an output gets their tags (one row
  each when the output has rows), and inputs it dropped count as delivered with the next output.

A stage that declares no kind (a generator of your own) is run as a ``stream`` stage and
watched: an item it yields right after pulling exactly one input stands for that input (a 1:1
map), and several items after one input are that input's, as for a declared stream; after
pulling several inputs, yielding the last input itself is a filter (the inputs it dropped count
as delivered with it, as for a declared stream); any other item yielded after pulling several
inputs means the stage groups or buffers, and nothing says which inputs the item stands for,
so the stage is noted in the pass's :class:`Watch` and ``state_dict()`` refuses, naming it.

A ``shuffle`` stage without ``seed=``/``rng=`` gets a seed derived from the pipeline's seed,
epoch, resume generation, reader (rank, worker) and stage position, so a seeded pipeline gives
the same order every run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from wds_cloud.core.curry import FilterFunction
from wds_cloud.core.pipeline_base import invoke_stage
from wds_cloud.core.shuffle import shuffle, stable_seed
from wds_cloud.resume.plan import Step


class Rows(list[Any]):
    """Tags of a batch: one list of sample ids per row."""


def flat(tags: list[Any]) -> list[Any]:
    """All sample ids in ``tags``."""
    if isinstance(tags, Rows):
        return [sid for row in tags for sid in row]
    return tags


class Tagged:
    """An item and its tags, as they cross from a DataLoader worker to the main process, and
    what the worker's :class:`Watch` noted (``refused``)."""

    __slots__ = ("item", "refused", "tags")

    def __init__(self, item: Any, tags: list[Any], refused: tuple[str, ...] = ()) -> None:
        self.item = item
        self.tags = tags
        self.refused = refused

    def __reduce__(self) -> tuple[Any, ...]:
        if self.refused:
            return (Tagged, (self.item, self.tags, self.refused))
        return (Tagged, (self.item, self.tags))


class TaggedCollate:
    """A DataLoader ``collate_fn`` that collates the items of :class:`Tagged` values and
    carries their tags along (plain values go to the wrapped function unchanged)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __call__(self, data: Any) -> Any:
        if isinstance(data, Tagged):
            return Tagged(self.fn(data.item), data.tags, data.refused)
        if isinstance(data, list) and data and isinstance(data[0], Tagged):
            refused = tuple(dict.fromkeys(r for d in data for r in d.refused))
            return Tagged(
                self.fn([d.item for d in data]), Rows(flat(d.tags) for d in data), refused
            )
        return self.fn(data)


class Watch:
    """The stages of one ``iter()`` that declare no kind and were seen yielding an item right
    after pulling several inputs (see the module docstring): ``refused`` names each."""

    def __init__(self) -> None:
        self.refused: dict[str, None] = {}  # an ordered set

    def note(self, step: Step) -> None:
        """Note that ``step`` yielded an item after pulling several inputs."""
        self.refused[f"stage {step.index} ({step.name}) of {step.pipeline}"] = None

    def add(self, refused: tuple[str, ...]) -> None:
        """Take what a DataLoader worker's watch noted."""
        self.refused.update(dict.fromkeys(refused))

    def why(self, name: str) -> str | None:
        """Why the object ``name`` cannot be resumed, or None when nothing was noted."""
        if not self.refused:
            return None
        stages = ", ".join(self.refused)
        return (
            f"{name} cannot be resumed: {stages} declares no tracking kind and yielded an item "
            "right after pulling several inputs that is not the last of them: it groups or "
            "buffers items, and resume ties an item of an undeclared stage only to the inputs "
            "pulled before it (a map, or a filter passing an input on); declare the stage's kind with @wds_cloud.stage_kind(...) (see "
            "docs/resume.md, 'Stages of your own')"
        )


def seeded(step: Step, ctx: dict[str, Any], position: int) -> Any:
    """The stage of ``step``, with a derived seed if it is a ``shuffle`` without
    ``seed``/``rng``."""
    stage = step.stage
    if step.kind != "identity" or not (isinstance(stage, FilterFunction) and stage.f is shuffle.f):
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
    return FilterFunction(stage.f, *stage.args, **{**stage.kw, "seed": seed})


def _run_stream(
    stage: Any, pairs: Iterator[Any], watched: Step | None, watch: Watch
) -> Iterator[tuple[Any, Any]]:
    """A ``stream`` stage: an output gets the tags of every input pulled since the previous
    output (the tap is a generator: cheaper per item than an iterator class). A ``watched``
    (undeclared) stage's output after several inputs is noted in ``watch``."""
    pending: list[Any] = []
    append = pending.append
    last: list[Any] = [None]  # the input pulled last, for a watched stage only

    def tap() -> Iterator[Any]:
        for item, tags in pairs:
            append(tags)
            yield item

    def watched_tap() -> Iterator[Any]:
        for item, tags in pairs:
            append(tags)
            last[0] = item
            yield item

    for item in invoke_stage(stage, tap() if watched is None else watched_tap()):
        if len(pending) == 1:
            yield item, pending.pop()
        else:
            if watched is not None and len(pending) > 1 and item is not last[0]:
                watch.note(watched)  # not a filter passing its last input on: it groups
            tags = [sid for t in pending for sid in flat(t)]
            pending.clear()
            yield item, tags


def run_stage(
    step: Step, stage: Any, pairs: Iterator[Any], watch: Watch
) -> Iterator[tuple[Any, Any]]:
    """Run ``stage`` (``step``'s, maybe seeded) on ``(item, tags)`` pairs; yield ``(output,
    tags)`` pairs."""
    kind = step.kind
    if kind == "passthrough":
        return invoke_stage(stage, pairs)
    if kind == "stream" or kind is None:
        return _run_stream(stage, pairs, step if kind is None else None, watch)
    if kind == "identity":
        return _run_identity(stage, pairs)
    if kind == "regroup":
        return _run_regroup(stage, pairs)
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


def _run_regroup(stage: Any, pairs: Iterator[Any]) -> Iterator[tuple[Any, Any]]:
    """A ``regroup`` stage (``pack``, ``group_by``): the tags of the inputs held, by arrival
    index, until an output names them; dropped inputs join the next output's first row."""
    table: dict[int, list[Any]] = {}

    def tap() -> Iterator[Any]:
        for index, (item, tags) in enumerate(pairs):
            table[index] = flat(tags)
            yield item

    carried: list[Any] = []
    for group in invoke_stage(stage.regroup, tap()):
        for index in group.dropped:
            carried.extend(table.pop(index))
        rows = [table.pop(index) for index in group.members]
        if carried and rows:
            rows[0] = carried + rows[0]
            carried = []
        if group.rows:
            yield group.item, Rows(rows)
        else:
            yield group.item, [sid for row in rows for sid in row]


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
    steps: tuple[Step, ...], pairs: Iterator[Any], ctx: dict[str, Any]
) -> Iterator[tuple[Any, Any]]:
    """Run the stages of ``steps`` in order on ``(item, tags)`` pairs (``ctx["watch"]``: the
    pass's :class:`Watch`)."""
    watch = ctx.get("watch")
    if watch is None:
        watch = ctx["watch"] = Watch()
    for position, step in enumerate(steps):
        pairs = run_stage(step, seeded(step, ctx, position), pairs, watch)
    return pairs
