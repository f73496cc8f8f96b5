"""``state_dict``/``load_state_dict`` and tracked iteration for pipelines and loaders.

The object the training loop iterates (the *top*) keeps a :class:`~wds_cloud.resume.state.Ledger`
of what it delivered. Under it, tracked sources produce ``(item, tags)`` pairs:

- a pipeline with a recognised shard source (:func:`~wds_cloud.resume.source.find_source`)
  reads its share of the epoch with sample positions and runs its later stages tracked;
- a pipeline whose first stage is another resumable pipeline runs on that one's pairs;
- a ``WebLoader`` (a pipeline over a ``DataLoader``) tells its dataset to emit
  :class:`~wds_cloud.resume.track.Tagged` values in the workers and unwraps them.

This module is the entry (``DataPipeline`` calls it); what is under the top is read from the
plan of the ``iter()`` (:mod:`wds_cloud.resume.plan`), and the pairs are made and delivered by
:mod:`wds_cloud.resume.tracked`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from wds_cloud.core.pipeline_base import PipelineBase
from wds_cloud.errors import ConfigError
from wds_cloud.resume import kept
from wds_cloud.resume.merge import merge_mixes, merge_states, merge_windows
from wds_cloud.resume.mixing import fresh_state, load_finished, run
from wds_cloud.resume.plan import Level, Plan, build, tracking_on, why_not
from wds_cloud.resume.state import STATE_FORMAT, check_state
from wds_cloud.resume.track import Tagged, Watch
from wds_cloud.resume.tracked import deliver, pairs, tagged
from wds_cloud.resume.window import run_nested, windowed
from wds_cloud.resume.worker_windows import emit_windows, next_windows, run_loader_windows

log = logging.getLogger(__name__)


def emit(p: PipelineBase) -> Iterator[Tagged]:
    """One pass of ``p`` inside a DataLoader worker: values with their tags."""
    ctx = kept.get(p, kept.CTX) or {}
    watch = ctx["watch"] = Watch()
    plan = build(p)
    if plan.top.windowed:  # the dataset's own window, one per worker
        yield from emit_windows(plan, ctx)
        return
    yield from tagged(pairs(plan.top, ctx), watch)


def iterate(p: PipelineBase) -> Iterator[Any] | None:
    """Tracked iteration of the top-level ``p``: one pass, or a ``with_epoch``/``repeat``
    window of passes (:func:`~wds_cloud.resume.window.windowed`); None when ``p`` is not
    iterated with tracking."""
    if not tracking_on(p):
        return None
    plan = build(p)
    if plan.mode == "off":
        return None
    state = kept.pop(p, kept.PENDING)
    watch = Watch()
    kept.put(p, kept.WATCH, watch)
    if plan.mode == "mix":
        assert plan.mix is not None
        return run(plan.top, plan.mix, state, watch)
    if plan.mode == "window":
        return windowed(plan.top, state, lambda level, resumed: run_pass(plan, level, resumed))
    if plan.mode == "nested":
        return run_nested(plan, state, lambda level, resumed: run_pass(plan, level, resumed))
    if plan.mode == "loader_windows":
        return run_loader_windows(plan, state, watch)
    return run_pass(plan, plan.top, state)


def run_pass(plan: Plan, level: Level, state: dict[str, Any] | None) -> Iterator[Any]:
    """One tracked pass of ``level`` (the top, or the windowed pipeline under it), from
    ``state`` if given: deliver items and record their ids.

    The pass's ledger is set up at once, when the pass starts, not at its first item: a state
    taken in between (``StatefulDataLoader`` takes a worker's state right after
    ``iter(dataset)``, and a persistent worker's dataset still holds the previous epoch's
    ledger then) is that of the new pass.
    """
    reader = plan.reader
    assert reader is not None and reader.source is not None
    source = reader.source
    if state is not None and state.get("reader") is not None:
        _check_reader(state["reader"])
    if state is not None and "windows" in state:
        raise ConfigError(
            "this state was taken by a loader whose dataset has with_epoch() (a window per "
            "DataLoader worker); load it into a loader built the same way"
        )
    if state is not None and source.shuffle is not None:
        source.shuffle.epoch = state["epoch"]
    epoch, order = source.order()
    # persistent workers advance their copies' epoch on every pass; the main copy follows once
    # they exist (advanced before, the workers started by this pass would copy epoch + 1)
    persistent = plan.loader is not None and plan.loader.persistent
    follow = source.shuffle if persistent else None
    generation = int(state.get("generation", 0)) + 1 if state is not None else 0
    header = {"epoch": epoch, "seed": getattr(reader.pipeline, "seed", 0), "generation": generation}
    ledger = source.new_ledger(header, order)
    if state is not None:
        ledger.load(state)
    kept.put(level.pipeline, kept.LEDGER, ledger)
    watch = kept.get(plan.top.pipeline, kept.WATCH)
    ctx = {**header, "resume": state, "watch": watch}
    return deliver(level, ledger, ctx, follow, epoch)


def _check_reader(saved: list[int]) -> None:
    """Refuse a reader's state (one DataLoader worker's) loaded into another reader."""
    from wds_cloud.core.shards import worker_info

    here = list(worker_info())
    if list(saved) != here:
        raise ConfigError(
            f"the state of reader (rank, world, worker, workers) = {tuple(saved)} was loaded "
            f"into reader {tuple(here)}: a worker's state (as StatefulDataLoader saves it) "
            "resumes only the same worker of the same world size; to resume with other "
            "numbers, merge the states with wds_cloud.resume.merge_states and load the result "
            "into the dataset (see docs/resume.md)"
        )


def _reader_scope() -> list[int] | None:
    from wds_cloud.core.shards import dataloader_worker_info, worker_info

    if dataloader_worker_info()[1] > 1 or _in_worker():
        return list(worker_info())
    return None


def _in_worker() -> bool:
    import sys

    data = sys.modules.get("torch.utils.data")
    return data is not None and data.get_worker_info() is not None


def state_dict(p: Any) -> dict[str, Any]:
    """The resume state of ``p`` (see ``docs/resume.md``).

    Raises:
        ConfigError: the pipeline cannot be resumed (names why).
    """
    state, gather = local_state(p)
    return gather_states(state) if gather else state


def local_state(p: Any) -> tuple[dict[str, Any], bool]:
    """This process's state of ``p``, and whether :func:`gather_states` must combine it with
    the other ranks' (``state_dict`` is both; ``DevicePrefetcher`` takes the local part after
    every batch and gathers only when asked, so the ranks meet once per checkpoint).

    Raises:
        ConfigError: the pipeline cannot be resumed (names why).
    """
    ledger = kept.get(p, kept.LEDGER)
    if ledger is None:
        pending: dict[str, Any] | None = kept.get(p, kept.PENDING)
        if pending is not None:
            return pending, False  # loaded, not iterated yet
        plan = build(p)
        if plan.mode == "off":
            return _unresumable(why_not(plan)), False
        if plan.mix is not None:
            return fresh_state(plan.mix), False
        reader = plan.reader
        assert reader is not None and reader.source is not None
        epoch, order = reader.source.order()
        header = {"epoch": epoch, "seed": getattr(reader.pipeline, "seed", 0), "generation": 0}
        ledger = reader.source.new_ledger(header, order)
    else:
        watch: Watch | None = kept.get(p, kept.WATCH)
        why = None if watch is None else watch.why(type(p).__name__)
        if why is not None:
            return _unresumable(why), False
    state = ledger.state()
    scope = _reader_scope()
    if scope is not None:
        state["reader"] = scope
        return state, False
    return state, True


def gather_states(state: dict[str, Any]) -> dict[str, Any]:
    """Under ``torch.distributed`` (more than one rank) the global state from every rank's
    ``state``, the same on each (every rank must call this at the same step); else ``state``."""
    import sys

    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        world = dist.get_world_size()
        if world > 1:
            gathered: list[Any] = [None] * world
            dist.all_gather_object(gathered, state)
            if "windows" in state:
                state = merge_windows(gathered)
            elif "mixers" in state:
                state = merge_mixes(gathered)
            else:
                state = merge_states(gathered)
    return state


def _unresumable(why: str) -> dict[str, Any]:
    """The state of a pipeline that cannot be resumed (``why``): an error, except in a
    DataLoader worker.

    torchdata's ``StatefulDataLoader`` asks every worker's dataset for its state when the
    worker starts and after its batches, whether or not the training loop ever saves one; a
    pipeline that cannot be resumed (``with_epoch``, ``resampled=True`` ...) must still run
    there. Its worker state names why, and loading it raises.

    Raises:
        ConfigError: outside a DataLoader worker, ``why``.
    """
    scope = _reader_scope()
    if scope is None:
        raise ConfigError(why)
    if why not in _warned:
        _warned.add(why)
        log.info("state_dict() in a DataLoader worker: %s; loading this state will fail", why)
    return {"format": STATE_FORMAT, "unresumable": why, "reader": scope}


_warned: set[str] = set()


def load_state_dict(p: Any, state: dict[str, Any]) -> None:
    """Make the next pass of ``p`` deliver what ``state`` did not.

    Raises:
        ConfigError: not a state, or ``p`` cannot be resumed.
    """
    state = check_state(dict(state))
    plan = build(p)
    if plan.mode == "off":
        raise ConfigError(why_not(plan))
    kept.pop(p, kept.LEDGER)
    kept.pop(p, kept.PENDING)  # a state loaded before and not iterated
    if plan.mix is not None or "mixers" in state:
        if plan.mix is None or "mixers" not in state:
            raise ConfigError(
                "a RandomMix state loads only into a pipeline reading a RandomMix the same way"
            )
        if state.get("finished"):
            load_finished(plan.mix, state)
        else:
            kept.put(p, kept.PENDING, state)
        return
    if state.get("finished") and state.get("persistent") and _same_readers(plan, state):
        # persistent workers' next windows start at epochs of their own: a new window each
        kept.put(p, kept.PENDING, next_windows(state))
        return
    if state.get("finished") and state.get("reader") is None:
        # the epoch is over: the next pass starts the next one. A reader's state (one
        # StatefulDataLoader worker) that finished its share keeps its epoch: the loader's
        # epoch goes on in the other workers and this one has nothing left to deliver.
        reader = plan.reader
        assert reader is not None and reader.source is not None
        if reader.source.shuffle is not None:
            reader.source.shuffle.epoch = int(state["epoch"]) + (0 if _loader_side(plan) else 1)
        return
    kept.put(p, kept.PENDING, state)


def _same_readers(plan: Plan, state: dict[str, Any]) -> bool:
    """Whether a worker-windows state was taken with this loader's ranks and workers."""
    from wds_cloud.core.shards import node_info

    if "windows" not in state or plan.loader is None:
        return False
    workers = max(1, int(plan.loader.loader.num_workers))
    return list(state.get("readers", ())) == [node_info()[1], workers]


def _loader_side(plan: Plan) -> bool:
    """Whether the shard shuffle's epoch is advanced by non-persistent DataLoader workers."""
    loader = plan.loader
    if loader is None:
        return False
    return not loader.persistent and loader.loader.num_workers > 0
