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
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Any

from wds_cloud.core.shuffle import stable_seed
from wds_cloud.errors import ConfigError
from wds_cloud.resume.mix_ledger import MIX, MixLedger
from wds_cloud.resume.state import STATE_FORMAT, WorkItem, check_state


def _mix_type() -> type:
    from wds_cloud.core.mix import RandomMix

    return RandomMix


def _lazy(stages: list[Any]) -> bool:
    from wds_cloud.resume.window import lazy

    return lazy(stages)


Found = tuple[Any, Any, bool]


def _find(p: Any) -> tuple[Found | None, str | None]:
    """``((mix, loader or None, lazy), None)`` when ``p`` reads a ``RandomMix`` that can be
    tracked (through first stages of pipelines, or as the first stage of a DataLoader's
    dataset; ``lazy``: no stage between the mix and ``p``'s output holds items); ``(None,
    why)`` when it reads one that cannot; ``(None, None)`` when it reads none."""
    from wds_cloud.core.pipeline import DataPipeline
    from wds_cloud.resume.loop import _loader_dataset, _windowed

    mix_type = _mix_type()
    node: Any = p
    lazy = True
    loader = None
    while True:
        if isinstance(node, mix_type):
            if loader is None:
                return None, None  # a RandomMix iterated directly: RandomMix.state_dict
            break
        if not isinstance(node, DataPipeline) or not node.pipeline:
            return None, None
        first = node.pipeline[0]
        dataset = _loader_dataset(first)
        if dataset is not None:
            if loader is not None:
                return None, None
            loader = first
            lazy = lazy and _lazy(node.pipeline[1:])
            if isinstance(dataset, DataPipeline):
                if not dataset.pipeline or not isinstance(dataset.pipeline[0], mix_type):
                    return None, None
                if not _lazy(dataset.pipeline[1:]) or _windowed(dataset):
                    return None, (
                        "a RandomMix inside a DataLoader worker has stages after it that hold "
                        "items (a shuffle, unbatched, a generator) or with_epoch(): the main "
                        "process cannot see what they pulled; only batched, map, to_tuple, "
                        "select and the like may follow it there (put buffers in the main "
                        "process, after the WebLoader)"
                    )
            node = dataset
            continue
        if isinstance(first, (mix_type, DataPipeline)):
            if _windowed(node):
                return None, (
                    "with_epoch()/repeat() on a pipeline that reads a RandomMix: a mix pass is "
                    "not a window of passes; stop the loop at the count instead"
                )
            if isinstance(first, mix_type) and loader is None:
                lazy = lazy and _lazy(node.pipeline[1:])
                return _checked(first, None, lazy)
            if isinstance(first, DataPipeline):
                lazy = lazy and _lazy(node.pipeline[1:])
            node = first
            continue
        return None, None
    return _checked(node, loader, lazy)


def _checked(mix: Any, loader: Any, lazy: bool) -> tuple[Found | None, str | None]:
    why = why_not(mix, loader, lazy)
    return (None, why) if why is not None else ((mix, loader, lazy), None)


def locate(p: Any) -> Found | None:
    """``(mix, loader or None, lazy)`` when ``p`` reads a ``RandomMix`` that can be resumed."""
    return _find(p)[0]


def reason(p: Any) -> str | None:
    """Why the RandomMix ``p`` reads cannot be resumed (None: no RandomMix, or it can)."""
    return _find(p)[1]


