"""The plan of one ``iter()``: what the object iterated reads, through which stages of what kind.

:func:`build` goes down from the object iterated once, through first stages (pipelines nested in
pipelines, a DataLoader's dataset, a ``RandomMix``'s datasets), and returns a frozen
:class:`Plan`. Each pipeline is a :class:`Level`: what it reads (its shard source, a pipeline, a
DataLoader, a ``RandomMix``) and the stages it runs on that, each a :class:`Step` with the kind
the stage declares (:mod:`wds_cloud.core.stagekind`; an undeclared stage is watched while it
runs, :mod:`wds_cloud.resume.track`). The plan says how the object is iterated
(:attr:`Plan.mode`), which pipeline holds the shard source (:attr:`Plan.reader`), the
``RandomMix`` resumed (:attr:`Plan.mix`) and the DataLoader (:attr:`Plan.loader`); the tracked
iteration, ``state_dict`` and ``load_state_dict`` read these instead of the objects.

A ``with_epoch``/``repeat`` window is allowed on the object iterated, and on one pipeline under
it when every stage above that one is lazy (:func:`lazy`: it yields what it pulled before it
pulls more, so it holds nothing while its output is used; a window under such stages is
delivered as it is read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from wds_cloud.core.mix import RandomMix
from wds_cloud.core.pipeline_base import PipelineBase
from wds_cloud.core.shards import ResampledShards, split_by_sample
from wds_cloud.core.stagekind import Kind, declared_kind, stage_name
from wds_cloud.resume.draws import ResampledSource
from wds_cloud.resume.source import ShardSource, find_source
from wds_cloud.settings import env_bool

#: What a pipeline reads: its shard source, another pipeline (its first stage), a DataLoader,
#: a ``RandomMix``, or something resume does not know.
Reads = Literal["shards", "pipeline", "loader", "mix", "other"]

#: How the object iterated is iterated: not tracked (``off``), one tracked pass, a window of
#: passes on it, a window on a pipeline under it (``nested``), a window per DataLoader worker
#: (``loader_windows``), or a tracked ``RandomMix`` (``mix``).
Mode = Literal["off", "pass", "window", "nested", "loader_windows", "mix"]

Source = ShardSource | ResampledSource


@dataclass(frozen=True, kw_only=True)
class Step:
    """One stage run on what its pipeline reads."""

    index: int  # its position in its pipeline's stages
    name: str
    pipeline: str  # its pipeline's class
    kind: Kind | None  # None: the stage declares none
    lazy: bool
    stage: Any = field(compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class Level:
    """One pipeline: what it reads and the stages it runs on that."""

    name: str  # the pipeline's class
    tracked: bool  # resume tracking is on for it (:func:`tracking_on`)
    windowed: bool  # it has with_epoch()/repeat()
    reads: Reads
    steps: tuple[Step, ...] = ()  # after its reader ("shards"), else after its first stage
    below: Level | None = None  # "pipeline": that one; "loader": the dataset, if a pipeline
    mix: MixPlan | None = None  # "mix", or "loader" whose dataset is a RandomMix
    pipeline: PipelineBase = field(compare=False, repr=False)
    source: Source | None = field(default=None, compare=False, repr=False)  # "shards"
    loader: Any = field(default=None, compare=False, repr=False)  # "loader"

    @property
    def persistent(self) -> bool:
        """Whether the DataLoader it reads keeps its workers between passes."""
        return bool(getattr(self.loader, "persistent_workers", False))


@dataclass(frozen=True, kw_only=True)
class MixPlan:
    """A ``RandomMix`` and its datasets."""

    seeded: bool  # it has a seed
    names: tuple[str, ...]  # the datasets' classes
    datasets: tuple[Level | None, ...]  # None: not a pipeline
    readers: tuple[Level | None, ...]  # the level holding each dataset's shard source
    mix: RandomMix = field(compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class MixRead:
    """A ``RandomMix`` that can be resumed, as the object iterated reads it."""

    mix: MixPlan
    loader: Level | None  # the level reading the DataLoader whose workers run the mix
    lazy: bool  # no stage between the mix and the object's output holds items


@dataclass(frozen=True, kw_only=True)
class Plan:
    """How the object iterated is read (see the module docstring)."""

    top: Level
    mode: Mode
    reader: Level | None = None  # the level holding the shard source
    mix: MixRead | None = None  # mode "mix"
    window: tuple[Level, ...] = ()  # mode "nested": the levels from the top to the windowed one
    loader: Level | None = None  # the level reading a DataLoader, through first stages


# -- building ----------------------------------------------------------------------------------


def tracking_on(p: Any) -> bool:
    """Whether resume tracking is on for ``p``: ``p.resumable`` and ``$WDS_CLOUD_RESUMABLE``
    (a boolean, default true)."""
    return bool(getattr(p, "resumable", True)) and bool(env_bool("WDS_CLOUD_RESUMABLE", True))


def is_windowed(p: PipelineBase) -> bool:
    """Whether ``p`` has ``with_epoch``/``repeat``."""
    return bool(p.repetitions != 1 or p.nsamples >= 0)


def loader_dataset(stage: Any) -> Any:
    """The dataset of a torch DataLoader stage (or of the thread executor's
    ``ThreadDataLoader``, which reads it the same way on threads), or None."""
    names = ("DataLoader", "StatefulDataLoader", "ThreadDataLoader")
    if type(stage).__name__ in names and hasattr(stage, "dataset"):
        return stage.dataset
    return None


def steps(p: PipelineBase, start: int) -> tuple[Step, ...]:
    """The stages ``p.pipeline[start:]`` with what they declare."""
    found = []
    stages = p.pipeline
    for index in range(start, len(stages)):
        stage = stages[index]
        declared = declared_kind(stage)
        found.append(
            Step(
                index=index,
                name=stage_name(stage),
                pipeline=type(p).__name__,
                kind=None if declared is None else declared.kind,
                lazy=declared is not None and declared.lazy,
                stage=stage,
            )
        )
    return tuple(found)


def level(p: PipelineBase) -> Level:
    """The :class:`Level` of pipeline ``p`` and of what it reads."""
    shape: dict[str, Any] = {
        "pipeline": p,
        "name": type(p).__name__,
        "tracked": tracking_on(p),
        "windowed": is_windowed(p),
    }
    if not p.pipeline:
        return Level(reads="other", **shape)
    first = p.pipeline[0]
    if isinstance(first, PipelineBase):
        return Level(reads="pipeline", steps=steps(p, 1), below=level(first), **shape)
    dataset = loader_dataset(first)
    if dataset is not None:
        return Level(
            reads="loader",
            steps=steps(p, 1),
            below=level(dataset) if isinstance(dataset, PipelineBase) else None,
            mix=mix_plan(dataset) if isinstance(dataset, RandomMix) else None,
            loader=first,
            **shape,
        )
    if isinstance(first, RandomMix):
        return Level(reads="mix", steps=steps(p, 1), mix=mix_plan(first), **shape)
    source = find_source(p.pipeline)
    if source is None:
        return Level(reads="other", **shape)
    return Level(reads="shards", steps=steps(p, source.after), source=source, **shape)


def mix_plan(mix: RandomMix) -> MixPlan:
    """The :class:`MixPlan` of ``mix``."""
    datasets = tuple(level(d) if isinstance(d, PipelineBase) else None for d in mix.datasets)
    return MixPlan(
        seeded=mix.seed is not None,
        names=tuple(type(d).__name__ for d in mix.datasets),
        datasets=datasets,
        readers=tuple(None if d is None else innermost(d) for d in datasets),
        mix=mix,
    )


def build(p: PipelineBase) -> Plan:
    """The plan of iterating ``p`` (see the module docstring)."""
    top = level(p)
    reader = innermost(top)
    found = locate(top)
    loader = loader_level(top)
    mode: Mode
    window: tuple[Level, ...] = ()
    if not top.tracked or (reader is None and found is None):
        mode = "off"
    elif found is not None:
        mode = "mix"
    elif top.windowed:
        mode = "window"
    elif (window := nested(top)) != ():
        mode = "nested"
    elif loader is not None and loader.below is not None and loader.below.windowed:
        mode = "loader_windows"
    else:
        mode = "pass"
    return Plan(top=top, mode=mode, reader=reader, mix=found, window=window, loader=loader)


def lazy(stages: tuple[Step, ...]) -> bool:
    """Whether every one of ``stages`` declares itself lazy."""
    return all(s.lazy for s in stages)


def enabled(node: Level) -> bool:
    """Whether the pipeline of ``node`` would be iterated with tracking."""
    return node.tracked and (innermost(node) is not None or locate(node) is not None)


def innermost(node: Level, window_ok: bool | None = None) -> Level | None:
    """The level holding the shard source under ``node``.

    A ``with_epoch``/``repeat`` window is allowed on ``node`` and on one pipeline under it when
    only lazy stages are above that one (``window_ok``: whether one may still come; see
    :func:`nested`)."""
    if window_ok is None:
        window_ok = not node.windowed
    if node.reads == "pipeline":
        first = node.below
        assert first is not None
        ok = window_ok and lazy(node.steps)
        if not enabled(first) or (first.windowed and not ok):
            return None
        return innermost(first, ok and not first.windowed)
    if node.reads == "loader":
        dataset = node.below
        if dataset is None or not enabled(dataset):
            return None
        if dataset.windowed and not window_ok:
            return None  # a window per worker (worker_windows.emit_windows): not under another
        return innermost(dataset)
    return node if node.reads == "shards" else None


def nested(node: Level) -> tuple[Level, ...]:
    """The levels from ``node`` (not windowed) down to a windowed pipeline under it whose window
    is ``node``'s, or ``()`` when there is none or a stage above it can hold items."""
    if node.windowed:
        return ()
    path: list[Level] = []
    while node.reads == "pipeline":
        if not lazy(node.steps):
            return ()
        path.append(node)
        assert node.below is not None
        node = node.below
        if node.windowed:
            return (*path, node)
    return ()


