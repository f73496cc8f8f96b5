"""Resuming a ``RandomMix`` read through a pipeline or a DataLoader.

``DataPipeline(RandomMix([...], seed=s), stage, ...)`` or ``WebLoader(RandomMix(...))`` (or a
``WebLoader`` over ``DataPipeline(RandomMix(...), map, ...)``): the mix is run by a *mixer*
(the main process, or each DataLoader worker, ``"rank.worker"``) that draws from its
datasets' tracked pairs and puts a mark ``(MIX, mixer, dataset, draws, exhausted)`` before
the ids of every item: which dataset it came from and the mix RNG position right after it
was drawn. Stages between the mix and the training loop may hold items (a shuffle buffer,
``unbatched``), so two things are recorded:

- at the *boundary* (the mix's output in the main process, or the DataLoader's output in the
  main process for a mix run by workers), what was *pulled*: per dataset a ledger of the
  samples (the epoch's shard order minus this is what the mix has not drawn yet), per mixer
  the RNG position of the last item pulled and, per mixer and dataset, the extents pulled;
- at the top, per dataset, what was *delivered*.

The state holds the delivered ledgers, the pulled ledgers, each mixer's RNG position and the
samples it pulled that were not delivered (``left``: they were in buffers). On resume each
mixer first hands out its ``left`` samples again (read by their byte ranges and run through
their dataset's stages), then continues the mix: the RNG advanced by its ``draws``, the
exhausted datasets dropped, each dataset resumed from its pulled ledger. The draws from then
on are the uninterrupted run's; with no stage holding items between the mix and the loop (and
no sample buffer inside the datasets) the resumed sequence is the uninterrupted one's rest,
otherwise every sample is delivered exactly once and the order differs by the samples that
were in buffers.

Every dataset advances its shard-shuffle epoch once per mix pass (drawn from or not).

This module runs the pass of the object iterated; the mixer is
:func:`~wds_cloud.resume.tracked.mix_pairs`, the mix is found by the plan
(:func:`~wds_cloud.resume.plan.locate`), and states are merged by
:func:`~wds_cloud.resume.merge.merge_mixes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from wds_cloud.core.shards import node_info
from wds_cloud.errors import ConfigError
from wds_cloud.resume import kept
from wds_cloud.resume.mix_ledger import MixLedger
from wds_cloud.resume.plan import Level, MixPlan, MixRead
from wds_cloud.resume.track import Watch, flat
from wds_cloud.resume.tracked import pairs


def _readers(found: MixRead) -> list[int]:
    """``[ranks, mixers per rank]``."""
    loader = found.loader
    return [node_info()[1], max(1, int(loader.loader.num_workers)) if loader is not None else 1]


def _sources(plan: MixPlan) -> list[Any]:
    """The shard source of each dataset."""
    found = []
    for reader in plan.readers:
        assert reader is not None and reader.source is not None
        found.append(reader.source)
    return found


def run(top: Level, found: MixRead, state: dict[str, Any] | None, watch: Watch) -> Iterator[Any]:
    """One tracked mix pass of the object iterated (``top``), from ``state`` if given."""
    plan = found.mix
    mix = plan.mix
    readers = _readers(found)
    if state is not None:
        if state.get("readers") != readers:
            raise ConfigError(
                f"this RandomMix state was taken with (ranks, mixers per rank) = "
                f"{tuple(state.get('readers') or ())} and is loaded with {tuple(readers)}: "
                "each mixer (the main process or a DataLoader worker) continues its own draws, "
                "so load it with the same numbers"
            )
        if len(state["datasets"]) != len(mix.datasets) or state["mix"]["seed"] != mix.seed:
            raise ConfigError(
                f"the RandomMix state was taken with {len(state['datasets'])} datasets and seed "
                f"{state['mix']['seed']!r}; this RandomMix has {len(mix.datasets)} and "
                f"{mix.seed!r}"
            )
        mix.epoch = int(state["mix"]["epoch"])
        for source, sub in zip(_sources(plan), state["datasets"], strict=True):
            if source.shuffle is not None:
                source.shuffle.epoch = int(sub["pulled"]["epoch"])
    epoch = mix.epoch
    generation = int(state.get("generation", 0)) + 1 if state is not None else 0
    header = {
        "mix": {"seed": mix.seed, "epoch": epoch},
        "seed": mix.seed,
        "generation": generation,
        "readers": readers,
    }
    ledger = MixLedger(header, plan)
    if state is not None:
        ledger.load(state)
    kept.put(top.pipeline, kept.LEDGER, ledger)
    ctx: dict[str, Any] = {
        "seed": mix.seed,
        "epoch": epoch,
        "generation": generation,
        "mix_resume": state,
        "mix_ledger": ledger,
        "watch": watch,
    }
    return _deliver(top, ledger, ctx, plan, found.loader is not None)


def _advance(plan: MixPlan) -> None:
    """The main process's copies: the next pass's epochs (workers made theirs already)."""
    plan.mix.epoch += 1
    for source in _sources(plan):
        if source.shuffle is not None:
            source.shuffle.epoch = int(source.order()[0]) + 1


def _deliver(
    top: Level, ledger: MixLedger, ctx: dict[str, Any], plan: MixPlan, workers: bool
) -> Iterator[Any]:
    follow = workers
    for item, tags in pairs(top, ctx):
        if follow:
            _advance(plan)
            follow = False
        ledger.add(flat(tags))
        yield item
    if follow:
        _advance(plan)
    ledger.header["finished"] = True


def fresh_state(found: MixRead) -> dict[str, Any]:
    """The state before the first item of a pass."""
    mix = found.mix.mix
    header = {
        "mix": {"seed": mix.seed, "epoch": mix.epoch},
        "seed": mix.seed,
        "generation": 0,
        "readers": _readers(found),
    }
    return MixLedger(header, found.mix).state()


def load_finished(found: MixRead, state: dict[str, Any]) -> None:
    """A state taken after the pass's last item: the next pass is the next mix epoch."""
    found.mix.mix.epoch = int(state["mix"]["epoch"]) + 1
    for source, sub in zip(_sources(found.mix), state["datasets"], strict=True):
        if source.shuffle is not None:
            source.shuffle.epoch = int(sub["pulled"]["epoch"]) + 1
