"""Shard lists and how they are divided among nodes and DataLoader workers.

Rank and world size come from the environment variables ``RANK``/``WORLD_SIZE`` when both are
set, else from ``torch.distributed`` when it is initialised; the worker index from
``WORKER``/``NUM_WORKERS``, else ``torch.utils.data.get_worker_info()``. Torch is consulted only
if the program already imported it: this module never imports torch.

Seeds never depend on ``PYTHONHASHSEED`` or the process: integer seeds are combined with
webdataset's ``make_seed`` formula (``hash`` of an int is the int), so a deterministic
:class:`ResampledShards` draws the very shards webdataset draws for the same seed; other seeds go
through :func:`wds_cloud.core.shuffle.stable_seed` (blake2b).

webdataset's shard-list pipeline functions are here too: :func:`shardspec` (a shard list from a
string) and :data:`resampled` (a stage drawing from its source with replacement).
"""

from __future__ import annotations

import itertools
import os
import random
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from wds_cloud.core.curry import pipelinefilter
from wds_cloud.core.shuffle import buffer_shuffle, stable_seed
from wds_cloud.core.threadworkers import thread_worker_info
from wds_cloud.errors import ConfigError
from wds_cloud.listing import resolve_shards
from wds_cloud.redact import redact_url
from wds_cloud.settings import env_int


def _env_pair(a: str, b: str) -> tuple[int, int] | None:
    """``(int(a), int(b))`` from the environment when both are set (and not blank).

    Raises:
        ConfigError: a value that is not an integer, naming the variable.
    """
    first, second = env_int(a, None), env_int(b, None)
    if first is None or second is None:
        return None
    return first, second


def node_info(group: Any = None) -> tuple[int, int]:
    """Return ``(rank, world_size)`` of this process (``(0, 1)`` when not distributed)."""
    pair = _env_pair("RANK", "WORLD_SIZE")
    if pair is not None:
        return pair
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        group = group or dist.group.WORLD
        return dist.get_rank(group=group), dist.get_world_size(group=group)
    return 0, 1


def dataloader_worker_info() -> tuple[int, int]:
    """Return ``(worker, num_workers)`` of this DataLoader worker, or of this reader thread of
    the thread executor (:mod:`wds_cloud.core.threadworkers`); ``(0, 1)`` outside one."""
    scope = thread_worker_info()
    if scope is not None:
        return scope
    pair = _env_pair("WORKER", "NUM_WORKERS")
    if pair is not None:
        return pair
    data = sys.modules.get("torch.utils.data")
    if data is not None:
        info = data.get_worker_info()
        if info is not None:
            return info.id, info.num_workers
    return 0, 1


def worker_info(group: Any = None) -> tuple[int, int, int, int]:
    """Return ``(rank, world_size, worker, num_workers)`` (webdataset ``pytorch_worker_info``)."""
    rank, world = node_info(group)
    worker, nworkers = dataloader_worker_info()
    return rank, world, worker, nworkers


def worker_seed(group: Any = None) -> int:
    """Default per-reader seed: ``rank * 1000 + worker`` (as webdataset)."""
    rank, _, worker, _ = worker_info(group)
    return rank * 1000 + worker


default_worker_seed = worker_seed  # ResampledShards' argument of the same name hides it


class SimpleShardList:
    """The shard URLs, in order, as ``{"url": ...}`` dicts.

    Args:
        urls: a shard spec (a brace/``::`` pattern, a glob or prefix ending in ``/``, a
            dataset JSON, an existing local file or folder) or a list of URLs, taken as given;
            see :func:`wds_cloud.listing.resolve_shards` (``literal_paths=True``).
        seed: if given, every pass yields the list shuffled with this seed (``True``: time).
        registry: opener registry used to list globs and prefixes (default registry if None).
    """

    def __init__(
        self, urls: str | Iterable[str], seed: int | bool | None = None, registry: Any = None
    ) -> None:
        self.urls = resolve_shards(urls, registry=registry, literal_paths=True)
        self.seed = int(time.time()) if seed is True else seed

    def __len__(self) -> int:
        return len(self.urls)

    def __iter__(self) -> Iterator[dict[str, str]]:
        urls = list(self.urls)
        if self.seed is not None and self.seed is not False:
            random.Random(self.seed).shuffle(urls)
        for url in urls:
            yield {"url": url}

    def __repr__(self) -> str:
        return f"SimpleShardList({len(self.urls)} shards, first={redact_url(self.urls[0])!r})"


