"""``DataPipeline``: a source followed by stages, iterated lazily (webdataset-compatible).

A stage is any of: an object with ``run(src)``; a list (its items become the stream); a
callable taking the upstream iterator (curried stages, plain generator functions); or, as the
first stage only, an iterable (a shard list, a dataset, a DataLoader) or a callable taking no
arguments. The pytorch package subclasses this class with ``torch.utils.data.IterableDataset``;
this module never imports torch.
"""

from __future__ import annotations

import copy
import itertools
import sys
import warnings
from collections.abc import Iterator
from typing import Any, Self

from wds_cloud.core.pipeline_base import PipelineBase, invoke_stage
from wds_cloud.errors import ConfigError
from wds_cloud.observe.passes import profiled_iter
from wds_cloud.observe.profile import profile_enabled


class DataPipeline(PipelineBase):
    """A pipeline of stages, iterated lazily; each ``iter()`` runs the stages afresh.

    Args:
        *stages: the source and the stages; ``None`` is ignored, lists are flattened.

    Attributes:
        pipeline: the list of stages (introspect with :meth:`stage`).
        repetitions: passes per ``iter()`` (see :meth:`repeat`, :meth:`with_epoch`).
        nsamples: cap on items per ``iter()`` (``-1``: none).
        per_rank: whether ``nsamples`` is the total for all DataLoader workers of this rank.
        size: the value of ``len()``, set by :meth:`with_length`.
    """

    def __init__(self, *stages: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline: list[Any] = []
        self.repetitions = 1
        self.nsamples = -1
        self.per_rank = False
        self.size: int | None = None
        self.index_samples: int | None = None  # the dataset's sample count, from its index
        if profile_enabled():  # WDS_CLOUD_PROFILE
            self.profiling = True
        for stage in stages:
            if stage is None:
                continue
            if isinstance(stage, list):
                self.pipeline.extend(stage)
            else:
                self.pipeline.append(stage)

    # -- iteration -------------------------------------------------------------------------

    def iterator1(self) -> Iterator[Any]:
        """One pass through the stages."""
        if not self.pipeline:
            raise ConfigError("DataPipeline has no stages")
        source = invoke_stage(self.pipeline[0])
        for step in self.pipeline[1:]:
            source = invoke_stage(step, source)
        return source

    def iterator(self) -> Iterator[Any]:
        """``repetitions`` passes; stops early if a pass yields nothing."""
        if self.repetitions == 1:
            yield from self.iterator1()
            return
        for _ in range(self.repetitions):
            source = self.iterator1()
            for first in source:  # at most one turn: then the rest is delegated
                yield first
                yield from source
                break
            else:
                break  # an empty pass: stop instead of spinning

    def epoch_size(self) -> int:
        """Items this iterator yields per epoch (``-1``: unlimited), after the per-rank split.

        With ``with_epoch(n, per_rank=True)`` DataLoader worker ``w`` of ``W`` gets
        ``n // W + (w < n % W)``, so the loader yields exactly ``n`` per rank.
        """
        n = self.nsamples
        if n > 0 and self.per_rank:
            from wds_cloud.core.shards import dataloader_worker_info

            worker, nworkers = dataloader_worker_info()
            n = n // nworkers + (1 if worker < n % nworkers else 0)
            if n == 0:
                return 0
        return n

    def __iter__(self) -> Iterator[Any]:
        if self.profiling:
            listed = self.__dict__.pop("listing_seconds", None)  # WebDataset's, once
            return profiled_iter(self._iterate(), self.profile_dump, listed, self.batches_out())
        return self._iterate()

    def _iterate(self) -> Iterator[Any]:
        if self.resumable:
            from wds_cloud.resume import loop

            if self.__dict__.get("_resume_emit"):
                return loop.emit(self)  # inside a DataLoader under a resumable WebLoader
            tracked = loop.iterate(self)  # None when this pipeline is not tracked
            if tracked is not None:
                return tracked
        n = self.epoch_size()
        if n == 0 and self.nsamples > 0:
            return iter(())
        if n > 0:
            return itertools.islice(self.iterator(), n)
        return self.iterator()

    # -- profiling ---------------------------------------------------------------------------

    #: Measure where the time goes (``docs/observability.md``); see :meth:`profile`.
    profiling = False
    #: Where DataLoader workers write their totals (set by ``WebLoader.profile()``).
    profile_dump: str | None = None

    def batches_out(self) -> bool:
        """Whether this pipeline's items are batches (its last stage is ``batched``): the
        profiler times each ``next()`` of such a pipeline (``docs/observability.md``)."""
        last = getattr(self.pipeline[-1], "f", None) if self.pipeline else None
        return getattr(last, "__name__", "") == "_batched"

    def profile(self, on: bool = True) -> Self:
        """Measure per-stage times while this pipeline runs (modifies and returns ``self``);
        read them with :meth:`profile_report` and :meth:`export_trace`. Also switched on by
        ``WDS_CLOUD_PROFILE=1``."""
        self.profiling = on
        for stage in self.pipeline:
            if isinstance(stage, DataPipeline) and not isinstance(stage, type):
                stage.profile(on)
        return self

    def profile_report(self, gather: bool = True) -> Any:
        """What was measured so far in this process and its DataLoader workers: a
        :class:`~wds_cloud.observe.report.ProfileReport` (``.table()``, ``.verdict()``).
        Under ``torch.distributed`` every rank's (``gather``; a collective: every rank must
        call it at the same step)."""
        from wds_cloud.observe.report import collect

        return collect(gather=gather)

    def export_trace(self, path: str, gather: bool = True) -> None:
        """Write what was measured as Chrome/Perfetto trace-event JSON to ``path`` (open it in
        ``ui.perfetto.dev`` or ``chrome://tracing``). Under ``torch.distributed`` every
        rank's, written by rank 0 (``gather``; a collective, as :meth:`profile_report`)."""
        from wds_cloud.observe.trace import write_trace

        write_trace(path, gather=gather)

    # -- resuming --------------------------------------------------------------------------

    #: Track sample positions so that :meth:`state_dict` can be taken (``docs/resume.md``).
    resumable = True

    def state_dict(self) -> dict[str, Any]:
        """The position in the current epoch: JSON-serialisable, a few kilobytes.

        Under ``torch.distributed`` every rank must call it at the same step (the states are
        gathered, so each rank returns the same global state); inside a DataLoader worker (as
        torchdata's ``StatefulDataLoader`` calls it) it is the state of this worker's reader.

        Raises:
            ConfigError: this pipeline cannot be resumed (the message says why).
        """
        from wds_cloud.resume import loop

        return loop.state_dict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` deliver the rest of the epoch ``state`` was taken in:
        every sample not delivered before, exactly once, then later epochs as usual.

        Raises:
            ConfigError: not a state of this pipeline, or it cannot be resumed.
        """
        from wds_cloud.resume import loop

        loop.load_state_dict(self, state)

    # -- composition -----------------------------------------------------------------------

    def stage(self, i: int) -> Any:
        """Return stage ``i``."""
        return self.pipeline[i]

    def append(self, f: Any) -> None:
        """Append a stage in place."""
        self.pipeline.append(f)

    def compose(self, *stages: Any) -> Self:
        """Return a shallow copy with ``stages`` appended (the original is unchanged)."""
        result = copy.copy(self)
        result.pipeline = list(self.pipeline)
        for stage in stages:
            result.append(stage)
        return result

    # -- epochs and length -----------------------------------------------------------------

    def with_epoch(self, nsamples: int = -1, nbatches: int = -1, *, per_rank: bool = False) -> Self:
        """Make every ``iter()`` yield exactly ``max(nsamples, nbatches)`` items, restarting the
        pipeline when it runs dry (modifies and returns ``self``).

        By default (as webdataset) the count is per iterator, so inside a DataLoader with ``W``
        workers a rank yields ``W * n``. With ``per_rank=True`` ``n`` is divided among the
        workers so the loader yields exactly ``n`` per rank; without ``n``, a dataset read from
        an index JSON uses its exact sample count divided by the number of ranks (rounded
        down, the same on every rank).
        """
        if per_rank and nsamples < 0 and nbatches < 0 and self.index_samples is not None:
            from wds_cloud.core.shards import node_info

            nsamples = self.index_samples // node_info()[1]
        self.repetitions = sys.maxsize
        self.nsamples = max(nsamples, nbatches)
        self.per_rank = per_rank
        return self

    def repeat(self, nepochs: int = -1, nbatches: int = -1) -> Self:
        """Repeat ``nepochs`` passes (forever if ``<= 0``), capped at ``nbatches`` items."""
        self.repetitions = nepochs if nepochs > 0 else sys.maxsize
        self.nsamples = nbatches
        return self

    def with_length(self, n: int, silent: bool = False) -> Self:
        """Make ``len()`` return ``n`` (modifies and returns ``self``; pickles under spawn).

        This does not change how many samples an epoch yields; combine with ``with_epoch``.
        As webdataset, it warns saying so unless ``silent=True``.
        """
        if not silent:
            warnings.warn(
                ".with_length() only sets the value of __len__ for compatibility with some "
                "training environments; it does not change the number of samples in an epoch "
                "(use .with_epoch(n) for that; silent=True hides this warning)",
                stacklevel=2,
            )
        self.size = int(n)
        return self

    def __len__(self) -> int:
        if self.size is None:
            raise TypeError(
                f"{type(self).__name__} has no length; use .with_length(n) (and .with_epoch(n))"
            )
        return self.size

    def __bool__(self) -> bool:
        return True

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch on every stage that has ``set_epoch`` (shard shuffles, resamplers)."""
        for stage in self.pipeline:
            if isinstance(stage, type):
                continue
            if hasattr(stage, "set_epoch"):
                stage.set_epoch(epoch)
            elif hasattr(getattr(stage, "dataset", None), "set_epoch"):
                stage.dataset.set_epoch(epoch)  # a DataLoader as the source (WebLoader)

    # -- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Call ``close()`` on every stage that has one."""
        for stage in self.pipeline:
            if hasattr(stage, "close") and not isinstance(stage, type):
                stage.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        inner = ",\n  ".join(repr(s) for s in self.pipeline)
        return f"{type(self).__name__}(\n  {inner}\n)"
