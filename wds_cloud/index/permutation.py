"""A seeded permutation of ``[0, n)`` computed one position at a time, in O(1) memory.

:class:`Permutation` is a keyed Feistel network on the smallest power-of-two domain that holds
``n`` (at least 4), with cycle walking: ``perm[i]`` applies the network to ``i`` and, while the
result is ``>= n``, applies it again. A Feistel network is a bijection of its domain for any
round function, and cycle walking restricts a bijection of ``[0, 2^k)`` to one of ``[0, n)``
(the walk from ``i < n`` stays on ``i``'s cycle, so it ends at an element ``< n``, and two
inputs never end at the same one). The domain is under ``2n``, so a lookup takes under two
passes on average; nothing of size ``n`` is ever built, so a permutation of 10^9 samples costs
what one of 10 costs.

The round keys come from BLAKE2b over ``(seed, epoch)``: the same pair gives the same
permutation on every machine and Python version, another pair an unrelated one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

_MASK64 = (1 << 64) - 1
ROUNDS = 6


def _mix(x: int) -> int:
    """SplitMix64's finaliser: a bijection of 64-bit words that spreads every input bit."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def round_keys(seed: int, epoch: int, rounds: int = ROUNDS) -> tuple[int, ...]:
    """The 64-bit round keys of the permutation of ``(seed, epoch)``."""
    digest = hashlib.blake2b(
        f"wds_cloud.globalorder/1:{int(seed)}:{int(epoch)}".encode(), digest_size=8 * rounds
    ).digest()
    return tuple(int.from_bytes(digest[8 * i : 8 * i + 8], "little") for i in range(rounds))


class Permutation:
    """The permutation of ``range(n)`` keyed by ``(seed, epoch)``: ``perm[i]`` is the sample
    at position ``i``; ``len(perm) == n``; iterating yields all of them in order.

    Args:
        n: the number of elements (>= 0).
        seed: any integer.
        epoch: any integer (each epoch has its own permutation).

    Raises:
        ValueError: ``n`` is negative.
    """

    __slots__ = ("_high", "_keys", "_low", "epoch", "n", "seed")

    def __init__(self, n: int, seed: int, epoch: int = 0) -> None:
        if n < 0:
            raise ValueError(f"a permutation of {n} elements: n must be >= 0")
        self.n = int(n)
        self.seed = int(seed)
        self.epoch = int(epoch)
        bits = max(2, (self.n - 1).bit_length())
        self._low = bits // 2  # the halves' widths; they swap at every round
        self._high = bits - self._low
        self._keys = round_keys(self.seed, self.epoch)

    def _network(self, x: int) -> int:
        """One pass of the Feistel network over ``[0, 2^bits)``."""
        left_bits, right_bits = self._high, self._low
        left, right = x >> right_bits, x & ((1 << right_bits) - 1)
        for key in self._keys:
            mixed = _mix((right * 0x9E3779B97F4A7C15 + key) & _MASK64)
            left, right = right, left ^ (mixed & ((1 << left_bits) - 1))
            left_bits, right_bits = right_bits, left_bits
        return (left << right_bits) | right

    def __getitem__(self, index: int) -> int:
        n = self.n
        if not 0 <= index < n:
            raise IndexError(f"position {index} out of range for a permutation of {n}")
        if n == 1:
            return 0
        x = self._network(index)
        while x >= n:  # cycle walking: stays on index's cycle, which has elements < n
            x = self._network(x)
        return x

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        return (self[i] for i in range(self.n))

    def __repr__(self) -> str:
        return f"Permutation(n={self.n}, seed={self.seed}, epoch={self.epoch})"


__all__ = ["Permutation", "round_keys"]