def why_not(mix: Any, loader: Any, lazy: bool) -> str | None:
    """Why ``mix`` (read by a pipeline, or by ``loader``'s workers) cannot be resumed."""
    from wds_cloud.core.pipeline import DataPipeline
    from wds_cloud.resume.draws import ResampledSource
    from wds_cloud.resume.loop import _loader_dataset, _windowed, enabled, innermost

    if mix.seed is None:
        return "RandomMix(seed=None) draws from an unseeded RNG: pass seed= to resume"
    for i, d in enumerate(mix.datasets):
        if not isinstance(d, DataPipeline) or not enabled(d) or _windowed(d):
            return (
                f"RandomMix dataset {i} ({type(d).__name__}) is not a resumable pipeline "
                "without with_epoch() (a WebDataset or DataPipeline over shards)"
            )
        node: Any = d
        while isinstance(node, DataPipeline) and node.pipeline:
            if _loader_dataset(node.pipeline[0]) is not None:
                return f"RandomMix dataset {i} reads a DataLoader: mix loaders' outputs instead"
            node = node.pipeline[0]
        found = innermost(d)
        if found is not None and isinstance(found[1], ResampledSource) and not lazy:
            return (
                f"RandomMix dataset {i} is resampled and a stage between the mix and the loop "
                "holds items (a shuffle, unbatched): resampled samples are tracked by draw, "
                "and a draw's shard cannot be found again from the state to bring buffered "
                "samples back; put the buffers inside the datasets, before the mix"
            )
    return None


def reader_key() -> str:
    """This mixer: ``"rank.worker"``."""
    from wds_cloud.core.shards import worker_info

    rank, _, worker, _ = worker_info()
    return f"{rank}.{worker}"


# -- the mixer ------------------------------------------------------------------------------


