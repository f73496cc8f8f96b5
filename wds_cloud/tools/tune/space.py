"""What the tuner searches: one :class:`Setting` of the loader's knobs, and the values each
knob (axis) may take on this machine and these shards.

Axes (each a sorted list of values; the search moves along one at a time):

- ``num_workers``: 0 to ``max(4, 2 x cores)`` (at most one per shard unless ``resampled``);
- ``prefetch_factor``: batches each worker keeps ready, 1 to 8 (with workers only);
- ``inner_batch``: the batch size inside the workers, ``batch_size / 4`` to ``4 x batch_size``;
- ``shm_batches``: batches through the shared-memory arena or torch's pickling (with workers,
  where ``memfd_create`` exists);
- ``readahead``: bytes read ahead per remote stream (``OpenerRegistry(readahead=)``), remote
  shards only, unless the caller passed its own ``registry``;
- ``prefetch``: parallel ranged reads per remote stream, for openers that have them.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from typing import Any

from wds_cloud.openers.streams.prefetch import DEFAULT_PREFETCH_CHUNK
from wds_cloud.openers.streams.readahead import DEFAULT_READAHEAD

__all__ = ["AXES", "Setting", "Space"]

#: Axis names in the order the search visits them when the verdict says nothing more useful.
AXES = ("num_workers", "prefetch_factor", "inner_batch", "shm_batches", "readahead", "prefetch")

_MIB = 1 << 20
_READAHEAD = (0, 4 * _MIB, 16 * _MIB, 64 * _MIB)
_PREFETCH = (0, 4, 8, 16)
_PREFETCH_FACTOR = (1, 2, 4, 8)


@dataclass(frozen=True)
class Setting:
    """One point of the search. ``readahead`` / ``prefetch`` are None where they do not apply
    (local shards, or a registry the caller chose)."""

    num_workers: int
    prefetch_factor: int
    inner_batch: int
    shm_batches: bool
    readahead: int | None = None
    prefetch: int | None = None

    def with_value(self, axis: str, value: Any) -> Setting:
        """This setting with ``axis`` set to ``value``."""
        return replace(self, **{axis: value})

    def key(self) -> tuple[Any, ...]:
        """What tells settings apart: without workers, ``prefetch_factor`` and ``shm_batches``
        do not apply, so settings differing only there are the same trial."""
        same = (
            replace(self, prefetch_factor=0, shm_batches=False) if self.num_workers == 0 else self
        )
        return tuple(asdict(same).values())

    def values(self) -> dict[str, Any]:
        """The knobs as a plain dict (the trials table's columns)."""
        return asdict(self)

    def loader_kwargs(self) -> dict[str, Any]:
        """The :func:`~wds_cloud.pytorch.builder.make_loader` keyword arguments of this setting.

        ``prefetch_factor`` and ``shm_batches`` are left out without workers (they do not
        apply); ``readahead`` becomes ``registry=OpenerRegistry(readahead=...)``.
        """
        out: dict[str, Any] = {"num_workers": self.num_workers, "inner_batch": self.inner_batch}
        if self.num_workers > 0:
            out["prefetch_factor"] = self.prefetch_factor
            out["shm_batches"] = self.shm_batches
        if self.readahead is not None:
            from wds_cloud.openers.registry import OpenerRegistry

            out["registry"] = OpenerRegistry(readahead=self.readahead)
        if self.prefetch is not None:
            out["prefetch"] = self.prefetch
        return out

    def buffer_bytes(self, prefetch_chunk: int = DEFAULT_PREFETCH_CHUNK) -> int:
        """Bytes the stream buffers of this setting may hold per reading process: two open
        streams (the shard and the next one opened early), each with its read-ahead and its
        parallel parts (``docs/openers.md``, *Memory*)."""
        per_stream = 0
        if self.readahead:
            per_stream += self.readahead + _MIB
        if self.prefetch:
            per_stream += (self.prefetch + 1) * prefetch_chunk
        return 2 * per_stream


@dataclass(frozen=True)
class Space:
    """The values of every axis for one tuning run (an axis with one value is not searched)."""

    axes: dict[str, tuple[Any, ...]]
    seed: Setting

    @classmethod
    def build(
        cls,
        *,
        batch_size: int,
        cores: int | None = None,
        shards: int | None = None,
        remote: bool = False,
        ranged: bool = False,
        own_registry: bool = False,
        shm: bool | None = None,
    ) -> Space:
        """The space for a loader of ``batch_size`` on ``cores`` CPUs (default: this machine's).

        Args:
            batch_size: the loader's batch size.
            cores: CPUs to plan for (default: ``os.cpu_count()``).
            shards: shards each epoch reads; caps the workers (None: no cap, ``resampled``).
            remote: the shards come over a network (read-ahead applies).
            ranged: their opener has parallel ranged reads (``prefetch=``).
            own_registry: the caller passed ``registry=``: read-ahead is theirs, not searched.
            shm: whether the shared-memory arena can be used (default: ``memfd_create`` exists).
        """
        cores = cores or os.cpu_count() or 1
        top = max(4, 2 * cores)
        if shards is not None:
            top = max(0, min(top, shards))
        workers = tuple(n for n in (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64) if n <= top) or (
            0,
        )
        inner = tuple(sorted({max(1, batch_size * k // 4) for k in (1, 2, 4, 8, 16)}))
        arena = hasattr(os, "memfd_create") if shm is None else shm
        axes: dict[str, tuple[Any, ...]] = {
            "num_workers": workers,
            "prefetch_factor": _PREFETCH_FACTOR,
            "inner_batch": inner,
            "shm_batches": (False, True) if arena else (False,),
            "readahead": _READAHEAD if remote and not own_registry else (None,),
            "prefetch": _PREFETCH if remote and ranged else (None,),
        }
        seed = Setting(
            num_workers=max(n for n in workers if n <= max(1, cores)) if workers else 0,
            prefetch_factor=2,
            inner_batch=batch_size,
            shm_batches=arena,
            readahead=DEFAULT_READAHEAD if len(axes["readahead"]) > 1 else None,
            prefetch=0 if len(axes["prefetch"]) > 1 else None,
        )
        return cls(axes, seed)

    def fix(self, axis: str, value: Any) -> Space:
        """This space with ``axis`` held at ``value`` (the caller chose it)."""
        return Space({**self.axes, axis: (value,)}, self.seed.with_value(axis, value))

    def applies(self, axis: str, setting: Setting) -> bool:
        """Whether moving ``axis`` can change anything from ``setting`` (more than one value;
        ``prefetch_factor`` and ``shm_batches`` only with workers)."""
        if len(self.axes[axis]) < 2:
            return False
        return not (axis in ("prefetch_factor", "shm_batches") and setting.num_workers == 0)

    def neighbours(self, axis: str, setting: Setting) -> list[Setting]:
        """The settings one step down and one step up ``axis`` from ``setting``; on the
        ``num_workers`` axis also no workers (reading in the main process), when it is not
        one of them."""
        values = self.axes[axis]
        current = getattr(setting, axis)
        i = values.index(current) if current in values else 0
        steps = [j for j in (i - 1, i + 1) if 0 <= j < len(values)]
        if axis == "num_workers" and i > 1 and values[0] == 0:
            steps.insert(0, 0)
        return [setting.with_value(axis, values[j]) for j in steps]

    def size(self) -> int:
        """Settings in the full grid (the exhaustive search a benchmark compares with)."""
        total = 1
        for values in self.axes.values():
            total *= len(values)
        return total
