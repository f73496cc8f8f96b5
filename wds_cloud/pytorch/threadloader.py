"""The thread executor: ``ThreadLoader``, a ``WebLoader`` whose workers are threads.

``ThreadLoader(dataset, num_workers=n)`` reads ``dataset`` as a ``DataLoader`` with ``n``
workers and ``batch_size=None`` would, in one process: each reader thread iterates its own
copy of the dataset (``copy.deepcopy`` at every ``iter()``, as a forked worker gets a copy),
sees itself as worker ``i`` of ``n`` (shard splitting, seeds, resume), and hands its items over
through a bounded queue of ``prefetch_factor`` items; the items come out round-robin in worker
order, as a ``DataLoader``'s do. Same dataset, same seed: same items in the same order as
``WebLoader(dataset, batch_size=None, num_workers=n)``, with no pickling and no
inter-process copies. Decoders, inflate, numpy copies and network reads release the GIL, so
the readers run in parallel where it matters; a map written in pure Python holds it
(:class:`GilWatch` tells).

Handlers that count what they skip (``wds.warn_and_continue``...) are shared by the copies
(:meth:`~wds_cloud.core.handlers._CountingHandler.__deepcopy__`), so their counts are read in
the process that trains.
"""

from __future__ import annotations

import copy
import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from wds_cloud.core import pipeline
from wds_cloud.core.collate import default_collation_fn
from wds_cloud.core.threadworkers import ThreadWorkers
from wds_cloud.errors import ConfigError
from wds_cloud.pytorch.loader import WebLoader, fast_convert
from wds_cloud.redact import redact_url

__all__ = [
    "GilWatch",
    "ThreadDataLoader",
    "ThreadLoader",
    "as_read",
    "check_threads",
    "inner_columns",
]

log = logging.getLogger(__name__)


class ThreadDataLoader:
    """Iterate an iterable dataset on ``num_workers`` threads, in ``DataLoader`` order.

    The ``DataLoader`` attributes the pipeline and resume code read are here with the same
    meaning: ``dataset``, ``num_workers``, ``prefetch_factor``, ``collate_fn`` (applied to each
    item on its reader thread; default :func:`~wds_cloud.pytorch.loader.fast_convert`, what a
    ``DataLoader`` with ``batch_size=None`` applies), ``batch_size`` (None) and
    ``persistent_workers`` (False: every ``iter()`` starts fresh readers on fresh copies).

    Args:
        dataset: an iterable dataset (a ``WebDataset``/``DataPipeline`` ...).
        num_workers: reader threads (>= 1).
        prefetch_factor: items each reader may hold ready (>= 1).
        collate_fn: applied to each item on its reader thread.

    Raises:
        ConfigError: ``num_workers`` or ``prefetch_factor`` below 1.
    """

    batch_size = None
    persistent_workers = False

    def __init__(
        self,
        dataset: Any,
        *,
        num_workers: int,
        prefetch_factor: int = 2,
        collate_fn: Callable[[Any], Any] | None = None,
    ) -> None:
        if num_workers < 1:
            raise ConfigError(f"ThreadLoader: num_workers must be >= 1, got {num_workers}")
        if prefetch_factor < 1:
            raise ConfigError(f"ThreadLoader: prefetch_factor must be >= 1, got {prefetch_factor}")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.collate_fn: Callable[[Any], Any] = collate_fn or fast_convert
        # the iteration in progress, weakly: dropping the iterator (a pipeline closed or
        # collected mid-epoch) stops its threads
        self._running: weakref.ref[ThreadWorkers] | None = None

    def __iter__(self) -> Iterator[Any]:
        self.close()  # a new iter() ends the previous one, as a DataLoader's does
        readers = [_reader_copy(self.dataset) for _ in range(self.num_workers)]
        running = ThreadWorkers(readers, depth=self.prefetch_factor, out=self.collate_fn)
        self._running = weakref.ref(running)
        return running

    def close(self) -> None:
        """Stop the reader threads of the iteration in progress and wait for them."""
        ref, self._running = self._running, None
        running = ref() if ref is not None else None
        if running is not None:
            running.close()

    def __getstate__(self) -> dict[str, Any]:
        """Copies and pickles hold no running readers."""
        return {**self.__dict__, "_running": None}