def loader_level(node: Level) -> Level | None:
    """The level reading a DataLoader under ``node`` (found through first stages), or None."""
    current: Level | None = node
    while current is not None:
        if current.reads == "loader":
            return current
        current = current.below if current.reads == "pipeline" else None
    return None


# -- a RandomMix under the object iterated -----------------------------------------------------

_IN_WORKER = (
    "a RandomMix inside a DataLoader worker has stages after it that hold items (a shuffle, "
    "unbatched, a generator) or with_epoch(): the main process cannot see what they pulled; "
    "only batched, map, to_tuple, select and the like may follow it there (put buffers in the "
    "main process, after the WebLoader)"
)
_WINDOWED = (
    "with_epoch()/repeat() on a pipeline that reads a RandomMix: a mix pass is not a window of "
    "passes; stop the loop at the count instead"
)


def find_mix(node: Level) -> tuple[MixRead | None, str | None]:
    """``(read, None)`` when ``node`` reads a ``RandomMix`` that can be tracked (through first
    stages of pipelines, or as the first stage of a DataLoader's dataset); ``(None, why)`` when
    it reads one that cannot; ``(None, None)`` when it reads none (or a RandomMix iterated
    directly: ``RandomMix.state_dict``)."""
    holds_nothing = True
    current = node
    while True:
        if current.reads == "loader":
            holds_nothing = holds_nothing and lazy(current.steps)
            dataset = current.below
            if dataset is not None:
                if dataset.reads != "mix":
                    return None, None
                if not lazy(dataset.steps) or dataset.windowed:
                    return None, _IN_WORKER
                assert dataset.mix is not None
                return _checked(dataset.mix, current, holds_nothing)
            if current.mix is not None:
                return _checked(current.mix, current, holds_nothing)
            return None, None
        if current.reads not in ("pipeline", "mix"):
            return None, None
        if current.windowed:
            return None, _WINDOWED
        holds_nothing = holds_nothing and lazy(current.steps)
        if current.reads == "mix":
            assert current.mix is not None
            return _checked(current.mix, None, holds_nothing)
        assert current.below is not None
        current = current.below


