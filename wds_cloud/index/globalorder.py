"""A global shuffle without buffers: every epoch a seeded permutation of all samples of an
indexed dataset, split over ranks, read a batch at a time, resumed exactly from a cursor.

The epoch's order is :class:`~wds_cloud.index.permutation.Permutation` of ``(seed, epoch)``:
position ``p`` of the epoch is sample ``perm[p]``. Ranks read the positions in **global
steps**: step ``t`` covers the next ``batch_size * world`` positions, rank ``r`` the ``r``-th
run of ``batch_size`` of them. After every rank has delivered ``s`` batches the positions
consumed are exactly ``[0, cursor)``, so the state is that cursor (plus seed, epoch and world
size, about 100 bytes) and another number of ranks (or of DataLoader workers, which only fetch)
continues the same permutation from it: every sample of the epoch exactly once.

Every rank delivers the same number of batches of the same sizes (ranks stay in step under
DDP). When the samples left do not divide by the world size, ``uneven`` decides: ``"drop"``
leaves the last ``(n - cursor) % world`` positions of the epoch out (each epoch a different,
random few), ``"pad"`` adds positions that repeat the epoch's first samples, as
``DistributedSampler`` does.

- :class:`GlobalBatchSampler`: the index lists, for ``DataLoader(ds, batch_sampler=...)``.
- :class:`GlobalOrder`: the samples, a batch at a time (:func:`iter_fetched`: ``get_batch``
  and ``iter_batches``' read-ahead where the dataset has them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from wds_cloud.core.shards import node_info
from wds_cloud.errors import ConfigError
from wds_cloud.index.permutation import Permutation
from wds_cloud.settings import default_seed

log = logging.getLogger(__name__)

FORMAT = "wds_cloud.globalorder/1"
UNEVEN = ("drop", "pad")


def fetch_batch(dataset: Any, indices: Sequence[int]) -> list[Any]:
    """The samples ``indices`` of ``dataset``, in that order: ``dataset.get_batch(indices)``
    (one batched read) when it has one, else ``[dataset[i] for i in indices]``."""
    get_batch = getattr(dataset, "get_batch", None)
    if get_batch is not None:
        return list(get_batch(list(indices)))
    return [dataset[i] for i in indices]


@dataclass(frozen=True)
class Pass:
    """One rank's batches from ``start`` to the end of the epoch (what one ``iter()`` reads).

    Attributes:
        samples: samples in the dataset.
        seed, epoch: the permutation.
        start: global positions consumed before this pass.
        batch_size, rank, world, uneven: the split.
    """

    samples: int
    seed: int
    epoch: int
    start: int
    batch_size: int
    rank: int
    world: int
    uneven: str

    @property
    def per_rank(self) -> int:
        """Samples each rank delivers in this pass."""
        left = max(0, self.samples - self.start)
        return left // self.world if self.uneven == "drop" else -(-left // self.world)

    @property
    def end(self) -> int:
        """The cursor once every rank has delivered its pass."""
        return self.start + self.per_rank * self.world

    def __len__(self) -> int:
        return -(-self.per_rank // self.batch_size)

    def cursor_after(self, steps: int) -> int:
        """The global cursor once every rank has delivered ``steps`` batches of this pass."""
        return self.start + min(steps * self.batch_size, self.per_rank) * self.world

    def position_after(self, steps: int) -> tuple[int, int]:
        """``(epoch, cursor)`` once every rank has delivered ``steps`` batches of this pass:
        the next epoch's start once the pass is over."""
        if steps >= len(self):
            return self.epoch + 1, 0
        return self.epoch, self.cursor_after(steps)

    def __iter__(self) -> Iterator[list[int]]:
        """This rank's batches: lists of dataset indices."""
        perm = Permutation(self.samples, self.seed, self.epoch)
        n, size, world, rank = self.samples, self.batch_size, self.world, self.rank
        for step in range(len(self)):
            block = self.start + step * size * world
            count = min(size, self.per_rank - step * size)  # the same on every rank
            first = block + rank * count
            yield [perm[p % n] for p in range(first, first + count)]


