"""``with_epoch(n)`` / ``repeat(nepochs)`` on the object iterated: a window of passes.

Such an ``iter()`` runs passes over the shards (each a new shard-shuffle epoch, or a new
resampling pass) until ``n`` items were delivered or ``nepochs`` passes ran; a pass that yields
nothing ends the window early. Every pass is tracked like a plain one (its own ledger and shard
order) and the state of the pass in progress also records ``pass`` (passes started in this
window before it) and ``window`` (items delivered in this window so far). Resuming re-enters
that pass where its ledger says, goes on with the next passes exactly as an uninterrupted run
would, and stops at the same count. When the window is complete the state is ``finished``
and the next ``iter()`` starts a new window.

The window can also sit on a pipeline *inside* the object iterated, in the same process, when
every stage above it hands on what it pulled before it pulls more (``batched``/``listed``,
``map``, ``to_tuple``, ``select``, ...: :func:`~wds_cloud.resume.plan.lazy`).
``make_loader(epoch_size=...)`` is such a loader:
``DataPipeline(loader.unbatched().shuffle(...).with_epoch(n)).batched(b)``. Whenever
the training loop holds an item, every item the windowed pipeline yielded is then in it, so the
state of the inner window is the state of the object iterated (:func:`run_nested`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from wds_cloud.core.pipeline_base import invoke_stage
from wds_cloud.resume import kept
from wds_cloud.resume.plan import Level, Plan

RunPass = Callable[[Level, Any], Iterator[Any]]


def windowed(level: Level, state: dict[str, Any] | None, run_pass: RunPass) -> Iterator[Any]:
    """Deliver one ``with_epoch``/``repeat`` window of the pipeline of ``level``, from
    ``state`` if given."""
    p = level.pipeline
    limit = p.epoch_size()
    first = int(state.get("pass", 0)) if state is not None else 0
    count = int(state.get("window", 0)) if state is not None else 0
    for k in range(first, p.repetitions):
        resumed = state if k == first else None
        got = False
        for item in run_pass(level, resumed):
            got = True
            count += 1
            header = kept.get(p, kept.LEDGER).header
            header["pass"] = k
            header["window"] = count
            if 0 < limit <= count:
                header["finished"] = True  # the rest of this pass is dropped, as islice does
                yield item
                return
            yield item
        if not got and resumed is None:
            return  # an empty pass ends the window (a resumed pass may have nothing left)


def run_nested(plan: Plan, state: dict[str, Any] | None, run_pass: RunPass) -> Iterator[Any]:
    """One ``iter()`` of the object of ``plan`` whose window is set on a pipeline under it
    (``plan.window``: the levels from the top down to it): the window of that pipeline,
    tracked, under the stages of the levels above it run plainly. The ledger of the pass in
    progress is the top's."""
    *path, inner = plan.window
    top = plan.top.pipeline

    def window() -> Iterator[Any]:
        for item in windowed(inner, state, run_pass):
            kept.put(top, kept.LEDGER, kept.get(inner.pipeline, kept.LEDGER))
            yield item

    src: Iterator[Any] = window()
    for node in reversed(path):
        for step in node.steps:
            src = invoke_stage(step.stage, src)
    return src