class ThreadLoader(WebLoader):
    """A :class:`~wds_cloud.pytorch.loader.WebLoader` that reads on threads
    (:class:`ThreadDataLoader`) instead of worker processes: the same fluid methods, resume,
    profiling and order; the hand-built form of ``make_loader(..., executor="threads")``::

        dataset = wds.WebDataset(urls, seed=0).shuffle(1000).decode("rgb8").to_tuple("jpg cls")
        loader = ThreadLoader(dataset.batched(64), num_workers=4)
        loader = loader.unbatched().shuffle(1000).batched(64)

    Args:
        dataset: the iterable dataset to read.
        num_workers: reader threads (>= 1); about the number of cores suits a decode-bound
            pipeline.
        prefetch_factor: items each reader may hold ready.
        collate_fn: applied to each item on its reader thread (default ``fast_convert``).

    Raises:
        ConfigError: ``num_workers`` or ``prefetch_factor`` below 1.
    """

    def __init__(
        self,
        dataset: Any,
        *,
        num_workers: int = 2,
        prefetch_factor: int = 2,
        collate_fn: Callable[[Any], Any] | None = None,
    ) -> None:
        stage = ThreadDataLoader(
            dataset,
            num_workers=num_workers,
            prefetch_factor=prefetch_factor,
            collate_fn=collate_fn,
        )
        super(WebLoader, self).__init__(stage)  # a pipeline over the thread stage
        if self.profiling:  # WDS_CLOUD_PROFILE
            self.profile()

    def profile(self, on: bool = True) -> ThreadLoader:
        """Measure where the time goes (``docs/observability.md``): the readers record in this
        process, so nothing is dumped. Modifies and returns ``self``."""
        super(WebLoader, self).profile(on)
        dataset = self.loader.dataset
        if isinstance(dataset, pipeline.DataPipeline):
            dataset.profile(on)
            if "listing_seconds" in dataset.__dict__:
                self.listing_seconds = dataset.__dict__.pop("listing_seconds")
        return self


