"""Sample shuffling stages: a fast buffer shuffle and its deterministic, epoch-aware variant.

``shuffle(bufsize, initial)`` keeps a list of up to ``bufsize`` items and, once ``initial`` are
buffered, emits a random one for each new input (one per two inputs while the buffer is still
growing, as webdataset does). When the buffer is full the emitted item's slot is simply
overwritten by the incoming one, so the steady state costs one ``random()`` and two list
operations per item.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Iterator
from typing import Any

from wds_cloud.core.curry import pipelinefilter
from wds_cloud.core.stagekind import stage_kind


def stable_seed(*parts: int | str) -> int:
    """Combine integers and strings into a 64-bit seed that does not depend on PYTHONHASHSEED.

    Args:
        *parts: values to mix (seed, epoch, rank, worker, ...).

    Returns:
        A non-negative integer usable with ``random.Random``.
    """
    h = hashlib.blake2b(digest_size=8)
    for part in parts:
        h.update(repr(part).encode())
        h.update(b"\x00")
    return int.from_bytes(h.digest(), "little")


def _make_rng(rng: random.Random | None, seed: Any) -> random.Random:
    if seed is not None:
        if rng is not None:
            raise ValueError("shuffle: pass either rng= or seed=, not both")
        return random.Random(seed)
    if rng is not None:
        return rng
    return random.Random()  # seeded from os.urandom


def buffer_shuffle(
    data: Iterable[Any], bufsize: int, initial: int, rng: random.Random
) -> Iterator[Any]:
    """Shuffle ``data`` with a buffer of ``bufsize`` items using ``rng``.

    Args:
        data: the items.
        bufsize: the most items held at once; ``< 2`` passes items through unchanged.
        initial: how many items to buffer before the first one is emitted.
        rng: the random generator.

    Yields:
        Every input item exactly once, in shuffled order.
    """
    if bufsize < 2:
        yield from data
        return
    initial = max(1, min(initial, bufsize))
    rand = rng.random
    buf: list[Any] = []
    append = buf.append
    grow = True  # so the first eligible input emits
    for sample in data:
        n = len(buf)
        if n >= bufsize:
            k = int(rand() * n)
            out = buf[k]
            buf[k] = sample
            yield out
            continue
        append(sample)
        n += 1
        if n < initial:
            continue
        grow = not grow
        if grow and n < bufsize:
            continue  # keep this one: the buffer grows by one every two inputs
        k = int(rand() * n)
        buf[k], buf[-1] = buf[-1], buf[k]
        yield buf.pop()
    rng.shuffle(buf)
    yield from buf


@stage_kind("identity")
def _shuffle(
    data: Iterable[Any],
    bufsize: int = 1000,
    initial: int = 100,
    rng: random.Random | None = None,
    seed: Any = None,
    handler: Any = None,
) -> Iterator[Any]:
    """Shuffle samples with a buffer (webdataset ``shuffle``).

    Args:
        data: source iterator.
        bufsize: buffer size; ``< 2`` disables shuffling.
        initial: items buffered before the first output.
        rng: a ``random.Random`` to use (not with ``seed``).
        seed: seed for a private ``random.Random``; ``None`` seeds from ``os.urandom``.
        handler: accepted for compatibility; shuffling cannot fail.

    Yields:
        The samples in shuffled order.
    """
    yield from buffer_shuffle(data, bufsize, initial, _make_rng(rng, seed))


shuffle = pipelinefilter(_shuffle)


@stage_kind("identity")
class detshuffle:
    """Deterministic buffer shuffle whose seed changes every epoch (webdataset ``detshuffle``).

    Each ``run`` (one pass of the pipeline) advances ``epoch`` by one and seeds the shuffle from
    ``(seed, epoch)``. ``set_epoch(n)`` makes the next pass use epoch ``n``; call it on the
    dataset in the main process before creating a DataLoader iterator so that non-persistent
    workers receive the right epoch.

    Args:
        bufsize: buffer size.
        initial: items buffered before the first output.
        seed: base seed.
        epoch: the epoch *before* the first pass (the first pass uses ``epoch + 1``).
    """

    def __init__(self, bufsize: int = 1000, initial: int = 100, seed: int = 0, epoch: int = -1):
        self.bufsize = bufsize
        self.initial = initial
        self.seed = seed
        self.epoch = epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass use ``epoch``."""
        self.epoch = epoch - 1

    def run(self, src: Iterable[Any]) -> Iterator[Any]:
        """Shuffle ``src`` for the next epoch."""
        self.epoch += 1
        rng = random.Random(stable_seed(self.seed, self.epoch))
        return buffer_shuffle(src, self.bufsize, self.initial, rng)

    def __repr__(self) -> str:
        return f"detshuffle(bufsize={self.bufsize}, seed={self.seed}, epoch={self.epoch})"
