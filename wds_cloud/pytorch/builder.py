"""``make_loader``: the GPU-training loader in one call, and ``DevicePrefetcher``.

``make_loader`` builds the pattern webdataset recommends for training::

    dataset = WebDataset(urls, ...).shuffle(...).decode(...).to_tuple(...).batched(inner)
    loader = WebLoader(dataset, batch_size=None, num_workers=...)
    loader = loader.unbatched().shuffle(shuffle_buffer).batched(batch_size)

Workers batch inside the worker (cheap IPC: one pickled batch instead of many samples), the
main process unbatches, shuffles across workers and re-batches with torch collation. With
``epoch_size`` every ``iter()`` yields exactly ``epoch_size`` samples per rank, restarting the
worker stream when it runs dry: the window (``with_epoch``) is set on the main-process sample
stream, under only the final ``batched`` (and ``map``), so the loader's ``state_dict()`` /
``load_state_dict()`` resume it exactly (``docs/resume.md``).

``DevicePrefetcher`` copies the next batch to the GPU on a side CUDA stream while the current
one trains; on CPU it passes batches through unchanged.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import torch

from wds_cloud.core.collate import torch_collate
from wds_cloud.core.mixplan import DataPlan
from wds_cloud.errors import ConfigError
from wds_cloud.observe.passes import profiled_iter
from wds_cloud.observe.profile import current as current_recorder, profile_enabled
from wds_cloud.pytorch.datasets import DataPipeline, WebDataset
from wds_cloud.pytorch.loader import WebLoader
from wds_cloud.resume.loop import gather_states, local_state
from wds_cloud.resume.plan import tracking_on

__all__ = ["DevicePrefetcher", "make_loader", "move_to_device"]

log = logging.getLogger(__name__)


def move_to_device(batch: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """Move every tensor in ``batch`` (tensors, tuples, lists, dicts, nested) to ``device``.

    Anything that is not a tensor is returned as it is.
    """
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(move_to_device(x, device, non_blocking) for x in batch))
    if isinstance(batch, tuple | list):
        return type(batch)(move_to_device(x, device, non_blocking) for x in batch)
    if isinstance(batch, Mapping):
        return {k: move_to_device(v, device, non_blocking) for k, v in batch.items()}
    return batch


def pin_batch(batch: Any) -> Any:
    """Return ``batch`` with every CPU tensor in page-locked (pinned) memory."""
    if isinstance(batch, torch.Tensor):
        return batch.pin_memory() if batch.device.type == "cpu" else batch
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(pin_batch(x) for x in batch))
    if isinstance(batch, tuple | list):
        return type(batch)(pin_batch(x) for x in batch)
    if isinstance(batch, Mapping):
        return {k: pin_batch(v) for k, v in batch.items()}
    return batch


def _record_stream(batch: Any, stream: Any) -> None:
    """Tell the CUDA caching allocator that ``batch``'s tensors are used on ``stream``."""
    if isinstance(batch, torch.Tensor):
        if batch.is_cuda:
            batch.record_stream(stream)
    elif isinstance(batch, tuple | list):
        for x in batch:
            _record_stream(x, stream)
    elif isinstance(batch, Mapping):
        for x in batch.values():
            _record_stream(x, stream)