def locate(node: Level) -> MixRead | None:
    """The ``RandomMix`` ``node`` reads, when it can be resumed."""
    return find_mix(node)[0]


def _checked(
    mix: MixPlan, loader: Level | None, holds_nothing: bool
) -> tuple[MixRead | None, str | None]:
    why = _why_not_mix(mix, holds_nothing)
    if why is not None:
        return None, why
    return MixRead(mix=mix, loader=loader, lazy=holds_nothing), None


def _why_not_mix(mix: MixPlan, holds_nothing: bool) -> str | None:
    """Why ``mix`` (read by a pipeline, or by a DataLoader's workers) cannot be resumed."""
    if not mix.seeded:
        return "RandomMix(seed=None) draws from an unseeded RNG: pass seed= to resume"
    for i, d in enumerate(mix.datasets):
        if d is None or not enabled(d) or d.windowed:
            return (
                f"RandomMix dataset {i} ({mix.names[i]}) is not a resumable pipeline "
                "without with_epoch() (a WebDataset or DataPipeline over shards)"
            )
        if loader_level(d) is not None:
            return f"RandomMix dataset {i} reads a DataLoader: mix loaders' outputs instead"
        reader = mix.readers[i]
        if reader is not None and isinstance(reader.source, ResampledSource) and not holds_nothing:
            return (
                f"RandomMix dataset {i} is resampled and a stage between the mix and the loop "
                "holds items (a shuffle, unbatched): resampled samples are tracked by draw, "
                "and a draw's shard cannot be found again from the state to bring buffered "
                "samples back; put the buffers inside the datasets, before the mix"
            )
    return None