def draw_seed(*parts: Any) -> int:
    """webdataset's ``make_seed`` for ints (and floats), whose ``hash`` is fixed; blake2b else."""
    if all(isinstance(p, int | float) for p in parts):
        seed = 0
        for part in parts:
            seed = (seed * 31 + hash(part)) & 0x7FFFFFFF
        return seed
    return stable_seed(*(p if isinstance(p, int | str) else repr(p) for p in parts))


class ResampledShards:
    """An endless (or ``nshards`` long) stream of shards drawn with replacement.

    Each reader (rank, worker) draws its own stream. With ``deterministic=True`` the stream is a
    function of ``(worker_seed(), epoch, seed)`` only, identical across runs and independent of
    ``PYTHONHASHSEED``, and for integer seeds the same as webdataset's; otherwise the pid, time
    and ``os.urandom`` are mixed in (as webdataset). ``epoch`` advances on every pass and can be
    set with :meth:`set_epoch`.

    Args:
        urls: as for :class:`SimpleShardList`.
        nshards: shards per pass.
        seed: base seed.
        worker_seed: callable giving the per-reader seed; default :func:`worker_seed`
            (``rank * 1000 + worker``).
        deterministic: see above.
        max_urls: keep at most this many URLs.
        empty_check: raise if ``urls`` expands to nothing (else an empty list yields nothing).
        registry: opener registry used to list globs and prefixes.

    Raises:
        ConfigError: no shards (with ``empty_check``).
    """

    def __init__(
        self,
        urls: str | Iterable[str],
        nshards: int = sys.maxsize,
        seed: int = 0,
        worker_seed: Callable[[], int] | None = None,
        deterministic: bool = False,
        max_urls: int = 10**6,
        empty_check: bool = True,
        *,
        registry: Any = None,
    ) -> None:
        if not isinstance(urls, str):  # an endless iterable is fine: it is cut at max_urls
            urls = list(itertools.islice(urls, max_urls))
        if urls:
            self.urls = resolve_shards(urls, registry=registry, literal_paths=True)[:max_urls]
        else:
            self.urls = []
        if empty_check and not self.urls:
            raise ConfigError(f"no shards in {urls!r} (ResampledShards)")
        self.nshards = nshards
        self.seed = seed
        self.worker_seed: Callable[[], int] = worker_seed or default_worker_seed
        self.deterministic = deterministic
        self.epoch = -1

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass use ``epoch``."""
        self.epoch = epoch - 1

    def __iter__(self) -> Iterator[dict[str, str]]:
        self.epoch += 1
        parts: list[Any] = [self.worker_seed(), self.epoch, self.seed]
        if not self.deterministic:
            parts += [os.getpid(), time.time_ns(), int.from_bytes(os.urandom(8), "little")]
        rng = random.Random(draw_seed(*parts))
        urls = self.urls
        n = len(urls)
        if n == 0:
            return
        for _ in range(self.nshards):
            yield {"url": urls[rng.randrange(n)]}


ResampledShardList = ResampledShards


def _resampled(
    src: Iterable[Any], n: int = sys.maxsize, *, seed: int | None = None
) -> Iterator[Any]:
    items = list(src)
    if not items:
        raise ConfigError("resampled: the source yielded nothing to draw from")
    rng = random.Random(int.from_bytes(os.urandom(16), "little") if seed is None else seed)
    for _ in range(n):
        yield rng.choice(items)


resampled = pipelinefilter(_resampled)
"""Stage: ``resampled(n=sys.maxsize, *, seed=None)`` reads its whole source (a shard list), then
yields ``n`` items drawn from it with replacement, from a fresh random seed on every pass unless
``seed`` is given (as webdataset's ``resampled``)."""


def shardspec(spec: str) -> Any:
    """A shard list from a string: :class:`~wds_cloud.core.multishard.MultiShardSample` for a
    ``.yaml`` file, else :class:`SimpleShardList` (brace patterns, ``::``, globs, prefixes)."""
    if spec.endswith((".yaml", ".yml")):
        from wds_cloud.core.multishard import MultiShardSample

        return MultiShardSample(spec)
    return SimpleShardList(spec)


class ShardShuffle:
    """Seeded shard shuffle that changes every epoch and is the same on every rank.

    Put it *before* node/worker splitting (``WebDataset`` does): every rank computes the same
    permutation for the same ``(seed, epoch)``, so the union of what the ranks read is exactly
    the shard list, in a new order each epoch. ``epoch`` advances on every pass; ``set_epoch(n)``
    makes the next pass use ``n``. With non-persistent DataLoader workers the dataset is copied
    into the workers at each ``iter(loader)``, so call ``dataset.set_epoch(n)`` in the main
    process before that.

    Args:
        seed: base seed; must be the same on every rank.
        epoch: epoch of the first pass.
        bufsize: ``None`` for a full permutation of the (finite) list; an int for a buffer
            shuffle that also works on endless sources.
    """

    def __init__(self, seed: int = 0, epoch: int = 0, bufsize: int | None = None) -> None:
        self.seed = seed
        self.epoch = epoch
        self.bufsize = bufsize

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass use ``epoch``."""
        self.epoch = epoch

    def run(self, src: Iterable[Any]) -> Iterator[Any]:
        """Shuffle ``src`` for the current epoch, then advance the epoch."""
        rng = random.Random(stable_seed("shards", self.seed, self.epoch))
        self.epoch += 1
        if self.bufsize is not None:
            return buffer_shuffle(src, self.bufsize, self.bufsize, rng)
        items = list(src)
        rng.shuffle(items)
        return iter(items)

    def __repr__(self) -> str:
        return f"shuffle_shards(seed={self.seed}, epoch={self.epoch}, bufsize={self.bufsize})"


def shuffle_shards(seed: int = 0, epoch: int = 0, bufsize: int | None = None) -> ShardShuffle:
    """Stage factory for :class:`ShardShuffle`."""
    return ShardShuffle(seed=seed, epoch=epoch, bufsize=bufsize)


def _head(src: Iterable[Any], n: int) -> tuple[list[Any], Iterator[Any]]:
    it = iter(src)
    return list(itertools.islice(it, n)), it


def _too_few(nshards: int, world: int) -> ConfigError:
    return ConfigError(
        f"{nshards} shard(s) for world size {world}: every rank needs at least one shard (a rank "
        "without data would hang the others' collectives). Use more shards (or fewer ranks), "
        "resampled=True, or WebDataset(..., split_samples=True) to split at sample level"
    )


def split_by_node(src: Iterable[Any], group: Any = None) -> Iterator[Any]:
    """Keep every ``world``-th shard starting at this rank.

    Raises:
        ConfigError: fewer shards than ranks (a rank would have no data), naming the numbers.
    """
    rank, world = node_info(group)
    if world <= 1:
        return iter(src)
    head, rest = _head(src, world)
    if len(head) < world:
        raise _too_few(len(head), world)
    return itertools.islice(itertools.chain(head, rest), rank, None, world)


def split_by_worker(src: Iterable[Any]) -> Iterator[Any]:
    """Keep every ``num_workers``-th shard starting at this DataLoader worker.

    With fewer shards than workers the surplus workers yield nothing, as in webdataset; worker 0
    warns once, naming the numbers.
    """
    worker, nworkers = dataloader_worker_info()
    if nworkers <= 1:
        return iter(src)
    head, rest = _head(src, nworkers)
    if len(head) < nworkers and worker == 0:
        rank, world = node_info()
        where = f" on rank {rank} of {world}" if world > 1 else ""
        warnings.warn(
            f"{len(head)} shard(s) for {nworkers} DataLoader workers{where}: workers "
            f"{len(head)}..{nworkers - 1} yield nothing; use at most {len(head)} workers or "
            "more shards",
            stacklevel=2,
        )
    return itertools.islice(itertools.chain(head, rest), worker, None, nworkers)


def single_node_only(src: Iterable[Any], group: Any = None) -> Iterator[Any]:
    """Pass shards through; refuse to run with more than one rank.

    Raises:
        ConfigError: world size > 1 (use ``nodesplitter=split_by_node``).
    """
    rank, world = node_info(group)
    if world > 1:
        raise ConfigError(
            f"world size is {world} (rank {rank}) but the pipeline has no node splitter: pass "
            "nodesplitter=wds.split_by_node (or split_samples=True, or resampled=True)"
        )
    return iter(src)


def _split_by_sample(src: Iterable[Any], group: Any = None) -> Iterator[Any]:
    rank, world, worker, nworkers = worker_info(group)
    nslots = world * nworkers
    if nslots == 1:
        yield from src
        return
    slot = rank * nworkers + worker
    for i, sample in enumerate(src):
        if i % nslots == slot:
            yield sample


def split_by_sample(src: Iterable[Any], group: Any = None) -> Iterator[Any]:
    """Keep samples ``i`` with ``i % (world * num_workers) == rank * num_workers + worker``.

    Every reader must see the same sample stream (all shards, same order), so use it after the
    samples stage and without node/worker shard splitting.
    """
    return _split_by_sample(src, group)


class SplitReaders:
    """A picklable node splitter: keep every ``world_size``-th shard from ``rank``."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank = rank
        self.world_size = world_size

    def __call__(self, src: Iterable[Any]) -> Iterator[Any]:
        return itertools.islice(src, self.rank, None, self.world_size)

    def __repr__(self) -> str:
        return f"SplitReaders(rank={self.rank}, world_size={self.world_size})"