class DevicePrefetcher:
    """Iterate ``loader`` with each batch already on ``device``.

    On CUDA the copy of batch ``i + 1`` is issued on a side stream (``non_blocking``) before
    batch ``i`` is handed to the training step, so host-to-device transfer overlaps compute.
    The compute stream waits for the copy before the batch is used, and the tensors are
    recorded on the compute stream so the allocator does not reuse their memory early. Copies
    are only truly asynchronous from pinned memory: pass ``pin_memory=True`` (or pin in the
    loader).

    On a CPU device (or when CUDA is not available and ``device`` is None) batches are passed
    through unchanged.

    Args:
        loader: any iterable of batches (tensors, tuples, lists, dicts of tensors).
        device: target device (default: ``cuda`` when available, else ``cpu``).
        stream: the CUDA stream for the copies (default: a new one per ``iter()``).
        pin_memory: pin each batch before copying (CUDA only).

    Raises:
        ConfigError: a CUDA device was asked for and CUDA is not available.
    """

    def __init__(
        self,
        loader: Iterable[Any],
        device: str | torch.device | None = None,
        stream: Any = None,
        *,
        pin_memory: bool = False,
    ) -> None:
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"DevicePrefetcher: device {device!r} but CUDA is not available")
        self.loader = loader
        self.stream = stream
        self.pin_memory = pin_memory and self.device.type == "cuda"
        self._ahead: ReadAhead | None = None

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def set_epoch(self, epoch: int) -> None:
        """Forward ``set_epoch`` to the loader when it has one."""
        if hasattr(self.loader, "set_epoch"):
            self.loader.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """The loader's resume state (``docs/resume.md``) as of the last batch handed out.

        On CUDA batch ``i + 1`` is already taken from the loader when batch ``i`` is handed
        out; the loader's state is therefore taken before each read-ahead (this rank's part,
        about 0.07 ms a batch while the loader tracks its samples; gathered across ranks here,
        under ``torch.distributed``) and this returns the one of batch ``i``, so a checkpoint
        skips nothing. Every rank must call it at the same step, as the loader's own.

        Raises:
            ConfigError: the loader cannot be resumed (names why).
        """
        ahead = self._ahead
        if ahead is not None and ahead.holding:
            return ahead.state()
        state: dict[str, Any] = self.loader.state_dict()  # type: ignore[attr-defined]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` deliver what ``state`` did not (forwarded to the loader)."""
        self.loader.load_state_dict(state)  # type: ignore[attr-defined]
        self._ahead = None

    def profile_report(self, gather: bool = True) -> Any:
        """The loader's :meth:`~wds_cloud.core.pipeline.DataPipeline.profile_report`."""
        return self.loader.profile_report(gather)  # type: ignore[attr-defined]

    def export_trace(self, path: str, gather: bool = True) -> None:
        """The loader's :meth:`~wds_cloud.core.pipeline.DataPipeline.export_trace`."""
        self.loader.export_trace(path, gather)  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[Any]:
        batches = self._batches()
        if getattr(self.loader, "profiling", False):  # the copies are timed with the loader
            return profiled_iter(batches, None, timed=True)
        return batches

    def _batches(self) -> Iterator[Any]:
        if self.device.type != "cuda":
            if self.device.type == "cpu":
                yield from self.loader
            else:
                for batch in self.loader:
                    yield move_to_device(batch, self.device)
            return
        yield from self._iter_cuda()

    def _iter_cuda(self) -> Iterator[Any]:
        stream = self.stream if self.stream is not None else torch.cuda.Stream(self.device)

        def copy(batch: Any) -> tuple[Any, Any]:
            if self.pin_memory:
                batch = pin_batch(batch)
            with torch.cuda.stream(stream):
                moved = move_to_device(batch, self.device, non_blocking=True)
                done = torch.cuda.Event()
                done.record(stream)
            return moved, done

        self._ahead = ahead = ReadAhead(self.loader, copy)
        for current, done in ahead:
            # wait for this batch's copy only: the next one, already queued, keeps overlapping
            compute = torch.cuda.current_stream(self.device)
            compute.wait_event(done)
            _record_stream(current, compute)
            yield current