class GlobalBatchSampler:
    """Batches of dataset indices in the global order, for ``DataLoader(batch_sampler=...)``.

    Iterating yields this rank's batches from the cursor to the end of the epoch, then moves to
    the next epoch; ``set_epoch(e)`` starts epoch ``e`` at its beginning (calling it with the
    current epoch keeps the cursor, so the usual ``for epoch ...: set_epoch(epoch)`` loop works
    after ``load_state_dict``).

    Args:
        samples: the dataset's length (``len(ds)``).
        batch_size: samples per batch per rank.
        seed: the permutations' seed (None: ``$WDS_SEED`` or 0); the same on every rank.
        uneven: ``"drop"`` or ``"pad"`` (see the module's description).
        rank, world: this process's rank and the world size (None: ``RANK``/``WORLD_SIZE``
            or ``torch.distributed``, read at every ``iter()``).
        epoch: the first epoch.

    Raises:
        ConfigError: a bad size, ``uneven``, rank or world.
    """

    def __init__(
        self,
        samples: int,
        batch_size: int,
        *,
        seed: int | None = None,
        uneven: str = "drop",
        rank: int | None = None,
        world: int | None = None,
        epoch: int = 0,
    ) -> None:
        if samples < 1:
            raise ConfigError(f"a global order needs samples, got a dataset of {samples}")
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if uneven not in UNEVEN:
            raise ConfigError(f"uneven must be 'drop' or 'pad', got {uneven!r}")
        if (rank is None) != (world is None):
            raise ConfigError("give both rank= and world=, or neither")
        if world is not None and rank is not None and not 0 <= rank < world:
            raise ConfigError(f"rank {rank} out of range for a world of {world}")
        self.samples = samples
        self.batch_size = batch_size
        self.seed = default_seed() if seed is None else int(seed)
        self.uneven = uneven
        self.rank, self.world = rank, world
        self.epoch = epoch
        self.cursor = 0
        self.last_world: int | None = None  # the world size of the latest pass
        self._pass: Pass | None = None  # the latest pass iterated

    def node(self) -> tuple[int, int]:
        """``(rank, world)`` as given, or of this process now."""
        if self.rank is not None and self.world is not None:
            return self.rank, self.world
        return node_info()

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` from its beginning (the current one: keep the cursor)."""
        if epoch != self.epoch:
            self.epoch, self.cursor = epoch, 0

    def current_pass(self) -> Pass:
        """The batches one ``iter()`` reads now (the cursor is not moved)."""
        rank, world = self.node()
        self.last_world = world
        return Pass(
            self.samples,
            self.seed,
            self.epoch,
            self.cursor,
            self.batch_size,
            rank,
            world,
            self.uneven,
        )

    def delivered(self, plan: Pass, steps: int) -> None:
        """Note that every rank has delivered ``steps`` batches of ``plan``; at its end the
        next epoch begins."""
        self.epoch, self.cursor = plan.position_after(steps)

    def __len__(self) -> int:
        return len(self.current_pass())

    def __iter__(self) -> Iterator[list[int]]:
        plan = self._pass = self.current_pass()
        for step, batch in enumerate(plan, 1):
            self.delivered(plan, step)
            yield batch
        if len(plan) == 0:
            self.delivered(plan, 0)

    # -- state -------------------------------------------------------------------------------

    def state_dict(self, delivered: int | None = None) -> dict[str, Any]:
        """``{"format", "seed", "epoch", "cursor", "world", "samples"}``: positions only.

        Every rank gives the same state when taken after the same number of batches (no
        collective is needed); ``cursor`` counts the epoch's positions consumed by all ranks.

        Args:
            delivered: the state once this many batches of the latest ``iter()`` have reached
                the training loop. A ``DataLoader`` takes batches from its sampler ahead of
                delivering them (``num_workers * prefetch_factor``), so the sampler's own
                position (None) is ahead of the loop's; pass the loop's count of batches this
                pass for the exact state (``make_loader(order="global")`` does this itself).
        """
        epoch, cursor = self.epoch, self.cursor
        if delivered is not None and self._pass is not None:
            epoch, cursor = self._pass.position_after(delivered)
        world = self.last_world if self.last_world is not None else self.node()[1]
        return {
            "format": FORMAT,
            "seed": self.seed,
            "epoch": epoch,
            "cursor": cursor,
            "world": world,
            "samples": self.samples,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the permutation of ``state`` from its cursor, with any rank and world.

        Raises:
            ConfigError: not a global-order state (or one missing a field), or one of a
                dataset of another size.
        """
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            found = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise ConfigError(f"not a global-order state (format {found!r}, expected {FORMAT!r})")
        missing = [k for k in ("seed", "epoch", "cursor", "samples") if k not in state]
        if missing:
            raise ConfigError(f"bad global-order state: no {', '.join(missing)}")
        if state["samples"] != self.samples:
            raise ConfigError(
                f"the state is of a dataset of {state['samples']} samples, this one has "
                f"{self.samples}: the permutation would differ; resume on the same dataset"
            )
        cursor = int(state["cursor"])
        if cursor < 0:
            raise ConfigError(f"bad global-order state: cursor {cursor}")
        if int(state["seed"]) != self.seed:
            log.info("global order: seed %s from the state replaces %s", state["seed"], self.seed)
        self.seed, self.epoch, self.cursor = int(state["seed"]), int(state["epoch"]), cursor


def iter_fetched(
    dataset: Any, batches: Iterable[Sequence[int]], readahead: int | None = None
) -> Iterator[list[Any]]:
    """:func:`fetch_batch` of each batch, in order: through the dataset's ``iter_batches``
    (``IndexedWebDataset``: the next ``readahead`` batches read by a thread pool while one is
    consumed; None: its ``batch`` setting) when it has one, else one batch at a time."""
    iter_batches = getattr(dataset, "iter_batches", None)
    if iter_batches is not None:
        return iter(iter_batches(batches, readahead=readahead))
    return (fetch_batch(dataset, indices) for indices in batches)


class CursorLoop:
    """What :class:`GlobalOrder` and ``make_loader(order="global")`` share: a
    :class:`GlobalBatchSampler` (``self.sampler``) whose cursor moves as each batch is handed
    to the training loop, and the state methods that read it."""

    sampler: GlobalBatchSampler

    def deliver(self, plan: Pass, batches: Iterable[Any]) -> Iterator[Any]:
        """Yield ``batches`` (those of ``plan``), noting each as delivered before it is
        yielded (a state taken in the loop body includes it); the next epoch after the last."""
        if len(plan) == 0:
            self.sampler.delivered(plan, 0)
            return
        for step, batch in enumerate(batches, 1):
            self.sampler.delivered(plan, step)
            yield batch

    def __len__(self) -> int:
        return len(self.sampler)

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` at its beginning (the current epoch: keep the cursor)."""
        self.sampler.set_epoch(epoch)

    def state_dict(self) -> dict[str, Any]:
        """``{"format", "seed", "epoch", "cursor", "world", "samples"}`` after the batches
        handed out so far; every rank gives the same one after as many batches."""
        return self.sampler.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue ``state``'s permutation from its cursor (any world size, any workers).

        Raises:
            ConfigError: not a global-order state, or of a dataset of another size.
        """
        self.sampler.load_state_dict(state)


