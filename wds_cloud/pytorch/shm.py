"""Batches from DataLoader workers through a reusable shared-memory arena.

Torch sends every tensor a worker returns through a fresh shared-memory segment: the
worker creates it, copies the tensor in (every page faulted and zeroed by the kernel
first), passes its file descriptor, and the main process maps it and frees it again. For
a 64x256x256x3 uint8 batch that is ~3,000 page faults and two copies, per batch.

:class:`ShmCollate` wraps a DataLoader's ``collate_fn``: in a worker, it copies the CPU
tensors of each batch (one slot per batch, all its tensors) into a ring of slots of one
anonymous shared-memory file (``memfd``) made once per worker, and sends a small
descriptor instead (the file descriptor, the slot, dtypes, shapes). The main process maps
the file and returns tensors viewing the slot: same dtype, shape and values as torch's
path, contiguous, writable.

A slot is reused only after every tensor, view or storage of its batch is gone: one byte
per slot in the file's header says "in use"; the worker sets it when it fills the slot,
and the main process clears it from a ``weakref.finalize`` on the one buffer object that
all the batch's tensors keep alive. When no slot is free (batches kept alive), the batch
takes torch's ordinary path: the worker never waits and never overwrites a live batch.

The file has no name (``memfd_create``): nothing appears in ``/dev/shm`` and nothing can
leak when a worker or the main process is killed; the memory is freed when the worker's
descriptor and the last mapping are gone. Linux only; elsewhere batches take torch's path.
"""

from __future__ import annotations

import mmap
import os
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import get_worker_info

from wds_cloud.settings import env_bool

__all__ = ["ShmCollate", "shm_batches_enabled", "view_batch"]

_HEADER = 4096  # slot flags live here, one byte per slot
_ALIGN = 64
_GROW = 1 << 20  # slot sizes are rounded up to whole MiB
DEFAULT_MAX_BATCH_BYTES = 1 << 30


def shm_batches_enabled(value: bool | None = None) -> bool:
    """Whether workers send batches through the shared-memory arena.

    ``value`` wins when not None; else ``WDS_CLOUD_SHM_BATCHES`` (default on). Always off
    where ``os.memfd_create`` does not exist.
    """
    if not hasattr(os, "memfd_create"):
        return False
    return bool(env_bool("WDS_CLOUD_SHM_BATCHES", True) if value is None else value)


class _Hole:
    """Where tensor ``index`` goes back into the batch's structure."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Hole, (self.index,))


def _movable(t: Any) -> bool:
    return (
        type(t) is torch.Tensor
        and t.device.type == "cpu"
        and t.layout == torch.strided
        and not t.requires_grad
        and not t.is_quantized
        and not t.is_conj()
        and not t.is_neg()
        and t.numel() > 0
        and t.is_contiguous()
    )


def _punch(value: Any, tensors: list[Any]) -> Any:
    """``value`` with movable tensors replaced by holes (exact tuple, list, dict only)."""
    if _movable(value):
        tensors.append(value)
        return _Hole(len(tensors) - 1)
    kind = type(value)
    if kind is tuple or kind is list:
        return kind(_punch(v, tensors) for v in value)
    if kind is dict:
        return {k: _punch(v, tensors) for k, v in value.items()}
    return value


def _fill(value: Any, tensors: list[Any]) -> Any:
    kind = type(value)
    if kind is _Hole:
        return tensors[value.index]
    if kind is tuple or kind is list:
        return kind(_fill(v, tensors) for v in value)
    if kind is dict:
        return {k: _fill(v, tensors) for k, v in value.items()}
    return value


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class _Arena:
    """One worker's shared file: a header of slot flags, then ``slots`` equal slots."""

    def __init__(self, slots: int, slot_bytes: int) -> None:
        self.slots = slots
        self.slot_bytes = slot_bytes
        self.size = _HEADER + slots * slot_bytes
        self.fd = os.memfd_create("wds_cloud-batches", os.MFD_CLOEXEC)
        weakref.finalize(self, os.close, self.fd)
        os.ftruncate(self.fd, self.size)
        self.mm = mmap.mmap(self.fd, self.size)
        self.bytes = np.frombuffer(self.mm, dtype=np.uint8)

    def acquire(self) -> int | None:
        mm = self.mm
        for slot in range(self.slots):
            if mm[slot] == 0:
                mm[slot] = 1
                return slot
        return None

    def offset(self, slot: int) -> int:
        return _HEADER + slot * self.slot_bytes


class _ShmBatch:
    """A batch whose tensors are in an arena slot; unpickles into the batch itself."""

    __slots__ = ("arena", "skeleton", "slot", "specs")

    def __init__(self, arena: _Arena, slot: int, specs: list[Any], skeleton: Any) -> None:
        self.arena = arena
        self.slot = slot
        self.specs = specs
        self.skeleton = skeleton

    def __reduce__(self) -> tuple[Any, ...]:
        from multiprocessing.reduction import DupFd

        a = self.arena
        where = (a.size, a.offset(self.slot), a.slot_bytes, self.slot)
        return (_rebuild, (DupFd(a.fd), where, self.specs, self.skeleton))


