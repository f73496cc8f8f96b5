"""Packing and grouping stages: ``pack`` (variable-length samples into fixed-capacity packs)
and ``group_by`` (batches of samples that share a key).

Both hold a bounded buffer and decide only from what it holds, in arrival order: ``pack``
makes a pack whenever the buffer holds ``buffer`` samples (and packs what is left at the end),
``group_by`` emits a group as soon as it has ``batch_size`` samples (or, when the buffer is full,
its largest group). So a stage fed again with the samples it held but had not emitted, in their
order, and then the rest of its input, gives exactly the outputs it would have given: that is how
a resumable pipeline resumes them (``docs/resume.md``): the stages keep no state of their own, the
samples in their buffers are not delivered yet and are read again. They declare the ``regroup``
tracking kind (:mod:`wds_cloud.core.stagekind`).

The packing rule is first-fit-decreasing over a sliding buffer: each pack starts with the
oldest sample held (so no sample waits more than ``buffer`` packs) and is then filled by
repeatedly adding the longest held sample that still fits (ties: the oldest), which is how
first-fit-decreasing fills its bins; the samples of a pack keep their arrival order.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any

from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.core.stagekind import Group, stage_kind
from wds_cloud.errors import ConfigError, SampleError


def _located(sample: Any) -> dict[str, Any]:
    """``key``/``url`` of a dict sample for a :class:`SampleError`."""
    if isinstance(sample, dict):
        return {"key": sample.get("__key__"), "url": sample.get("__url__")}
    return {}


def _applied(name: str, what: str, fn: Callable[[Any], Any], sample: Any) -> Any:
    """``fn(sample)``; its failure as a :class:`SampleError` naming the sample."""
    try:
        return fn(sample)
    except Exception as exn:
        raise SampleError(f"{name}: {what}() failed: {exn!r}", **_located(sample)) from exn


def _positive(name: str, what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}: {what} must be an integer >= 1, got {value!r}")
    return value


def _callable(name: str, what: str, value: Any) -> Any:
    if not callable(value):
        raise ConfigError(f"{name}: {what} must be callable, got {value!r}")
    return value


class _Regrouper:
    """What ``Pack`` and ``GroupBy`` share: running, the input loop and making an output."""

    handler: Handler

    def __call__(self, src: Iterable[Any]) -> Iterator[Any]:
        return self.run(src)

    def run(self, src: Iterable[Any]) -> Iterator[Any]:
        """The outputs made from ``src``."""
        for group in self.regroup(src):
            yield group.item

    def regroup(self, src: Iterable[Any]) -> Iterator[Group]:
        """The outputs of ``src`` as :class:`~wds_cloud.core.stagekind.Group` records."""
        dropped: list[int] = []
        try:
            yield from self._groups(self._checked(src, dropped), dropped)
        except _Stop:
            return

    def _groups(
        self, checked: Iterator[tuple[int, Any, Any]], dropped: list[int]
    ) -> Iterator[Group]:
        raise NotImplementedError

    def _check(self, sample: Any) -> Any:
        raise NotImplementedError

    def _checked(self, src: Iterable[Any], dropped: list[int]) -> Iterator[tuple[int, Any, Any]]:
        """``(arrival index, sample, self._check(sample))`` for each input; an input failing its
        check goes to the handler and, skipped, to ``dropped``."""
        for index, sample in enumerate(src):
            try:
                value = self._check(sample)
            except SampleError as exn:
                dropped.append(index)
                if self.handler(exn):
                    continue
                raise _Stop from exn
            yield index, sample, value

    def _output(
        self,
        fn: Callable[[list[Any]], Any] | None,
        samples: list[Any],
        members: list[int],
        dropped: list[int],
        rows: bool,
    ) -> Group | None:
        """The group of ``members`` (their ``samples``) made into an output by ``fn``; None
        when ``fn`` failed and the handler skips it (its members are then dropped)."""
        if fn is None:
            return Group(samples, members, _flush(dropped), True)
        try:
            item = fn(samples)
        except Exception as exn:
            dropped.extend(members)
            if self.handler(exn):
                return None
            raise _Stop from exn
        return Group(item, members, _flush(dropped), rows)


@stage_kind("regroup")
class Pack(_Regrouper):
    """Stage: pack samples into groups whose lengths sum to at most ``capacity``.

    Args:
        capacity: the most a pack holds (tokens, pixels: the unit of ``length``).
        length: a sample's length, an integer ``>= 0`` (default ``len``).
        buffer: how many samples are held to choose from; a pack is made whenever this many are
            held (larger: fuller packs, more memory and delay).
        pack_fn: turns a pack (a list of samples, in arrival order) into the output; ``None``
            yields the lists.
        handler: decides on a sample whose length fails or exceeds ``capacity`` and on a
            ``pack_fn`` that fails (skip: the sample or pack is dropped and counted by a
            counting handler; the default raises).

    Raises:
        ConfigError: ``capacity`` or ``buffer`` not an integer >= 1, ``length`` or ``pack_fn``
            not callable.
    """

    def __init__(
        self,
        capacity: int,
        length: Callable[[Any], int] = len,
        buffer: int = 256,
        pack_fn: Callable[[list[Any]], Any] | None = None,
        handler: Handler = reraise_exception,
    ) -> None:
        self.capacity = _positive("pack", "capacity", capacity)
        self.buffer = _positive("pack", "buffer", buffer)
        self.length = _callable("pack", "length", length)
        self.pack_fn = None if pack_fn is None else _callable("pack", "pack_fn", pack_fn)
        self.handler = handler

    def __repr__(self) -> str:
        return f"<pack capacity={self.capacity} buffer={self.buffer}>"

    def _check(self, sample: Any) -> int:
        """The length of ``sample``."""
        n = _applied("pack", "length", self.length, sample)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise SampleError(
                f"pack: length() must return an integer >= 0, got {n!r}", **_located(sample)
            )
        if n > self.capacity:
            raise SampleError(
                f"pack: sample of length {n} does not fit the capacity {self.capacity}",
                **_located(sample),
            )
        return n

    def _groups(
        self, checked: Iterator[tuple[int, Any, Any]], dropped: list[int]
    ) -> Iterator[Group]:
        held: dict[int, tuple[int, Any]] = {}  # arrival index -> (length, sample)
        by_length: list[tuple[int, int]] = []  # (length, -arrival), ascending
        ages: deque[int] = deque()  # arrival indices, oldest first (some already packed)

        def make() -> Group | None:
            while ages[0] not in held:
                ages.popleft()
            oldest = ages.popleft()
            first = held[oldest][0]
            del by_length[bisect.bisect_left(by_length, (first, -oldest))]
            room = self.capacity - first
            members = [oldest]
            while by_length:
                i = bisect.bisect_right(by_length, (room, 1)) - 1  # the longest that fits
                if i < 0:
                    break
                length, neg = by_length.pop(i)
                members.append(-neg)
                room -= length
            members.sort()
            samples = [held.pop(index)[1] for index in members]
            return self._output(self.pack_fn, samples, members, dropped, False)

        for index, sample, n in checked:
            held[index] = (n, sample)
            bisect.insort(by_length, (n, -index))
            ages.append(index)
            if len(held) >= self.buffer:
                group = make()
                if group is not None:
                    yield group
        while held:
            group = make()
            if group is not None:
                yield group


@stage_kind("regroup")
class GroupBy(_Regrouper):
    """Stage: batches of samples with the same ``key(sample)`` (e.g. a resolution bucket).

    A group is emitted as soon as it holds ``batch_size`` samples. When ``buffer`` samples are
    held and no group is full, the largest group is emitted as it is (ties: the group whose
    first sample arrived first). At the end the groups left are emitted in the order of their
    first samples, or dropped with ``partial=False``.

    Args:
        key: a sample's group, any hashable value.
        batch_size: samples per batch.
        buffer: the most samples held (default ``16 * batch_size``); at least ``batch_size``.
        collation_fn: turns a batch (a list of samples in arrival order) into the output;
            ``None`` yields the lists.
        partial: emit the groups left at the end of the input.
        handler: decides on a ``key`` or ``collation_fn`` that fails (skip: the sample or batch
            is dropped, counted by a counting handler; the default raises).

    Raises:
        ConfigError: ``batch_size`` or ``buffer`` not an integer >= 1, ``buffer`` smaller than
            ``batch_size``, ``key`` or ``collation_fn`` not callable.
    """

    def __init__(
        self,
        key: Callable[[Any], Hashable],
        batch_size: int,
        buffer: int | None = None,
        collation_fn: Callable[[list[Any]], Any] | None = None,
        partial: bool = True,
        handler: Handler = reraise_exception,
    ) -> None:
        self.batch_size = _positive("group_by", "batch_size", batch_size)
        self.buffer = _positive("group_by", "buffer", 16 * batch_size if buffer is None else buffer)
        if self.buffer < self.batch_size:
            raise ConfigError(
                f"group_by: buffer ({self.buffer}) must hold at least batch_size "
                f"({self.batch_size}) samples"
            )
        self.key = _callable("group_by", "key", key)
        self.collation_fn = (
            None if collation_fn is None else _callable("group_by", "collation_fn", collation_fn)
        )
        self.partial = partial
        self.handler = handler

    def __repr__(self) -> str:
        return f"<group_by batch_size={self.batch_size} buffer={self.buffer}>"

    def _check(self, sample: Any) -> Hashable:
        """The group of ``sample``."""
        k: Hashable = _applied("group_by", "key", self.key, sample)
        try:
            hash(k)
        except TypeError as exn:
            raise SampleError(f"group_by: key() returned {exn}", **_located(sample)) from exn
        return k

    def _groups(
        self, checked: Iterator[tuple[int, Any, Any]], dropped: list[int]
    ) -> Iterator[Group]:
        groups: dict[Hashable, list[tuple[int, Any]]] = {}  # in order of their first sample
        total = 0

        def emit(k: Hashable) -> Group | None:
            nonlocal total
            entries = groups.pop(k)
            total -= len(entries)
            members = [index for index, _ in entries]
            samples = [sample for _, sample in entries]
            return self._output(self.collation_fn, samples, members, dropped, True)

        for index, sample, k in checked:
            members = groups.setdefault(k, [])
            members.append((index, sample))
            total += 1
            if len(members) >= self.batch_size:
                ready = k
            elif total >= self.buffer:
                ready = max(groups, key=lambda g: len(groups[g]))  # the first of the largest
            else:
                continue
            group = emit(ready)
            if group is not None:
                yield group
        if self.partial:
            for k in list(groups):
                group = emit(k)
                if group is not None:
                    yield group


class _Stop(Exception):
    """The handler chose to stop the iteration."""


def _flush(dropped: list[int]) -> list[int]:
    """The dropped indices noted so far; empties ``dropped``."""
    out = dropped[:]
    dropped.clear()
    return out


def pack(
    capacity: int,
    length: Callable[[Any], int] = len,
    buffer: int = 256,
    pack_fn: Callable[[list[Any]], Any] | None = None,
    handler: Handler = reraise_exception,
) -> Pack:
    """Stage: pack variable-length samples into groups of total length at most ``capacity``
    (first-fit-decreasing over a buffer of ``buffer`` samples; see :class:`Pack`)."""
    return Pack(capacity, length=length, buffer=buffer, pack_fn=pack_fn, handler=handler)


def group_by(
    key: Callable[[Any], Hashable],
    batch_size: int,
    buffer: int | None = None,
    collation_fn: Callable[[list[Any]], Any] | None = None,
    partial: bool = True,
    handler: Handler = reraise_exception,
) -> GroupBy:
    """Stage: batches of ``batch_size`` samples sharing ``key(sample)`` (see :class:`GroupBy`)."""
    return GroupBy(
        key,
        batch_size,
        buffer=buffer,
        collation_fn=collation_fn,
        partial=partial,
        handler=handler,
    )