class ReadAhead:
    """Iterate ``loader`` one batch ahead, passing each batch through ``prepare`` (the CUDA
    copy of :class:`DevicePrefetcher`) as soon as it is read, and keep the loader's state as of
    the batch last handed out (:meth:`state`).

    The state is taken with ``loader.state_dict()`` after each batch is read and before the
    next one is, when the loader has one and tracks its samples (``resumable`` and
    ``$WDS_CLOUD_RESUMABLE``); an error taking it (a loader that cannot be resumed) is raised
    by :meth:`state`, not by the iteration.
    """

    def __init__(self, loader: Iterable[Any], prepare: Callable[[Any], Any]) -> None:
        self.loader = loader
        self.prepare = prepare
        self.holding = False  # whether the state to give is the held one
        self.ahead = 0  # batches read and prepared ahead, not handed out yet (0 or 1)
        self._held: dict[str, Any] | None = None
        self._gather = False
        self._error: Exception | None = None

    def _take(self) -> None:
        try:
            if isinstance(self.loader, DataPipeline):
                # this rank's part only: under torch.distributed the ranks meet in state(), once
                # per checkpoint, not after every batch (the ledgers build each state afresh, so
                # the one held is not changed by later batches)
                self._held, self._gather = local_state(self.loader)
            else:
                self._held = self.loader.state_dict()  # type: ignore[attr-defined]
            self._error = None
        except ConfigError as exc:
            self._held, self._error = None, exc

    def state(self) -> dict[str, Any]:
        """The loader's state after the batch last handed out (gathered across ranks under
        ``torch.distributed``, as ``state_dict()`` is: every rank must call it)."""
        if self._error is not None:
            raise self._error
        if self._held is None:
            raise ConfigError(
                f"{type(self.loader).__name__} keeps no resume state (no state_dict(), or "
                "tracking switched off with resumable=False / WDS_CLOUD_RESUMABLE=0)"
            )
        return gather_states(self._held) if self._gather else self._held

    def __iter__(self) -> Iterator[Any]:
        track = hasattr(self.loader, "state_dict") and tracking_on(self.loader)
        source = iter(self.loader)
        rec = current_recorder()  # profiling: the read-ahead is a counter of the trace
        if rec is not None:
            rec.gauge("device prefetch", self, lambda ahead: ahead.ahead)
        upcoming = next(source, _END)
        self.holding = True
        if upcoming is not _END:
            upcoming = self.prepare(upcoming)
        while upcoming is not _END:
            current = upcoming
            if track:
                self._take()  # the loader has handed out ``current`` and nothing after it
            upcoming = next(source, _END)
            if upcoming is not _END:
                upcoming = self.prepare(upcoming)
            self.ahead = int(upcoming is not _END)
            yield current
        self.ahead = 0
        # kept when the loop is left early (the loader has read one batch more than delivered)
        self.holding = False  # ran to the end: the loader's own state is current


_END = object()


def _on_device(
    loader: Any, device: str | torch.device | None, prefetch_to_device: bool, pin_memory: bool
) -> Any:
    """``loader`` through a :class:`DevicePrefetcher` when ``device`` is not the CPU (or
    ``prefetch_to_device``)."""
    if device is not None and (prefetch_to_device or torch.device(device).type != "cpu"):
        return DevicePrefetcher(loader, torch.device(device), pin_memory=pin_memory)
    return loader


def _autotuned(args: dict[str, Any]) -> Any:
    """``make_loader(**args)`` with the setting ``autotune`` found (``wds_cloud.tools.tune``)."""
    from wds_cloud.tools.tune.hook import autotuned_loader

    return autotuned_loader(make_loader, args)


