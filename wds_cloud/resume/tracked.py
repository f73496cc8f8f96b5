"""Tracked passes: the ``(item, tags)`` pairs of a pipeline, and delivering them.

:func:`pairs` runs one pass of a pipeline (a :class:`~wds_cloud.resume.plan.Level` of the
plan) on the pairs of what it reads: its shard source, the pipeline it reads, a DataLoader
whose workers emit :class:`~wds_cloud.resume.track.Tagged` values, or a ``RandomMix``
(:func:`mix_pairs`, the mixer of :mod:`wds_cloud.resume.mixing`). :func:`deliver` hands the
items of the object iterated to the training loop and records their ids in its ledger.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Any

from wds_cloud.core.mix import RandomMix, mix_weights, mixed_samples
from wds_cloud.core.shards import worker_info
from wds_cloud.core.shuffle import stable_seed
from wds_cloud.resume import kept
from wds_cloud.resume.mix_ledger import MIX, MixLedger
from wds_cloud.resume.plan import Level, MixPlan, mix_plan
from wds_cloud.resume.state import Ledger, WorkItem
from wds_cloud.resume.track import Rows, Tagged, TaggedCollate, Watch, flat, run_stages


def pairs(level: Level, ctx: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """``(item, tags)`` pairs of one pass of the pipeline of ``level``."""
    if level.reads == "pipeline":
        assert level.below is not None
        src = pairs(level.below, ctx)
    elif level.reads == "loader":
        src = _loader_pairs(level.loader, ctx)
        if ctx.get("mix_ledger") is not None:
            src = boundary(src, ctx["mix_ledger"])
    elif level.reads == "mix":
        assert level.mix is not None
        src = mix_pairs(level.mix, ctx)
        if ctx.get("mix_ledger") is not None:
            src = boundary(src, ctx["mix_ledger"])
    else:
        assert level.source is not None
        src = level.source.pairs(ctx)
    # the place seeds unseeded shuffles: a ThreadLoader's pipeline draws as a WebLoader's
    name = "WebLoader" if level.name == "ThreadLoader" else level.name
    sub = dict(ctx, place=f"{ctx.get('place', '')}/{name}")
    return run_stages(level.steps, src, sub)


def _loader_pairs(loader: Any, ctx: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    dataset = loader.dataset
    # in each worker the dataset's __iter__ emits tagged values: a pipeline's by
    # resume.loop.emit, a RandomMix's by the function set here (core.mix cannot import it)
    kept.put(dataset, kept.EMIT, emit_mix if isinstance(dataset, RandomMix) else True)
    worker_ctx = {k: v for k, v in ctx.items() if k not in ("mix_ledger", "watch")}
    worker_ctx["place"] = "worker"
    kept.put(dataset, kept.CTX, worker_ctx)
    if not isinstance(loader.collate_fn, TaggedCollate):
        loader.collate_fn = TaggedCollate(loader.collate_fn)
    if ctx.get("resume") is not None:
        shut_down_persistent_workers(loader)
    watch: Watch | None = ctx.get("watch")
    for value in loader:
        if isinstance(value, Tagged):
            if value.refused and watch is not None:
                watch.add(value.refused)
            yield value.item, value.tags
        else:
            yield value, []


def shut_down_persistent_workers(loader: Any) -> None:
    """Stop ``loader``'s persistent workers, if it has any running: they hold a copy of the
    dataset made before a state was loaded. torch keeps them in the private ``_iterator``
    (checked with torch 2.13 and torchdata 0.11's ``StatefulDataLoader``: ``_iterator`` is
    None until the first ``iter()`` and kept with persistent workers, and its
    ``_shutdown_workers()`` stops them)."""
    iterator = getattr(loader, "_iterator", None)
    if iterator is not None:
        iterator._shutdown_workers()
        loader._iterator = None


def deliver(
    level: Level, ledger: Any, ctx: dict[str, Any], follow: Any, epoch: int
) -> Iterator[Any]:
    """The items of a pass of the object iterated (``level``), their ids recorded in
    ``ledger`` (``follow``: a shard shuffle whose epoch is advanced once the DataLoader workers
    exist)."""
    src = pairs(level, ctx)
    if follow is not None:
        for item, tags in src:
            follow.epoch = epoch + 1  # the workers exist now: the main copy follows
            follow = None
            ledger.add(flat(tags))
            yield item
            break
    if isinstance(ledger, Ledger):  # the hot path: ids appended, merged every 16,384
        pending = ledger.pending
        for item, tags in src:
            pending.extend(tags if type(tags) is list else flat(tags))
            if len(pending) > 16384:
                ledger.compact()  # empties ``pending`` in place
            yield item
    else:
        add = ledger.add
        for item, tags in src:
            add(tags if type(tags) is list else flat(tags))
            yield item
    if follow is not None:
        follow.epoch = epoch + 1
    ledger.header["finished"] = True


# -- the mixer (see wds_cloud.resume.mixing) ------------------------------------------------


def reader_key() -> str:
    """This mixer: ``"rank.worker"``."""
    rank, _, worker, _ = worker_info()
    return f"{rank}.{worker}"


def mix_pairs(plan: MixPlan, ctx: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """One mix pass as ``(item, tags)`` pairs, each item's ids preceded by its mark: first
    the samples this mixer pulled before the state but that were not delivered, then the
    rest of the mix from the state's RNG position."""
    state = ctx.get("mix_resume")
    ctx["mix_resume"] = None  # one pass only (a persistent worker keeps its copy of ctx)
    me = reader_key()
    mix = plan.mix
    mine = (state or {}).get("mixers", {}).get(me, {})
    epoch = int(state["mix"]["epoch"]) if state is not None else mix.epoch
    mix.epoch = epoch + 1
    generation = int(ctx.get("generation", 0))
    watch = ctx.get("watch")
    srcs: list[dict[str, Any]] = []
    for i, found in enumerate(plan.readers):
        assert found is not None and found.source is not None
        inner, source = found.pipeline, found.source
        sub = state["datasets"][i]["pulled"] if state is not None else None
        if sub is None:
            e = source.order()[0]
            header = {"epoch": e, "seed": getattr(inner, "seed", 0), "generation": 0}
            sub = source.new_ledger(header, source.order(e)[1]).state()
        if source.shuffle is not None:
            source.shuffle.epoch = int(sub["epoch"]) + 1  # every dataset, once per mix pass
        if state is not None and not getattr(source, "sample_split", True):
            # the mixer's own shards, as in the uninterrupted run (a mixer's draws are its own)
            sub = dict(sub, reader=list(worker_info()))
        header = {"epoch": int(sub["epoch"]), "seed": getattr(inner, "seed", 0)}
        srcs.append({**header, "generation": generation, "resume": sub, "mix": i, "watch": watch})

    def marked(i: int, src: Iterable[tuple[Any, Any]], track: dict[str, Any] | None) -> Any:
        for item, tags in src:
            mark: tuple[Any, ...]
            if track is None:
                mark = (MIX, me, i, None, None)
            else:
                mark = (MIX, me, i, track["draws"], tuple(track["exhausted"]))
            if isinstance(tags, Rows):
                tags = Rows([mark, *row] for row in tags)
            else:
                tags = [mark, *flat(tags)]
            yield item, tags

    for i, left in enumerate(mine.get("left", [])):
        if left:
            items = [_work(url, extents) for url, extents in left]
            ctx_i = dict(srcs[i], resume=None, items=items)
            yield from marked(i, pairs(_dataset(plan, i), ctx_i), None)
    rng = random.Random(stable_seed(mix.seed or 0, epoch))
    draws = int(mine.get("draws", 0))
    for _ in range(draws):
        rng.random()
    track: dict[str, Any] = {
        "epoch": epoch,
        "draws": draws,
        "exhausted": list(mine.get("exhausted", [])),
        "drawn": set(),
    }
    gone = set(track["exhausted"])
    live = [i for i in range(len(mix.datasets)) if i not in gone]
    weights = mix_weights(mix.probs, len(mix.datasets))
    sources = [iter(marked(i, pairs(_dataset(plan, i), dict(srcs[i])), track)) for i in live]
    yield from mixed_samples(sources, [weights[i] for i in live], mix.longest, rng, track, live)


def _dataset(plan: MixPlan, i: int) -> Level:
    found = plan.datasets[i]
    assert found is not None
    return found


def _work(url: str, flat: list[int]) -> WorkItem:
    return WorkItem(url, tuple((flat[k], flat[k + 1]) for k in range(0, len(flat), 2)), None)


def emit_mix(mix: RandomMix) -> Iterator[Any]:
    """One mix pass of ``mix`` inside a DataLoader worker, as tagged values."""
    ctx = kept.get(mix, kept.CTX) or {}
    watch = ctx["watch"] = Watch()
    yield from tagged(mix_pairs(mix_plan(mix), ctx), watch)


def tagged(src: Iterable[tuple[Any, Any]], watch: Watch) -> Iterator[Tagged]:
    """The pairs of ``src`` as :class:`Tagged` values, carrying what ``watch`` noted."""
    refused = watch.refused
    for item, tags in src:
        if refused:
            yield Tagged(item, tags, tuple(refused))
        else:
            yield Tagged(item, tags)


def boundary(src: Iterator[tuple[Any, Any]], ledger: MixLedger) -> Iterator[tuple[Any, Any]]:
    """Note what crosses the boundary as pulled."""
    for item, tags in src:
        ledger.pull(flat(tags))
        yield item, tags