# -- why not -----------------------------------------------------------------------------------


def why_not(plan: Plan) -> str:
    """Why the object of ``plan`` cannot be resumed, naming the stage at fault."""
    top = plan.top
    if not top.tracked:
        return "resume tracking is switched off (resumable=False or WDS_CLOUD_RESUMABLE=0)"
    name = top.name
    current: Level | None = top
    while current is not None:
        if current is not top and current.windowed:
            return (
                f"{name} cannot be resumed: with_epoch()/repeat() is set on {current.name}"
                ", a pipeline inside it with stages above it that hold items (a shuffle, "
                "unbatched, a generator: only batched, map, to_tuple, select and the like may "
                "follow it), or under another window; set it on the object you iterate "
                "instead (see "
                "docs/resume.md, 'with_epoch, resampling and RandomMix')"
            )
        stages = current.pipeline.pipeline
        if split_by_sample in stages:
            return (
                f"{name} cannot be resumed: split_by_sample is resumable only right after "
                "tarfile_to_samples (where WebDataset(split_samples=True) puts it)"
            )
        for stage in stages:
            if isinstance(stage, ResampledShards) and not stage.deterministic:
                return (
                    f"{name} cannot be resumed: ResampledShards(deterministic=False) mixes the "
                    "pid and the time into its draws; use deterministic=True (WebDataset's "
                    "resampled=True does)"
                )
        if current.mix is not None:
            why = find_mix(top)[1] or "it reads a RandomMix that is not a DataLoader's dataset"
            return f"{name} cannot be resumed: {why} (see docs/resume.md, 'RandomMix')"
        current = current.below if current.reads in ("pipeline", "loader") else None
    return (
        f"{name} cannot be resumed: its shard stages are not a shard list (or ResampledShards), "
        "shard shuffle, node/worker splitters and tarfile_to_samples (custom shard stages and "
        "Pipe-mode FIFOs are not resumable; see docs/resume.md)"
    )