class GilWatch:
    """Wrap a per-sample function run on the reader threads and warn once when it holds the
    GIL (pure Python).

    Over its first calls (at least ``calls`` calls and ``seconds`` of summed wall time) it
    sums the calls' wall time and the calling threads' CPU time in them, and the CPU time of
    all calls over the span from the first call to the last (the cores they used together).
    Flagged: the threads were on a CPU less than ``ratio`` of the time they spent in the
    function, and together they used between ``min_cores`` and ``max_cores`` cores, that is
    about one core's worth of CPU shared by several threads: what the GIL allows a
    pure-Python function. A function that waits on I/O uses little CPU; one in C that
    releases the GIL uses several cores at once: neither is flagged. On a machine whose
    cores are busy with other work, the threads get less CPU than they ask for and the
    measurement cannot tell the GIL from the load: it is meant for an otherwise quiet
    machine (the warning says what it measured).

    Args:
        f: the function (its name is in the warning and in notes added to its errors).
        readers: reader threads that call it (no check with fewer than 2, or on one core).
    """

    calls = 32
    seconds = 0.05
    ratio = 0.65
    min_cores = 0.5
    max_cores = 1.3

    def __init__(self, f: Callable[[Any], Any], readers: int) -> None:
        self.f = f
        functools.update_wrapper(self, f)  # stage labels in profiles name ``f``
        self.on = readers >= 2 and (os.cpu_count() or 1) >= 2
        self.readers = readers
        self.warned = False
        self.measured: tuple[float, float] | None = None  # (CPU share, cores), once measured
        self._lock = threading.Lock()
        self._n = 0
        self._wall = 0.0
        self._cpu = 0.0
        self._first = 0.0
        self._last = 0.0

    def __call__(self, sample: Any) -> Any:
        try:
            if not self.on:
                return self.f(sample)
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                return self.f(sample)
            finally:
                t1, c1 = time.perf_counter(), time.thread_time()
                self._record(t0, t1, c1 - c0)
        except Exception as exc:
            if isinstance(sample, dict):
                key, url = sample.get("__key__"), sample.get("__url__")
                exc.add_note(f"in {_name(self.f)}() of sample {key!r} of {redact_url(str(url))}")
            raise

    def _record(self, t0: float, t1: float, cpu: float) -> None:
        with self._lock:
            if not self.on:
                return
            if self._n == 0:
                self._first = t0
            self._n += 1
            self._wall += t1 - t0
            self._cpu += cpu
            self._last = max(self._last, t1)
            if self._n < self.calls or self._wall < self.seconds:
                return
            self.on = False  # measured once
            share = self._cpu / max(self._wall, 1e-9)
            cores = self._cpu / max(self._last - self._first, 1e-9)
            self.measured = (share, cores)
        if share < self.ratio and self.min_cores <= cores <= self.max_cores:
            self.warned = True
            log.warning(
                "executor='threads': %s holds the GIL: its %d reader threads were on a CPU "
                "%.0f%% of the time they spent in it, %.1f core(s) together; a pure-Python "
                "map does not run in parallel on threads: use executor='processes' for this "
                "pipeline (docs/pytorch.md, 'Threads vs processes')",
                _name(self.f),
                self.readers,
                100 * share,
                cores,
            )

    def __deepcopy__(self, memo: dict[int, Any]) -> GilWatch:
        return self  # the readers' copies of the pipeline share one measurement

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def inner_columns(samples: list[Any]) -> Any:
    """The collation of ``make_loader``'s inner batches on threads: webdataset's
    (:func:`~wds_cloud.core.collate.default_collation_fn`), except that arrays and tensors are
    not stacked; each stays the sample's own. The training thread unbatches and re-collates
    every batch anyway, so stacking in the reader would copy every image twice; the samples
    and the final batches are the same."""
    return default_collation_fn(samples, combine_tensors=False)


def as_read(item: Any) -> Any:
    """The readers' hand-over of ``make_loader``'s inner batches with the default collation:
    as they are (numpy), since the training thread's ``torch_collate`` makes the tensors of
    the final batches from them (the same tensors as from ``fast_convert``'s; rows of one
    array come back as a view of it)."""
    return item


def _reader_copy(dataset: Any) -> Any:
    """A reader's own copy of ``dataset`` (what a forked DataLoader worker gets).

    Raises:
        ConfigError: something in the dataset cannot be copied; names it.
    """
    try:
        return copy.deepcopy(dataset)
    except Exception as exc:
        raise ConfigError(
            f"executor='threads': each reader thread iterates its own copy of the dataset "
            f"(as each worker process does), and copying {type(dataset).__name__} failed: "
            f"{type(exc).__name__}: {exc}; make the object that holds it copyable "
            "(copy.deepcopy: a __deepcopy__ or __getstate__ that leaves it out) or use "
            "executor='processes'"
        ) from exc


def _name(f: Any) -> str:
    return str(getattr(f, "__qualname__", None) or repr(f))


def check_threads(num_workers: int, order: str) -> None:
    """Refuse what ``make_loader(executor="threads")`` cannot do, naming it.

    Raises:
        ConfigError: ``num_workers < 1`` or ``order="global"``.
    """
    if num_workers < 1:
        raise ConfigError(
            f"make_loader(executor='threads'): num_workers is the number of reader threads "
            f"and must be >= 1, got {num_workers}"
        )
    if order != "stream":
        raise ConfigError(
            f"make_loader(executor='threads'): order={order!r} is not supported on threads "
            "(streaming only); use executor='processes'"
        )