def make_loader(
    urls: str | Iterable[str] | DataPlan,
    *,
    batch_size: int,
    num_workers: int | None = None,
    shuffle_buffer: int = 1000,
    decode: Any = None,
    to_tuple: str | tuple[str, ...] | None = None,
    map: Callable[[Any], Any] | None = None,
    epoch_size: int | None = None,
    shardshuffle: bool = True,
    seed: int | None = None,
    resampled: bool = False,
    pin_memory: bool = False,
    persistent_workers: bool = False,
    prefetch_factor: int | None = None,
    inner_batch: int | None = None,
    collate: Callable[[list[Any]], Any] | None = None,
    device: str | torch.device | None = None,
    prefetch_to_device: bool = False,
    raw_map: Callable[[Any], Any] | None = None,
    order: str = "stream",
    profile: bool | None = None,
    executor: str = "processes",
    shm_batches: bool | None = None,
    autotune: bool | float | Mapping[str, Any] = False,
    **webdataset_kw: Any,
) -> Any:
    """Build a training loader over WebDataset shards (any backend).

    Args:
        urls: shard URLs, a brace pattern, a glob or a prefix (see ``WebDataset``), or
            ``wds.join(...)`` (joined column sets, ``docs/mixing.md``), or a data plan
            (``wds.mix(...)``, ``DataPlan.from_yaml``): its sources mixed and batched as it
            says, resumed elastically (``docs/mixing.md``; like ``order="global"``, the plan
            sets the order: ``shuffle_buffer``/``shardshuffle``/``seed`` do not apply,
            ``webdataset_kw`` goes to each source's ``IndexedWebDataset``).
        batch_size: samples per batch delivered to the training loop.
        num_workers: DataLoader worker processes (0: read in the main process; default 4).
        shuffle_buffer: sample shuffle buffer, used both inside each worker and across workers
            in the main process (0 disables both).
        decode: a decode spec or handler for ``.decode()`` (e.g. ``"rgb8"``, ``"torchrgb"``);
            a tuple/list is passed as several specs.
        to_tuple: fields for ``.to_tuple()``, e.g. ``"jpg;png cls"`` or ``("jpg", "cls")``.
        map: a function applied to each sample after decode/to_tuple (inside the workers).
        epoch_size: samples per ``iter()`` **per rank**, exact (the stream restarts when it
            runs dry); None: one pass over this rank's shards. Resumable mid-window: the state
            records the pass in progress and the samples delivered in this ``iter()``, and the
            resumed ``iter()`` ends at the same count in the same batch sizes.
        shardshuffle: shuffle the shard order every epoch (seeded, same on every rank).
        seed: shard-shuffle seed (None: ``$WDS_SEED`` or 0).
        resampled: draw shards with replacement forever (combine with ``epoch_size``).
        pin_memory: pin the final batches (CUDA only; they are re-collated in the main
            process, so pinning in the workers would be wasted).
        persistent_workers, prefetch_factor: passed to ``DataLoader`` (when ``num_workers>0``;
            ``prefetch_factor`` default 2).
        inner_batch: batch size inside the workers (default ``batch_size``).
        collate: collation function for the final batches (default: torch tensors).
        device: move batches to this device (``"cuda"``, ``"cuda:1"``, ``"cpu"``).
        prefetch_to_device: copy the next batch to ``device`` on a side CUDA stream while the
            current one trains (``DevicePrefetcher``); needs ``device``.
        raw_map: a function applied to each raw sample (``bytes`` fields, before the shuffle
            buffer and decode) inside the workers.
        order: ``"stream"`` (default): read the shards in sequence through shuffle buffers;
            ``"global"``: every epoch a seeded permutation of all samples of an indexed dataset
            (``urls``: a dataset JSON or shards with ``.idx``), read a batch at a time and
            split evenly over ranks, with ``uneven="drop"`` (default) or ``"pad"`` in
            ``webdataset_kw``, and ``batches_in_flight=k`` (default 1) batches read at once by
            each worker (for backends with a high cost per batch request, such as AIStore's
            GetBatch: ``k=4`` there); the state is a cursor and resume is elastic
            (docs/indexes.md, "Global shuffle"). ``shuffle_buffer``, ``shardshuffle`` do not apply;
            ``epoch_size``, ``resampled`` and ``inner_batch`` are refused.
        profile: measure where the time goes, in the main process and the workers; read it
            with ``loader.profile_report()`` / ``loader.export_trace(path)``
            (``docs/observability.md``). None: ``WDS_CLOUD_PROFILE`` (default off).
        executor: ``"processes"`` (default): ``num_workers`` DataLoader worker processes;
            ``"threads"``: ``num_workers`` reader threads in this process
            (:class:`~wds_cloud.pytorch.threadloader.ThreadLoader`), the same samples in the
            same order, no pickling or inter-process copies; ``map``/``raw_map`` holding the
            GIL are reported (docs/pytorch.md, "Threads vs processes"). Streaming only.
            ``"subprocess-threads"``: the ``"threads"`` loader run in one child process, each
            batch handed over through a shared-memory arena
            (:mod:`wds_cloud.pytorch.subprocloader`), for training loops whose own Python
            threads would compete with the loader's for the GIL.
        shm_batches: send the workers' batches through the shared-memory arena (None:
            ``WDS_CLOUD_SHM_BATCHES``, default on; see ``WebLoader``). Streaming only.
        autotune: first search ``num_workers``, ``prefetch_factor``, ``inner_batch``,
            ``shm_batches`` and, for remote shards, read-ahead (``registry=``) and
            ``prefetch=`` by short measured trials, then build the loader with the fastest
            setting (``docs/observability.md``, "Autotune"): True (60 s), the seconds to
            spend, or a dict of ``seconds``, ``memory_budget`` (``"8GB"``; default: half the
            memory available), ``trial_seconds``, ``cores``. The arguments you give win over
            tuned ones. Streaming only.
        **webdataset_kw: passed to ``WebDataset`` (``handler``, ``cache_dir``, ``nodesplitter``,
            backend open options such as ``etl=``...), or with ``order="global"`` to
            ``IndexedWebDataset`` (``registry``, ``cache_dir``, read options).

    Returns:
        An iterable of batches with ``set_epoch(n)`` and ``state_dict()``/``load_state_dict()``
        (mid-epoch resume, ``docs/resume.md``; not with ``device=``, whose
        ``DevicePrefetcher`` reads a batch ahead); ``len()`` works when ``epoch_size`` is set
        (``ceil(epoch_size / batch_size)``).

    Raises:
        ConfigError: bad sizes, or ``prefetch_to_device`` without ``device``.
    """
    if autotune:
        return _autotuned(dict(locals()))  # first: the locals are the arguments only
    num_workers = 4 if num_workers is None else num_workers
    prefetch_factor = 2 if prefetch_factor is None else prefetch_factor
    if batch_size < 1:
        raise ConfigError(f"make_loader: batch_size must be >= 1, got {batch_size}")
    if inner_batch is not None and inner_batch < 1:
        raise ConfigError(f"make_loader: inner_batch must be >= 1, got {inner_batch}")
    if epoch_size is not None and epoch_size < 1:
        raise ConfigError(f"make_loader: epoch_size must be >= 1, got {epoch_size}")
    if num_workers < 0:
        raise ConfigError(f"make_loader: num_workers must be >= 0, got {num_workers}")
    if prefetch_to_device and device is None:
        raise ConfigError("make_loader: prefetch_to_device=True needs device=")
    if executor == "subprocess-threads":  # the threads executor, run in one child process
        args = dict(locals())  # make_loader's arguments, by name
        from wds_cloud.pytorch.subprocloader import subprocess_threads

        child = subprocess_threads(make_loader, args, pin_batch)
        return _on_device(child, device, prefetch_to_device, pin_memory)
    if executor not in ("processes", "threads"):
        raise ConfigError(
            "make_loader: executor must be 'processes', 'threads' or 'subprocess-threads', "
            f"got {executor!r}"
        )
    threads = executor == "threads"
    if threads:
        from wds_cloud.core.batchdecode import batch_decode, can_batch_decode, decode_columns
        from wds_cloud.pytorch.threadloader import (
            GilWatch,
            ThreadLoader,
            as_read,
            check_threads,
            inner_columns,
        )

        check_threads(num_workers, order)
        map = GilWatch(map, num_workers) if map is not None else None
        raw_map = GilWatch(raw_map, num_workers) if raw_map is not None else None
    planned: dict[str, Any] = {  # what the loaders that plan their batches take
        "batch_size": batch_size,
        "num_workers": num_workers,
        "decode": decode,
        "to_tuple": to_tuple,
        "map": map,
        "raw_map": raw_map,
        "collate": collate,
        "prefetch_factor": prefetch_factor,
        "persistent_workers": persistent_workers,
        "pin": pin_batch if pin_memory and device is None and torch.cuda.is_available() else None,
    }
    if isinstance(urls, DataPlan):
        if epoch_size is not None or resampled or inner_batch or order != "stream" or threads:
            raise ConfigError(
                "make_loader(plan): epoch_size, resampled, inner_batch, order and "
                "executor='threads' do not apply; the plan sets each epoch (docs/mixing.md)"
            )
        from wds_cloud.pytorch.mixloader import mix_loader

        mixed = mix_loader(urls, **planned, **webdataset_kw)
        if profile_enabled(profile):
            mixed.profile()
        return _on_device(mixed, device, prefetch_to_device, pin_memory)
    if order == "global":
        if epoch_size is not None or resampled or inner_batch is not None:
            raise ConfigError(
                "make_loader(order='global'): epoch_size, resampled and inner_batch apply to "
                "streaming only; an epoch is one permutation of the dataset"
            )
        from wds_cloud.pytorch.globalloader import global_loader

        loader = global_loader(urls, seed=seed, **planned, **webdataset_kw)
        if profile_enabled(profile):
            loader.profile()
        return _on_device(loader, device, prefetch_to_device, pin_memory)
    if order != "stream":
        raise ConfigError(f"make_loader: order must be 'stream' or 'global', got {order!r}")
    stray = sorted({"uneven", "batches_in_flight"} & set(webdataset_kw))
    if stray:
        raise ConfigError(f"make_loader: {', '.join(stray)} apply to order='global' only")
    dataset = WebDataset(
        urls, shardshuffle=shardshuffle, seed=seed, resampled=resampled, **webdataset_kw
    )
    if raw_map is not None:
        dataset = dataset.map(raw_map)
    if shuffle_buffer > 0:
        dataset = dataset.shuffle(shuffle_buffer)
    # threads: JPEGs decoded into the readers' batches, straight into one array per column,
    # where the final batches are the readers' (no main-process shuffle: its buffer would
    # keep every batch alive that one of its rows is in)
    into_batches = threads and can_batch_decode(decode, map, shuffle_buffer)
    if into_batches:
        dataset = dataset.compose(batch_decode(decode))
    elif decode is not None:
        dataset = (
            dataset.decode(*decode) if isinstance(decode, tuple | list) else dataset.decode(decode)
        )
    if to_tuple is not None:
        dataset = (
            dataset.to_tuple(*to_tuple)
            if isinstance(to_tuple, tuple | list)
            else dataset.to_tuple(to_tuple)
        )
    if map is not None:
        dataset = dataset.map(map)
    # threads: arrays stay per sample in the readers' batches (one copy, the final collation)
    inner: dict[str, Any] = {"collation_fn": inner_columns} if threads else {}
    if into_batches:
        inner["collation_fn"] = decode_columns(inner_columns)
    dataset = dataset.batched(inner_batch or batch_size, partial=True, **inner)

    loader_kw: dict[str, Any] = {"batch_size": None, "num_workers": num_workers}
    if num_workers > 0:
        loader_kw["persistent_workers"] = persistent_workers
        loader_kw["prefetch_factor"] = prefetch_factor
    if threads:
        reader: Any = ThreadLoader(
            dataset,
            num_workers=num_workers,
            prefetch_factor=prefetch_factor,
            collate_fn=as_read if collate is None else None,
        )
    else:
        reader = WebLoader(dataset, shm_batches=shm_batches, **loader_kw)
    samples: Any = reader.unbatched()
    if shuffle_buffer > 0:
        samples = samples.shuffle(shuffle_buffer)
    if epoch_size is not None:
        samples.with_epoch(epoch_size)
    batches = DataPipeline(samples).batched(
        batch_size, collation_fn=collate or torch_collate, partial=True
    )
    if epoch_size is not None:
        batches.with_length(math.ceil(epoch_size / batch_size), silent=True)
    if profile_enabled(profile):
        batches.profile()
    if device is not None:
        target = torch.device(device)
        if prefetch_to_device or target.type != "cpu":
            return DevicePrefetcher(batches, target, pin_memory=pin_memory)
    elif pin_memory:
        if torch.cuda.is_available():
            return batches.map(pin_batch)
        log.warning("make_loader(pin_memory=True): CUDA is not available; batches are not pinned")
    return batches
