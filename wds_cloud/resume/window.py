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
``map``, ``to_tuple``, ``select``, ...: :func:`~wds_cloud.resume.walk.lazy`).
``make_loader(epoch_size=...)`` is such a loader:
``DataPipeline(loader.unbatched().shuffle(...).with_epoch(n)).batched(b)``. Whenever
the training loop holds an item, every item the windowed pipeline yielded is then in it, so the
state of the inner window is the state of the object iterated (:func:`run_nested`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from wds_cloud.core.mix import RandomMix
from wds_cloud.core.pipeline_base import PipelineBase, invoke_stage
from wds_cloud.core.shards import ResampledShards, split_by_sample
from wds_cloud.resume.walk import is_windowed, lazy, loader_dataset, reason, tracking_on


def windowed(
    p: Any, state: dict[str, Any] | None, run_pass: Callable[[Any, Any], Iterator[Any]]
) -> Iterator[Any]:
    """Deliver one ``with_epoch``/``repeat`` window of ``p``, from ``state`` if given."""
    limit = p.epoch_size()
    first = int(state.get("pass", 0)) if state is not None else 0
    count = int(state.get("window", 0)) if state is not None else 0
    for k in range(first, p.repetitions):
        resumed = state if k == first else None
        got = False
        for item in run_pass(p, resumed):
            got = True
            count += 1
            header = p._resume_ledger.header
            header["pass"] = k
            header["window"] = count
            if 0 < limit <= count:
                header["finished"] = True  # the rest of this pass is dropped, as islice does
                yield item
                return
            yield item
        if not got and resumed is None:
            return  # an empty pass ends the window (a resumed pass may have nothing left)


def nested(p: Any) -> tuple[Any, list[Any]] | None:
    """The windowed pipeline under ``p`` (not windowed itself) whose window is ``p``'s, and the
    pipelines from ``p`` down to it (excluded); None when there is none or a stage above it can
    hold items (:func:`lazy`)."""
    if is_windowed(p):
        return None
    path: list[Any] = []
    node = p
    while node.pipeline and isinstance(node.pipeline[0], PipelineBase):
        if not lazy(node.pipeline[1:]):
            return None
        path.append(node)
        node = node.pipeline[0]
        if is_windowed(node):
            return node, path
    return None


def run_nested(
    p: Any,
    inner: Any,
    path: list[Any],
    state: dict[str, Any] | None,
    run_pass: Callable[[Any, Any], Iterator[Any]],
) -> Iterator[Any]:
    """One ``iter()`` of ``p`` whose window is set on ``inner`` (see :func:`nested`): the window
    of ``inner``, tracked, under the stages of the pipelines in ``path`` run plainly. The
    ledger of the pass in progress is ``p``'s."""

    def window() -> Iterator[Any]:
        for item in windowed(inner, state, run_pass):
            p._resume_ledger = inner._resume_ledger
            yield item

    src: Iterator[Any] = window()
    for node in reversed(path):
        for stage in node.pipeline[1:]:
            src = invoke_stage(stage, src)
    return src


def _chain(p: Any) -> Iterator[Any]:
    """``p`` and the pipelines (and DataLoader datasets) under it, top first."""
    node = p
    while node is not None:
        yield node
        first = node.pipeline[0] if isinstance(node, PipelineBase) and node.pipeline else None
        if first is None:
            return
        dataset = loader_dataset(first)
        node = dataset if dataset is not None else first
        if not isinstance(node, PipelineBase):
            yield node
            return


def why_not(p: Any) -> str:
    """Why ``p`` cannot be resumed, naming the stage at fault."""
    if not tracking_on(p):
        return "resume tracking is switched off (resumable=False or WDS_CLOUD_RESUMABLE=0)"
    name = type(p).__name__
    for node in _chain(p):
        if isinstance(node, RandomMix):
            why = reason(p) or "it reads a RandomMix that is not a DataLoader's dataset"
            return f"{name} cannot be resumed: {why} (see docs/resume.md, 'RandomMix')"
        if not isinstance(node, PipelineBase):
            continue
        if node is not p and is_windowed(node):
            return (
                f"{name} cannot be resumed: with_epoch()/repeat() is set on {type(node).__name__}"
                ", a pipeline inside it with stages above it that hold items (a shuffle, "
                "unbatched, a generator: only batched, map, to_tuple, select and the like may "
                "follow it), or under another window; set it on the object you iterate "
                "instead (see "
                "docs/resume.md, 'with_epoch, resampling and RandomMix')"
            )
        if split_by_sample in node.pipeline:
            return (
                f"{name} cannot be resumed: split_by_sample is resumable only right after "
                "tarfile_to_samples (where WebDataset(split_samples=True) puts it)"
            )
        for stage in node.pipeline:
            if isinstance(stage, ResampledShards) and not stage.deterministic:
                return (
                    f"{name} cannot be resumed: ResampledShards(deterministic=False) mixes the "
                    "pid and the time into its draws; use deterministic=True (WebDataset's "
                    "resampled=True does)"
                )
    return (
        f"{name} cannot be resumed: its shard stages are not a shard list (or ResampledShards), "
        "shard shuffle, node/worker splitters and tarfile_to_samples (custom shard stages and "
        "Pipe-mode FIFOs are not resumable; see docs/resume.md)"
    )