class GlobalOrder(CursorLoop):
    """Iterate an indexed dataset in a global shuffle, a batch (a list of samples) at a time.

    ``GlobalOrder(IndexedWebDataset(...), 64, seed=17)`` yields this rank's batches of the
    epoch's permutation, each read as one batch (:func:`iter_fetched`: the dataset's
    ``iter_batches``/``get_batch``, coalesced, with ``readahead`` batches read meanwhile).
    ``state_dict()`` / ``load_state_dict()`` / ``set_epoch()`` as :class:`GlobalBatchSampler`,
    counted in batches handed out (a batch read ahead is not delivered).

    Args:
        dataset: a map-style dataset (``len`` and ``ds[i]``; ``get_batch`` and
            ``iter_batches`` used when present).
        batch_size: samples per batch per rank.
        readahead: batches read ahead (None: the dataset's setting, ``IndexedWebDataset``'s
            ``WDS_CLOUD_BATCH_READAHEAD``, 2 by default).
        collate: applied to each batch's list of samples (default: the list).
        **order: ``seed``, ``uneven``, ``rank``, ``world``, ``epoch``: see
            :class:`GlobalBatchSampler`.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int,
        *,
        readahead: int | None = None,
        collate: Callable[[list[Any]], Any] | None = None,
        **order: Any,
    ) -> None:
        self.dataset = dataset
        self.sampler = GlobalBatchSampler(len(dataset), batch_size, **order)
        self.readahead = readahead
        self.collate = collate

    def __iter__(self) -> Iterator[Any]:
        plan = self.sampler.current_pass()
        batches = iter_fetched(self.dataset, plan, self.readahead)
        if self.collate is not None:
            batches = map(self.collate, batches)
        return self.deliver(plan, batches)


__all__ = [
    "CursorLoop",
    "GlobalBatchSampler",
    "GlobalOrder",
    "Pass",
    "fetch_batch",
    "iter_fetched",
]