def mix_pairs(mix: Any, ctx: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """One mix pass as ``(item, tags)`` pairs, each item's ids preceded by its mark: first
    the samples this mixer pulled before the state but that were not delivered, then the
    rest of the mix from the state's RNG position."""
    from wds_cloud.core.mix import _mixed, _weights
    from wds_cloud.core.shards import worker_info
    from wds_cloud.resume.loop import innermost, pairs

    state = ctx.get("mix_resume")
    ctx["mix_resume"] = None  # one pass only (a persistent worker keeps its copy of ctx)
    me = reader_key()
    mine = (state or {}).get("mixers", {}).get(me, {})
    epoch = int(state["mix"]["epoch"]) if state is not None else mix.epoch
    mix.epoch = epoch + 1
    generation = int(ctx.get("generation", 0))
    srcs: list[dict[str, Any]] = []
    for i, d in enumerate(mix.datasets):
        found = innermost(d)
        assert found is not None
        inner, source = found
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
        srcs.append({**header, "generation": generation, "resume": sub, "mix": i})

    def marked(i: int, src: Iterable[tuple[Any, Any]], track: dict[str, Any] | None) -> Any:
        from wds_cloud.resume.track import Rows, flat

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
            items = [_work(url, flat) for url, flat in left]
            ctx_i = dict(srcs[i], resume=None, items=items)
            yield from marked(i, pairs(mix.datasets[i], ctx_i), None)
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
    weights = _weights(mix.probs, len(mix.datasets))
    sources = [iter(marked(i, pairs(mix.datasets[i], dict(srcs[i])), track)) for i in live]
    yield from _mixed(sources, [weights[i] for i in live], mix.longest, rng, track, live)


def _work(url: str, flat: list[int]) -> WorkItem:
    return WorkItem(url, tuple((flat[k], flat[k + 1]) for k in range(0, len(flat), 2)), None)


def emit(mix: Any) -> Iterator[Any]:
    """One mix pass of ``mix`` inside a DataLoader worker, as tagged values."""
    from wds_cloud.resume.track import Tagged

    ctx = getattr(mix, "_resume_ctx", None) or {}
    for item, tags in mix_pairs(mix, ctx):
        yield Tagged(item, tags)


# -- the object iterated --------------------------------------------------------------------


def run(p: Any, found: Found, state: dict[str, Any] | None) -> Iterator[Any]:
    """One tracked mix pass of the top-level ``p``, from ``state`` if given."""
    from wds_cloud.core.shards import node_info
    from wds_cloud.resume.loop import innermost

    mix, loader, _ = found
    readers = [node_info()[1], max(1, int(loader.num_workers)) if loader is not None else 1]
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
        for d, sub in zip(mix.datasets, state["datasets"], strict=True):
            source = innermost(d)[1]  # type: ignore[index]
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
    ledger = MixLedger(header, mix)
    if state is not None:
        ledger.load(state)
    p._resume_ledger = ledger
    ctx = {"seed": mix.seed, "epoch": epoch, "generation": generation, "mix_resume": state}
    ctx["mix_ledger"] = ledger
    return _deliver(p, ledger, ctx, mix, loader is not None)


def _advance(mix: Any) -> None:
    """The main process's copies: the next pass's epochs (workers made theirs already)."""
    from wds_cloud.resume.loop import innermost

    mix.epoch += 1
    for d in mix.datasets:
        source = innermost(d)[1]  # type: ignore[index]
        if source.shuffle is not None:
            source.shuffle.epoch = int(source.order()[0]) + 1


def _deliver(
    p: Any, ledger: MixLedger, ctx: dict[str, Any], mix: Any, workers: bool
) -> Iterator[Any]:
    from wds_cloud.resume.loop import pairs
    from wds_cloud.resume.track import flat

    follow = workers
    for item, tags in pairs(p, ctx):
        if follow:
            _advance(mix)
            follow = False
        ledger.add(flat(tags))
        yield item
    if follow:
        _advance(mix)
    ledger.header["finished"] = True


def boundary(src: Iterator[tuple[Any, Any]], ledger: MixLedger) -> Iterator[tuple[Any, Any]]:
    """Note what crosses the boundary as pulled."""
    from wds_cloud.resume.track import flat

    for item, tags in src:
        ledger.pull(flat(tags))
        yield item, tags


def fresh_state(p: Any, found: Found) -> dict[str, Any]:
    """The state before the first item of a pass."""
    from wds_cloud.core.shards import node_info

    mix, loader, _ = found
    readers = [node_info()[1], max(1, int(loader.num_workers)) if loader is not None else 1]
    header = {
        "mix": {"seed": mix.seed, "epoch": mix.epoch},
        "seed": mix.seed,
        "generation": 0,
        "readers": readers,
    }
    return MixLedger(header, mix).state()


def load_finished(found: Found, state: dict[str, Any]) -> None:
    """A state taken after the pass's last item: the next pass is the next mix epoch."""
    from wds_cloud.resume.loop import innermost

    mix = found[0]
    mix.epoch = int(state["mix"]["epoch"]) + 1
    for d, sub in zip(mix.datasets, state["datasets"], strict=True):
        source = innermost(d)[1]  # type: ignore[index]
        if source.shuffle is not None:
            source.shuffle.epoch = int(sub["pulled"]["epoch"]) + 1


def merge_mixes(states: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge the RandomMix states of several ranks taken at the same step (mixers are keyed by
    rank and worker; datasets' ledgers are merged)."""
    from wds_cloud.resume.state import merge_states

    states = [check_state(s) for s in states]
    if not all("mixers" in s for s in states):
        raise ConfigError("merge_states: RandomMix states mixed with other states")
    merged = dict(states[0])
    merged.pop("reader", None)
    scopes = [s["reader"] for s in states if s.get("reader") is not None]
    if scopes:  # per-worker states (StatefulDataLoader): the mixers are the workers
        merged["readers"] = [scopes[0][1], scopes[0][3]]
    datasets = []
    for i in range(len(merged["datasets"])):
        sub = {}
        for part in ("delivered", "pulled"):
            parts = [dict(s["datasets"][i][part], format=STATE_FORMAT) for s in states]
            m = merge_states(parts)
            m.pop("format", None)
            sub[part] = m
        datasets.append(sub)
    merged["datasets"] = datasets
    merged["mixers"] = dict(sorted((r, d) for s in states for r, d in s["mixers"].items()))
    merged["delivered"] = sum(int(s.get("delivered", 0)) for s in states)
    merged["generation"] = max(int(s.get("generation", 0)) for s in states)
    merged.pop("finished", None)
    if all(s.get("finished") for s in states):
        merged["finished"] = True
    return merged
