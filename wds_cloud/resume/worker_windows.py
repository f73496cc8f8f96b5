"""``with_epoch`` on the dataset inside a ``DataLoader``: one window per worker.

Each worker runs its own window over its share of the shards and marks the ids of every item
it delivers with its window's progress (:data:`MARK`); the loader's state keeps one window per
reader, which a resume with the same readers continues and one with other numbers of ranks or
workers re-deals (:func:`adopted`, :func:`~wds_cloud.resume.merge.merge_windows`). The window on the object iterated is
in :mod:`wds_cloud.resume.window`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from wds_cloud.core.pipeline_base import PipelineBase
from wds_cloud.resume import kept
from wds_cloud.resume.draws import ResampledSource
from wds_cloud.resume.plan import Plan
from wds_cloud.resume.track import Rows, Tagged, Watch, flat
from wds_cloud.resume.tracked import deliver, pairs

#: First element of the mark that a worker puts before the ids of each item of its window.
MARK = "\x00window"


def _step(source: Any) -> int:
    """How much the epoch advances from one pass to the next."""
    return 1 if isinstance(source, ResampledSource) or source.shuffle is not None else 0


def adopted(saved: list[int], here: list[int]) -> list[list[int]]:
    """The readers ``(rank, world, worker, workers)`` of a state taken with ``saved`` =
    ``[ranks, workers]`` whose windows the reader ``here`` takes over when loaded with other
    numbers: old reader ``j`` (``rank * workers + worker``) goes to new slot ``j % slots``."""
    oworld, oworkers = saved
    rank, world, worker, workers = here
    slots, slot = world * workers, rank * workers + worker
    return [
        [j // oworkers, oworld, j % oworkers, oworkers]
        for j in range(oworld * oworkers)
        if j % slots == slot
    ]


def _limit(p: PipelineBase, reader: list[int]) -> int:
    """Items per window of ``reader`` (:meth:`DataPipeline.epoch_size` for another reader)."""
    n = p.nsamples
    if n > 0 and p.per_rank:
        nworkers, worker = reader[3], reader[2]
        n = n // nworkers + (1 if worker < n % nworkers else 0)
        if n == 0:
            return 0
    return int(n)


def emit_windows(plan: Plan, ctx: dict[str, Any]) -> Iterator[Any]:
    """One ``with_epoch``/``repeat`` window of the dataset of ``plan`` in a DataLoader worker, as
    :class:`~wds_cloud.resume.track.Tagged` values whose ids are preceded by a mark
    ``(MARK, reader, pass, index, epoch)`` (per row of a batch).

    Pass ``k`` of the window has epoch ``epoch + k * step``. From a loader state (``ctx``'s
    ``resume``), the worker reads what its share of each pass the state lists did not
    deliver, then goes on with later passes, and stops when its window holds ``n`` items
    counting those the state says were delivered. A state taken with other numbers of ranks
    or workers: the worker completes, one after the other, the windows of the old readers it
    takes over (:func:`adopted`), reading as they would have."""
    from wds_cloud.core.shards import worker_info

    state = ctx.get("resume")
    ctx["resume"] = None  # one window only (a persistent worker keeps its copy of ctx)
    scope = list(worker_info())
    saved_readers = (state or {}).get("readers")
    if state is None or saved_readers is None or list(saved_readers) == [scope[1], scope[3]]:
        yield from _window(plan, ctx, state, scope, None)
        return
    for old in adopted(list(saved_readers), scope):
        yield from _window(plan, ctx, state, old, old)


def _window(
    plan: Plan,
    ctx: dict[str, Any],
    state: dict[str, Any] | None,
    scope: list[int],
    as_reader: list[int] | None,
) -> Iterator[Any]:
    """The window of reader ``scope`` (this one, or ``as_reader`` taken over)."""
    assert plan.reader is not None and plan.reader.source is not None
    source = plan.reader.source
    p = plan.top.pipeline
    watch: Watch = ctx["watch"]
    reader = f"{scope[0]}.{scope[2]}"
    mine = (state or {}).get("windows", {}).get(reader, {})
    saved = mine.get("passes", [])
    if state is not None and source.shuffle is not None:
        # this worker's window starts at the epoch of its first saved pass (persistent
        # workers' windows start at epochs of their own), or at "next" after a finished one
        source.shuffle.epoch = int(saved[0]["epoch"] if saved else mine.get("next", state["epoch"]))
    first_epoch, step = source.order()[0], _step(source)
    limit = p.epoch_size() if as_reader is None else _limit(p, as_reader)
    count = int(mine.get("window", 0))
    if 0 < limit <= count or (state is not None and state.get("finished")):
        if saved and source.shuffle is not None:  # where this worker's window had ended
            source.shuffle.epoch = int(mine.get("next", int(saved[-1]["epoch"]) + step))
        return
    extra = {} if as_reader is None else {"as_reader": as_reader}
    for k in range(p.repetitions):
        resumed = dict(saved[k], reader=scope) if k < len(saved) else None
        sub = dict(ctx, epoch=first_epoch + k * step, resume=resumed, **extra)
        got = False
        for item, tags in pairs(plan.top, sub):
            got = True
            mark = (MARK, reader, k, count, first_epoch + k * step)
            if isinstance(tags, Rows):
                tags = Rows([mark, *row] for row in tags)
            else:
                tags = [mark, *flat(tags)]
            count += 1
            yield Tagged(item, tags, tuple(watch.refused))
            if 0 < limit <= count:
                return
        if not got and resumed is None:
            return  # an empty pass ends the window


class LoaderWindows:
    """The top object's ledger when each DataLoader worker runs a window of its own: per
    reader (``"rank.worker"``) the items of its window delivered and one
    :class:`~wds_cloud.resume.state.Ledger` per pass of the window (ids are routed by the
    mark before them, see :func:`emit_windows`)."""

    def __init__(self, header: dict[str, Any], source: Any) -> None:
        self.header = header
        self.source = source
        self.step = _step(source)
        self.count: dict[str, int] = {}
        self.seen: dict[str, set[int]] = {}
        self.passes: dict[str, list[Any]] = {}
        self.next: dict[str, int] = {}
        self.limits: dict[str, int] = {}  # items per window of this rank's readers, if known

    def _pass(self, reader: str, k: int, epoch_k: int | None = None) -> Any:
        passes = self.passes.setdefault(reader, [])
        while len(passes) <= k:
            if epoch_k is None:
                epoch = int(self.header["epoch"]) + len(passes) * self.step
            else:  # from the mark: persistent workers' windows start at epochs of their own
                epoch = epoch_k - (k - len(passes)) * self.step
            header = {**self.header, "epoch": epoch}
            header.pop("finished", None)
            passes.append(self.source.new_ledger(header, self.source.order(epoch)[1]))
        return passes[k]

    def add(self, ids: Iterable[Any]) -> None:
        """Record delivered ids (each item's preceded by its mark)."""
        ledger: Any = None
        batch: list[Any] = []
        for sid in ids:
            if sid[0] == MARK:
                if batch:
                    ledger.add(batch)
                    batch = []
                _, reader, k, index, epoch = sid
                ledger = self._pass(reader, k, epoch)
                seen = self.seen.setdefault(reader, set())
                if index not in seen:
                    seen.add(index)
                    self.count[reader] = self.count.get(reader, 0) + 1
            else:
                batch.append(sid)
        if batch:
            if ledger is None:
                raise RuntimeError("resume: a worker window's item came without its mark")
            ledger.add(batch)
        if self.limits and all(self.count.get(r, 0) >= n for r, n in self.limits.items()):
            self.header["finished"] = True  # every window is complete: nothing more comes

    def state(self) -> dict[str, Any]:
        """The JSON-serialisable state (``windows`` per reader)."""
        from wds_cloud.resume.state import STATE_FORMAT

        windows = {}
        delivered = 0
        for reader in sorted(set(self.count) | set(self.passes) | set(self.next)):
            passes = [ledger.state() for ledger in self.passes.get(reader, [])]
            for s in passes:
                s.pop("format", None)
                delivered += int(s["delivered"])
            windows[reader] = {"window": self.count.get(reader, 0), "passes": passes}
            if passes:  # where this worker's next window starts (for persistent workers)
                windows[reader]["next"] = int(passes[-1]["epoch"]) + self.step
            elif reader in self.next:
                windows[reader]["next"] = self.next[reader]
        return {
            "format": STATE_FORMAT,
            **self.header,
            "delivered": delivered,
            "windows": windows,
        }

    def load(self, state: dict[str, Any]) -> None:
        """Start from the deliveries recorded in ``state``.

        Raises:
            ConfigError: ``state`` was taken mid-pass by a loader without worker windows.
        """
        if "windows" not in state and (state.get("done") or state.get("open")):
            from wds_cloud.errors import ConfigError

            raise ConfigError(
                "this state was taken by a loader without with_epoch() on its dataset; load it "
                "into a loader built the same way"
            )
        for reader, d in state.get("windows", {}).items():
            self.count[reader] = int(d.get("window", 0))
            if "next" in d:
                self.next[reader] = int(d["next"])
            for k, saved in enumerate(d.get("passes", [])):
                self._pass(reader, k, int(saved["epoch"])).load(saved)


def run_loader_windows(plan: Plan, state: dict[str, Any] | None, watch: Watch) -> Iterator[Any]:
    """One ``iter()`` of the object of ``plan`` whose DataLoader's dataset has the window
    (each worker runs one, :func:`emit_windows`), from ``state`` if given."""
    from wds_cloud.core.shards import node_info

    reader, at = plan.reader, plan.loader
    assert reader is not None and reader.source is not None
    assert at is not None and at.below is not None
    source, loader, win = reader.source, at.loader, at.below.pipeline
    if state is not None and source.shuffle is not None:
        source.shuffle.epoch = int(state["epoch"])
    epoch = source.order()[0]
    generation = int(state.get("generation", 0)) + 1 if state is not None else 0
    here = [node_info()[1], max(1, int(loader.num_workers))]
    readers = here
    if state is not None and state.get("readers", readers) != readers:
        # elastic: this rank's workers complete the windows of the old readers they take over
        readers = list(state["readers"])
    header = {
        "epoch": epoch,
        "seed": getattr(reader.pipeline, "seed", 0),
        "generation": generation,
        "readers": readers,
    }
    if at.persistent or not loader.num_workers:
        header["persistent"] = True  # the readers' datasets (or the one itself) live on
    ledger = LoaderWindows(header, source)
    top = plan.top.pipeline
    prev = kept.get(top, kept.LEDGER)
    if header.get("persistent") and state is None and isinstance(prev, LoaderWindows):
        # persistent workers go on from where their previous windows ended
        for name, d in prev.state()["windows"].items():
            if "next" in d:
                ledger.next[name] = int(d["next"])
    if state is not None:
        ledger.load(state)
    if win.nsamples > 0:  # each worker's window ends after its share of n items
        rank = node_info()[0]
        mine = [[rank, here[0], w, here[1]] for w in range(here[1])]
        if readers != here:  # the old readers this rank's workers take over
            mine = [old for scope in mine for old in adopted(readers, scope)]
        for scope in mine:
            ledger.limits[f"{scope[0]}.{scope[2]}"] = _limit(win, scope)
    kept.put(top, kept.LEDGER, ledger)
    ctx = {**header, "resume": state, "watch": watch}
    return deliver(plan.top, ledger, ctx, None, epoch)


def next_windows(state: dict[str, Any]) -> dict[str, Any]:
    """A finished state of persistent workers' windows turned into the start of the next
    windows: each worker starts its next window at its own ``next`` epoch."""
    windows = {
        reader: {"window": 0, "passes": [], "next": d["next"]}
        for reader, d in state["windows"].items()
        if "next" in d
    }
    out = {k: v for k, v in state.items() if k != "finished"}
    out.update(windows=windows, delivered=0)
    return out
