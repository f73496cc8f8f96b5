"""Walking the object iterated: what it reads and whether it is tracked.

Down through first stages (pipelines nested in pipelines, a DataLoader's dataset):
:func:`innermost` finds the pipeline holding the shard source
(:func:`~wds_cloud.resume.source.find_source`), :func:`locate` a ``RandomMix`` that can be
resumed (:mod:`wds_cloud.resume.mixing`), and :func:`enabled` says whether the object is
iterated with tracking (one or the other). A ``with_epoch``/``repeat`` window may sit under
stages that hold nothing (:func:`lazy`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from wds_cloud.core.mix import RandomMix
from wds_cloud.core.pipeline_base import PipelineBase
from wds_cloud.resume.draws import ResampledSource
from wds_cloud.resume.source import ShardSource, find_source
from wds_cloud.settings import env_bool


def loader_dataset(stage: Any) -> Any:
    """The dataset of a torch DataLoader stage, or None."""
    if type(stage).__name__ in ("DataLoader", "StatefulDataLoader") and hasattr(stage, "dataset"):
        return stage.dataset
    return None


def tracking_on(p: Any) -> bool:
    """Whether resume tracking is on for ``p``: ``p.resumable`` and ``$WDS_CLOUD_RESUMABLE``
    (a boolean, default true)."""
    return bool(getattr(p, "resumable", True)) and bool(env_bool("WDS_CLOUD_RESUMABLE", True))


def is_windowed(p: Any) -> bool:
    """Whether ``p`` has ``with_epoch``/``repeat`` (resumable only on the object iterated, or
    under :func:`lazy` stages)."""
    return bool(p.repetitions != 1 or p.nsamples >= 0)


def _lazy_functions() -> frozenset[Any]:
    from wds_cloud.core import batching, stages

    return frozenset(
        (
            batching._batched,
            batching._listed,
            stages._map,
            stages._map_dict,
            stages._map_tuple,
            stages._to_tuple,
            stages._select,
            stages._rename,
            stages._rename_keys,
            stages._extract_keys,
        )
    )


def lazy(stages: Iterable[Any]) -> bool:
    """Whether every stage of ``stages`` yields what it pulled before pulling more (a batch of
    the items it pulled, a mapped or selected item), so it holds nothing while its output is
    used: a window under such stages is delivered as it is read."""
    from wds_cloud.core.curry import FilterFunction

    known = _lazy_functions()
    return all(isinstance(s, FilterFunction) and s.f in known for s in stages)


def enabled(p: Any) -> bool:
    """Whether ``p`` is iterated with tracking."""
    if not tracking_on(p):
        return False
    if innermost(p) is not None:
        return True
    return locate(p) is not None


def innermost(p: Any, window_ok: bool | None = None) -> tuple[Any, ShardSource] | None:
    """The pipeline holding the shard source under ``p``, and that source.

    A ``with_epoch``/``repeat`` window is allowed on ``p`` and on one pipeline under it when
    only lazy stages are above that one (``window_ok``: whether one may still come; see
    :func:`~wds_cloud.resume.window.nested`)."""
    if not p.pipeline:
        return None
    if window_ok is None:
        window_ok = not is_windowed(p)
    first = p.pipeline[0]
    if isinstance(first, PipelineBase):
        ok = window_ok and lazy(p.pipeline[1:])
        if not enabled(first) or (is_windowed(first) and not ok):
            return None
        return innermost(first, ok and not is_windowed(first))
    dataset = loader_dataset(first)
    if dataset is not None:
        if not isinstance(dataset, PipelineBase) or not enabled(dataset):
            return None
        if is_windowed(dataset) and not window_ok:
            return None  # a window per worker (worker_windows.emit_windows): not under another
        return innermost(dataset)
    source = find_source(p.pipeline)
    return None if source is None else (p, source)


# -- a RandomMix under the object iterated ----------------------------------------------------

Found = tuple[Any, Any, bool]


def _find(p: Any) -> tuple[Found | None, str | None]:
    """``((mix, loader or None, lazy), None)`` when ``p`` reads a ``RandomMix`` that can be
    tracked (through first stages of pipelines, or as the first stage of a DataLoader's
    dataset; ``lazy``: no stage between the mix and ``p``'s output holds items); ``(None,
    why)`` when it reads one that cannot; ``(None, None)`` when it reads none."""
    node: Any = p
    holds_nothing = True
    loader = None
    while True:
        if isinstance(node, RandomMix):
            if loader is None:
                return None, None  # a RandomMix iterated directly: RandomMix.state_dict
            break
        if not isinstance(node, PipelineBase) or not node.pipeline:
            return None, None
        first = node.pipeline[0]
        dataset = loader_dataset(first)
        if dataset is not None:
            if loader is not None:
                return None, None
            loader = first
            holds_nothing = holds_nothing and lazy(node.pipeline[1:])
            if isinstance(dataset, PipelineBase):
                if not dataset.pipeline or not isinstance(dataset.pipeline[0], RandomMix):
                    return None, None
                if not lazy(dataset.pipeline[1:]) or is_windowed(dataset):
                    return None, (
                        "a RandomMix inside a DataLoader worker has stages after it that hold "
                        "items (a shuffle, unbatched, a generator) or with_epoch(): the main "
                        "process cannot see what they pulled; only batched, map, to_tuple, "
                        "select and the like may follow it there (put buffers in the main "
                        "process, after the WebLoader)"
                    )
            node = dataset
            continue
        if isinstance(first, (RandomMix, PipelineBase)):
            if is_windowed(node):
                return None, (
                    "with_epoch()/repeat() on a pipeline that reads a RandomMix: a mix pass is "
                    "not a window of passes; stop the loop at the count instead"
                )
            if isinstance(first, RandomMix) and loader is None:
                holds_nothing = holds_nothing and lazy(node.pipeline[1:])
                return _checked(first, None, holds_nothing)
            if isinstance(first, PipelineBase):
                holds_nothing = holds_nothing and lazy(node.pipeline[1:])
            node = first
            continue
        return None, None
    return _checked(node, loader, holds_nothing)


def _checked(mix: Any, loader: Any, holds_nothing: bool) -> tuple[Found | None, str | None]:
    why = _why_not_mix(mix, loader, holds_nothing)
    return (None, why) if why is not None else ((mix, loader, holds_nothing), None)


def locate(p: Any) -> Found | None:
    """``(mix, loader or None, lazy)`` when ``p`` reads a ``RandomMix`` that can be resumed."""
    return _find(p)[0]


def reason(p: Any) -> str | None:
    """Why the RandomMix ``p`` reads cannot be resumed (None: no RandomMix, or it can)."""
    return _find(p)[1]


def _why_not_mix(mix: Any, loader: Any, holds_nothing: bool) -> str | None:
    """Why ``mix`` (read by a pipeline, or by ``loader``'s workers) cannot be resumed."""
    if mix.seed is None:
        return "RandomMix(seed=None) draws from an unseeded RNG: pass seed= to resume"
    for i, d in enumerate(mix.datasets):
        if not isinstance(d, PipelineBase) or not enabled(d) or is_windowed(d):
            return (
                f"RandomMix dataset {i} ({type(d).__name__}) is not a resumable pipeline "
                "without with_epoch() (a WebDataset or DataPipeline over shards)"
            )
        node: Any = d
        while isinstance(node, PipelineBase) and node.pipeline:
            if loader_dataset(node.pipeline[0]) is not None:
                return f"RandomMix dataset {i} reads a DataLoader: mix loaders' outputs instead"
            node = node.pipeline[0]
        found = innermost(d)
        if found is not None and isinstance(found[1], ResampledSource) and not holds_nothing:
            return (
                f"RandomMix dataset {i} is resampled and a stage between the mix and the loop "
                "holds items (a shuffle, unbatched): resampled samples are tracked by draw, "
                "and a draw's shard cannot be found again from the state to bring buffered "
                "samples back; put the buffers inside the datasets, before the mix"
            )
    return None
