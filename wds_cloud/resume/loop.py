"""``state_dict``/``load_state_dict`` and tracked iteration for pipelines and loaders.

The object the training loop iterates (the *top*) keeps a :class:`~wds_cloud.resume.state.Ledger`
of what it delivered. Under it, tracked sources produce ``(item, tags)`` pairs:

- a pipeline with a recognised shard source (:func:`~wds_cloud.resume.source.find_source`)
  reads its share of the epoch with sample positions and runs its later stages tracked;
- a pipeline whose first stage is another resumable pipeline runs on that one's pairs;
- a ``WebLoader`` (a pipeline over a ``DataLoader``) tells its dataset to emit
  :class:`~wds_cloud.resume.track.Tagged` values in the workers and unwraps them.

This module is the entry (``DataPipeline`` calls it); what is under the top is found by
:mod:`wds_cloud.resume.walk`, and the pairs are made and delivered by
:mod:`wds_cloud.resume.tracked`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from wds_cloud.core.pipeline_base import PipelineBase
from wds_cloud.errors import ConfigError
from wds_cloud.resume.merge import merge_mixes, merge_states, merge_windows
from wds_cloud.resume.mixing import fresh_state, load_finished, run
from wds_cloud.resume.state import STATE_FORMAT, check_state
from wds_cloud.resume.track import Tagged
from wds_cloud.resume.tracked import deliver, pairs
from wds_cloud.resume.walk import enabled, innermost, is_windowed, loader_dataset, locate
from wds_cloud.resume.window import nested, run_nested, why_not, windowed
from wds_cloud.resume.worker_windows import (
    emit_windows,
    loader_of,
    loader_window,
    next_windows,
    run_loader_windows,
)

log = logging.getLogger(__name__)


def emit(p: Any) -> Iterator[Tagged]:
    """One pass of ``p`` inside a DataLoader worker: values with their tags."""
    ctx = getattr(p, "_resume_ctx", None) or {}
    if is_windowed(p):  # the dataset's own window, one per worker
        yield from emit_windows(p, ctx)
        return
    for item, tags in pairs(p, ctx):
        yield Tagged(item, tags)


def _persistent(p: Any) -> bool:
    dataset = None
    node = p
    while node is not None and node.pipeline:
        first = node.pipeline[0]
        dataset = loader_dataset(first)
        if dataset is not None:
            return bool(getattr(first, "persistent_workers", False))
        node = first if isinstance(first, PipelineBase) else None
    return False


def iterate(p: Any) -> Iterator[Any]:
    """Tracked iteration of the top-level ``p``: one pass, or a ``with_epoch``/``repeat``
    window of passes (:func:`~wds_cloud.resume.window.windowed`)."""
    state = p.__dict__.pop("_resume_pending", None)
    mixed = locate(p)
    if mixed is not None:
        return run(p, mixed, state)
    if is_windowed(p):
        return windowed(p, state, run_pass)
    inner = nested(p)
    if inner is not None:
        return run_nested(p, *inner, state, run_pass)
    if loader_window(p) is not None:
        return run_loader_windows(p, state)
    return run_pass(p, state)


def run_pass(p: Any, state: dict[str, Any] | None) -> Iterator[Any]:
    """One tracked pass of the top-level ``p`` (from ``state`` if given): deliver items and
    record their ids.

    The pass's ledger is set up at once, when the pass starts, not at its first item: a state
    taken in between (``StatefulDataLoader`` takes a worker's state right after
    ``iter(dataset)``, and a persistent worker's dataset still holds the previous epoch's
    ledger then) is that of the new pass.
    """
    found = innermost(p)
    assert found is not None
    inner, source = found
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
    follow = source.shuffle if _persistent(p) else None
    generation = int(state.get("generation", 0)) + 1 if state is not None else 0
    header = {"epoch": epoch, "seed": getattr(inner, "seed", 0), "generation": generation}
    ledger = source.new_ledger(header, order)
    if state is not None:
        ledger.load(state)
    p._resume_ledger = ledger
    return deliver(p, ledger, {**header, "resume": state}, follow, epoch)


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
    ledger = getattr(p, "_resume_ledger", None)
    if ledger is None:
        pending: dict[str, Any] | None = p.__dict__.get("_resume_pending")
        if pending is not None:
            return pending, False  # loaded, not iterated yet
        if not enabled(p):
            return _unresumable(p), False
        mixed = locate(p)
        if mixed is not None:
            return fresh_state(p, mixed), False
        found = innermost(p)
        assert found is not None
        epoch, order = found[1].order()
        ledger = found[1].new_ledger(
            {"epoch": epoch, "seed": getattr(found[0], "seed", 0), "generation": 0}, order
        )
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


def _unresumable(p: Any) -> dict[str, Any]:
    """The state of a pipeline that cannot be resumed: an error, except in a DataLoader worker.

    torchdata's ``StatefulDataLoader`` asks every worker's dataset for its state when the
    worker starts and after its batches, whether or not the training loop ever saves one; a
    pipeline that cannot be resumed (``with_epoch``, ``resampled=True`` ...) must still run
    there. Its worker state names why, and loading it raises.

    Raises:
        ConfigError: outside a DataLoader worker, naming why ``p`` cannot be resumed.
    """
    why = why_not(p)
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
    if not enabled(p):
        raise ConfigError(why_not(p))
    p.__dict__.pop("_resume_ledger", None)
    p.__dict__.pop("_resume_pending", None)  # a state loaded before and not iterated
    mixed = locate(p)
    if mixed is not None or "mixers" in state:
        if mixed is None or "mixers" not in state:
            raise ConfigError(
                "a RandomMix state loads only into a pipeline reading a RandomMix the same way"
            )
        if state.get("finished"):
            load_finished(mixed, state)
        else:
            p._resume_pending = state
        return
    if state.get("finished") and state.get("persistent") and _same_readers(p, state):
        # persistent workers' next windows start at epochs of their own: a new window each
        p._resume_pending = next_windows(state)
        return
    if state.get("finished") and state.get("reader") is None:
        # the epoch is over: the next pass starts the next one. A reader's state (one
        # StatefulDataLoader worker) that finished its share keeps its epoch: the loader's
        # epoch goes on in the other workers and this one has nothing left to deliver.
        found = innermost(p)
        assert found is not None
        if found[1].shuffle is not None:
            found[1].shuffle.epoch = int(state["epoch"]) + (0 if _loader_side(p) else 1)
        return
    p._resume_pending = state


def _same_readers(p: Any, state: dict[str, Any]) -> bool:
    """Whether a worker-windows state was taken with this loader's ranks and workers."""
    from wds_cloud.core.shards import node_info

    loader = loader_of(p)
    if "windows" not in state or loader is None:
        return False
    return list(state.get("readers", ())) == [node_info()[1], max(1, int(loader.num_workers))]


def _loader_side(p: Any) -> bool:
    node = p
    while node is not None and node.pipeline:
        first = node.pipeline[0]
        if loader_dataset(first) is not None:
            return not getattr(first, "persistent_workers", False) and first.num_workers > 0
        node = first if isinstance(first, PipelineBase) else None
    return False