def _release(mm: mmap.mmap, slot: int, pid: int) -> None:
    # only the process that rebuilt the batch frees its slot: a child forked while the batch
    # was alive (or cyclic garbage) holds a copy whose release would free a live slot
    if os.getpid() == pid and not mm.closed:
        mm[slot] = 0


def _rebuild(dupfd: Any, where: tuple[int, int, int, int], specs: list[Any], skeleton: Any) -> Any:
    """Main-process side: map the worker's file and rebuild the batch viewing the slot."""
    size, start, length, slot = where
    fd = dupfd.detach()
    try:
        mm = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    return view_batch(mm, start, length, slot, specs, skeleton)


def view_batch(
    mm: mmap.mmap, start: int, length: int, slot: int, specs: list[Any], skeleton: Any
) -> Any:
    """The batch whose tensors are in slot ``slot`` (``length`` bytes at ``start``) of the
    mapped arena ``mm``: tensors viewing the slot, put back into ``skeleton``. The slot's
    flag is cleared when the last tensor, view or storage of the batch is gone."""
    # every tensor's storage holds ``view`` (torch.frombuffer keeps its buffer object), so
    # the slot is released when the last tensor, view or storage of this batch is gone
    view = memoryview(mm)[start : start + length]
    tensors = [
        torch.frombuffer(view, dtype=dtype, count=count, offset=offset).view(shape)
        for dtype, shape, count, offset in specs
    ]
    done = weakref.finalize(view, _release, mm, slot, os.getpid())
    done.atexit = False
    del view
    return _fill(skeleton, tensors)


class ShmCollate:
    """A ``collate_fn`` that sends each batch's tensors through a per-worker shared arena.

    Calls ``fn``, then, in a DataLoader worker only, moves the batch's contiguous CPU
    tensors (anywhere in tuples, lists and dicts) into a free slot; other values (strings,
    bytes, lists of Python objects, tensors in other containers) are pickled as before.
    In the main process (``num_workers=0``) it is ``fn`` unchanged. Picklable (spawn); the
    arena is made lazily in each worker and never pickled.

    Args:
        fn: the wrapped collate function.
        slots: slots per worker (batches in flight or held before the fallback).
        max_batch_bytes: larger batches take torch's ordinary path.
    """

    def __init__(
        self,
        fn: Callable[[Any], Any],
        slots: int = 4,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> None:
        self.fn = fn
        self.slots = slots
        self.max_batch_bytes = max_batch_bytes
        self._arena: _Arena | None = None
        self._pid = os.getpid()

    def __getstate__(self) -> dict[str, Any]:
        return {"fn": self.fn, "slots": self.slots, "max_batch_bytes": self.max_batch_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __call__(self, data: Any) -> Any:
        batch = self.fn(data)
        if get_worker_info() is None:
            return batch
        return self.pack(batch)

    def pack(self, batch: Any) -> Any:
        """``batch`` with its tensors in a slot, or ``batch`` itself (nothing to move, no
        free slot, too large)."""
        placed = self.place(batch)
        if placed is None:
            return batch
        return _ShmBatch(*placed)

    def place(self, batch: Any) -> tuple[Any, int, list[Any], Any] | None:
        """Copy ``batch``'s movable tensors into a free slot of this process's arena:
        ``(arena, slot, specs, skeleton)`` (``arena.fd``, ``arena.size``,
        ``arena.offset(slot)``, ``arena.slot_bytes`` say where; :func:`view_batch` rebuilds
        it), or None (nothing to move, no free slot, too large, no memfd)."""
        tensors: list[Any] = []
        skeleton = _punch(batch, tensors)
        if not tensors:
            return None
        offsets = []
        total = 0
        for t in tensors:
            offsets.append(total)
            total += _aligned(t.numel() * t.element_size())
        if total > self.max_batch_bytes:
            return None
        try:
            arena = self._arena_for(total)
        except OSError:  # no memfd (seccomp), no memory or address space: torch's path
            return None
        slot = arena.acquire()
        if slot is None:
            return None
        base = arena.offset(slot)
        specs = []
        for t, off in zip(tensors, offsets, strict=True):
            nbytes = t.numel() * t.element_size()
            # numpy's copy of raw bytes is a memcpy (torch's uint8 copy_ is several
            # times slower); any dtype reads as bytes once viewed as uint8
            src = t.reshape(-1).view(torch.uint8).numpy()
            np.copyto(arena.bytes[base + off : base + off + nbytes], src)
            specs.append((t.dtype, tuple(t.shape), t.numel(), off))
        return arena, slot, specs, skeleton

    def _arena_for(self, nbytes: int) -> _Arena:
        arena = self._arena
        if arena is None or self._pid != os.getpid() or nbytes > arena.slot_bytes:
            size = (nbytes + _GROW - 1) // _GROW * _GROW
            if arena is not None and self._pid == os.getpid():
                size = max(size, arena.slot_bytes)
            arena = self._arena = _Arena(self.slots, size)
            self._pid = os.getpid()
        return arena
