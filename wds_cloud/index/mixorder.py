"""The order of a :class:`~wds_cloud.core.mixplan.DataPlan`: which samples of which sources
each rank's next batch holds, resumed exactly and elastically from a small position.

**Position** (the whole state, JSON, ~200 bytes): the epoch, ``batch`` (global batches
delivered this epoch, all ranks together) and ``done`` (samples of each source delivered this
epoch). Source ``i``'s epoch positions ``0 .. quota_i - 1`` are its samples in a seeded
permutation per ``(seed, source, epoch, pass)`` (a quota over the source's size takes further
passes, each a new permutation), so within an epoch a source never repeats a sample before
all of them were given, and the samples of an epoch do not depend on how it was batched.

**Split over ranks**: a global step is ``world`` consecutive batches; rank ``r`` reads the
``r``-th. Every rank computes the step's compositions (:func:`compose_step`: a few integers
per rank) and reads only its own batch: source ``i``'s samples in batch ``k`` of the step are
positions ``done_i + (samples of i in the step's batches before k)`` onward. After the step
``batch += world`` and ``done`` grows by the step's compositions. Another world size resumes
from the same position: steps are cut afresh from there. DataLoader workers only fetch the
index lists the main process plans, so their number is free too. The last step of an epoch
may hold fewer batches than ranks: ranks past the end get none (rank 0 always has the most;
under DDP the ranks without a batch join the step without one, as ``torch.distributed``'s
``Join`` does). A rank whose pass is over takes the position as the epoch's end, so every rank
gives the same state at the same step.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

from wds_cloud.core.mixplan import DataPlan, batches_left, compose_step
from wds_cloud.core.shards import node_info
from wds_cloud.core.shuffle import stable_seed
from wds_cloud.errors import ConfigError
from wds_cloud.index.globalorder import fetch_batch
from wds_cloud.index.permutation import Permutation

__all__ = ["FORMAT", "MixPass", "MixSampler", "MixedDataset"]

FORMAT = "wds_cloud.mixplan/1"
_PASSES = 1 << 20  # epoch keys of the per-source permutations: epoch * _PASSES + pass


class MixedDataset:
    """The sources of a plan as one map-style dataset: index ``offsets[i] + j`` is sample
    ``j`` of source ``i``. :meth:`get_batch` reads each source's part with its own
    ``get_batch`` (one batched read per source) and adds ``__source__`` (the source's name)
    to dict samples.
    """

    def __init__(self, names: Sequence[str], datasets: Sequence[Any]) -> None:
        self.names = list(names)
        self.datasets = list(datasets)
        self.sizes = [len(d) for d in self.datasets]
        self.offsets = [0]
        for n in self.sizes:
            self.offsets.append(self.offsets[-1] + n)

    def __len__(self) -> int:
        return self.offsets[-1]

    def locate(self, index: int) -> tuple[int, int]:
        """``(source, sample in it)`` of a global index."""
        for i in range(len(self.datasets)):
            if index < self.offsets[i + 1]:
                return i, index - self.offsets[i]
        raise IndexError(f"index {index} out of range for a mix of {len(self)} samples")

    def __getitem__(self, index: int) -> Any:
        return self.get_batch([index])[0]

    def get_batch(self, indices: Sequence[int]) -> list[Any]:
        """The samples ``indices``, in that order."""
        parts: dict[int, list[tuple[int, int]]] = {}
        for at, index in enumerate(indices):
            source, j = self.locate(index)
            parts.setdefault(source, []).append((at, j))
        out: list[Any] = [None] * len(indices)
        for source, wanted in parts.items():
            got = fetch_batch(self.datasets[source], [j for _, j in wanted])
            for (at, _), sample in zip(wanted, got, strict=True):
                if isinstance(sample, dict):
                    sample["__source__"] = self.names[source]
                out[at] = sample
        return out


class MixPass:
    """One rank's batches (lists of :class:`MixedDataset` indices) from a position to the end
    of the epoch; :meth:`position_after` gives the position once every rank has delivered so
    many of them."""

    def __init__(
        self, order: MixSampler, epoch: int, batch: int, done: list[int], rank: int, world: int
    ) -> None:
        self.order = order
        self.epoch, self.batch, self.done = epoch, batch, list(done)
        self.rank, self.world = rank, world
        self._after: dict[int, tuple[int, list[int]]] = {0: (batch, list(done))}
        left = [q - d for q, d in zip(order.quotas, done, strict=True)]
        self.total = batches_left(order.plan.batching, order.batch_size, left)
        self.steps = -(-self.total // world)  # global steps; the last may not reach every rank

    def __len__(self) -> int:
        return max(0, -(-(self.total - self.rank) // self.world))

    def position_after(self, steps: int) -> tuple[int, int, list[int]]:
        """``(epoch, batch, done)`` once every rank has delivered ``steps`` batches of this
        pass (the next epoch's start after its last global step)."""
        if steps >= self.steps:
            return self.epoch + 1, 0, [0] * len(self.done)
        for old in [k for k in self._after if k < steps]:
            del self._after[old]  # asked in order: earlier steps are not asked again
        batch, done = self._after[steps]
        return self.epoch, batch, list(done)

    def __iter__(self) -> Iterator[list[int]]:
        order, plan = self.order, self.order.plan
        batch, done = self.batch, list(self.done)
        for step in range(1, len(self) + 1):
            takes = compose_step(
                plan.batching,
                order.batch_size,
                order.quotas,
                done,
                batch,
                self.world,
                plan.seed,
                self.epoch,
                order.shares,
            )
            start = list(done)
            for take in takes[: self.rank]:
                start = [s + t for s, t in zip(start, take, strict=True)]
            mine = takes[self.rank] if self.rank < len(takes) else None
            for take in takes:
                done = [d + t for d, t in zip(done, take, strict=True)]
            batch += len(takes)
            self._after[step] = (batch, list(done))
            if mine is None:
                return
            yield order.indices(self.epoch, batch - len(takes) + self.rank, start, mine)


class MixSampler:
    """The position in a plan and the batches from it: what ``make_loader(plan)`` iterates
    (the interface of :class:`~wds_cloud.index.globalorder.GlobalBatchSampler`).

    Args:
        plan: the plan.
        sizes: samples in each source (in the plan's order).
        batch_size: samples per batch per rank.
        rank, world: this process's place (None: ``RANK``/``WORLD_SIZE`` or
            ``torch.distributed``, read at every ``iter()``).
        epoch: the first epoch.

    Raises:
        ConfigError: a bad batch size, or the plan's quotas do not fit the sizes.
    """

    def __init__(
        self,
        plan: DataPlan,
        sizes: Sequence[int],
        batch_size: int,
        *,
        rank: int | None = None,
        world: int | None = None,
        epoch: int = 0,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        if (rank is None) != (world is None):
            raise ConfigError("give both rank= and world=, or neither")
        self.plan = plan
        self.sizes = list(sizes)
        self.quotas = plan.quotas(self.sizes)
        self.shares = plan.shares(self.quotas)
        self.batch_size = batch_size
        self.rank, self.world = rank, world
        self.epoch, self.batch = epoch, 0
        self.done = [0] * len(self.sizes)
        self.offsets = [0]
        for n in self.sizes:
            self.offsets.append(self.offsets[-1] + n)
        self.last_world: int | None = None
        self._perms: dict[tuple[int, int], Permutation] = {}
        self._keys = [stable_seed("mixplan-source", plan.seed, name) for name in plan.names]

    def node(self) -> tuple[int, int]:
        """``(rank, world)`` as given, or of this process now."""
        if self.rank is not None and self.world is not None:
            return self.rank, self.world
        return node_info()

    def _perm(self, source: int, epoch: int, turn: int) -> Permutation:
        """The permutation of ``source``'s pass ``turn`` of ``epoch`` (the latest few kept)."""
        key = (source, epoch * _PASSES + turn)
        perm = self._perms.get(key)
        if perm is None:
            if len(self._perms) > 4 * len(self.sizes):
                self._perms.clear()
            perm = Permutation(self.sizes[source], self._keys[source], key[1])
            self._perms[key] = perm
        return perm

    def indices(self, epoch: int, batch: int, start: list[int], take: list[int]) -> list[int]:
        """The :class:`MixedDataset` indices of a batch holding ``take[i]`` samples of source
        ``i`` from its position ``start[i]`` (shuffled within the batch when mixed)."""
        out: list[int] = []
        for i, (first, count) in enumerate(zip(start, take, strict=True)):
            size, base = self.sizes[i], self.offsets[i]
            at, end = first, first + count
            while at < end:  # usually one pass of the source; two where a pass ends
                turn, offset = divmod(at, size)
                stop = min(end, (turn + 1) * size)
                perm = self._perm(i, epoch, turn)
                out.extend(base + perm[j] for j in range(offset, offset + stop - at))
                at = stop
        if self.plan.batching in ("random", "stratified"):
            random.Random(stable_seed("mixplan-order", self.plan.seed, epoch, batch)).shuffle(out)
        return out

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` from its beginning (the current one: keep the position)."""
        if epoch != self.epoch:
            self.epoch, self.batch, self.done = epoch, 0, [0] * len(self.sizes)

    def current_pass(self) -> MixPass:
        """This rank's batches from the position to the end of the epoch."""
        rank, world = self.node()
        self.last_world = world
        return MixPass(self, self.epoch, self.batch, self.done, rank, world)

    def delivered(self, plan: MixPass, steps: int) -> None:
        """Note that every rank has delivered ``steps`` batches of ``plan``."""
        self.epoch, self.batch, self.done = plan.position_after(steps)

    def __len__(self) -> int:
        return len(self.current_pass())

    def __iter__(self) -> Iterator[list[int]]:
        plan = self.current_pass()
        for step, batch in enumerate(plan, 1):
            self.delivered(plan, step)
            yield batch
        self.delivered(plan, plan.steps)  # the ranks still holding a batch deliver it now

    def state_dict(self) -> dict[str, Any]:
        """The position: ``{"format", "seed", "epoch", "batch", "done", "quotas",
        "batch_size", "batching", "world"}`` (``done`` and ``quotas`` by source name)."""
        names = self.plan.names
        return {
            "format": FORMAT,
            "seed": self.plan.seed,
            "batching": self.plan.batching,
            "batch_size": self.batch_size,
            "epoch": self.epoch,
            "batch": self.batch,
            "done": dict(zip(names, self.done, strict=True)),
            "quotas": dict(zip(names, self.quotas, strict=True)),
            "world": self.last_world if self.last_world is not None else self.node()[1],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state``'s position, with any number of ranks and workers.

        Raises:
            ConfigError: not a plan state, or one of another plan (seed, batching, batch size,
                sources or their quotas: the first difference named).
        """
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            found = state.get("format") if isinstance(state, dict) else type(state).__name__
            raise ConfigError(f"not a data-plan state (format {found!r}, expected {FORMAT!r})")
        mine = self.state_dict()
        for key in ("seed", "batching", "batch_size"):
            if state.get(key) != mine[key]:
                raise ConfigError(
                    f"the data-plan state has {key}={state.get(key)!r}, this plan "
                    f"{mine[key]!r}: resume with the plan the state was taken with"
                )
        quotas = state.get("quotas")
        if not isinstance(quotas, dict) or quotas != mine["quotas"]:
            diff = [
                f"{n}: {quotas.get(n) if isinstance(quotas, dict) else None} -> {q}"
                for n, q in mine["quotas"].items()
                if not isinstance(quotas, dict) or quotas.get(n) != q
            ] or [f"sources {sorted(quotas or {})} -> {sorted(mine['quotas'])}"]
            raise ConfigError(
                f"the data-plan state's per-epoch quotas differ from this plan's ({'; '.join(diff)}):"
                " the sources changed size or the plan changed"
            )
        done = state.get("done")
        if not isinstance(done, dict) or set(done) != set(self.plan.names):
            raise ConfigError(f"bad data-plan state: 'done' must name {self.plan.names}")
        counts = [int(done[n]) for n in self.plan.names]
        if any(not 0 <= d <= q for d, q in zip(counts, self.quotas, strict=True)):
            raise ConfigError(f"bad data-plan state: done {done} outside the quotas {quotas}")
        self.epoch, self.batch, self.done = int(state["epoch"]), int(state["batch"]), counts
