"""``with_epoch(n)`` / ``repeat(nepochs)`` on the object iterated: a window of passes.

Such an ``iter()`` runs passes over the shards (each a new shard-shuffle epoch, or a new
resampling pass) until ``n`` items were delivered or ``nepochs`` passes ran; a pass that yields
nothing ends the window early. Every pass is tracked like a plain one (its own ledger and shard
order) and the state of the pass in progress also records ``pass`` (passes started in this
window before it) and ``window`` (items delivered in this window so far). Resuming re-enters
that pass where its ledger says, goes on with the next passes exactly as an uninterrupted run
would, and stops at the same count. When the window is complete the state is ``finished``
and the next ``iter()`` starts a new window.

The window can also sit on a pipeline *inside* the object iterated, in the same process, when
every stage above it hands on what it pulled before it pulls more (``batched``/``listed``,
``map``, ``to_tuple``, ``select``, ...: :func:`lazy`). ``make_loader(epoch_size=...)`` is such a
loader: ``DataPipeline(loader.unbatched().shuffle(...).with_epoch(n)).batched(b)``. Whenever
the training loop holds an item, every item the windowed pipeline yielded is then in it, so the
state of the inner window is the state of the object iterated (:func:`run_nested`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any


def windowed(
    p: Any, state: dict[str, Any] | None, run_pass: Callable[[Any, Any], Iterator[Any]]
) -> Iterator[Any]:
    """Deliver one ``with_epoch``/``repeat`` window of ``p``, from ``state`` if given."""
    limit = p.epoch_size()
    first = int(state.get("pass", 0)) if state is not None else 0
    count = int(state.get("window", 0)) if state is not None else 0
    for k in range(first, p.repetitions):
        resumed = state if k == first else None
        got = False
        for item in run_pass(p, resumed):
            got = True
            count += 1
            header = p._resume_ledger.header
            header["pass"] = k
            header["window"] = count
            if 0 < limit <= count:
                header["finished"] = True  # the rest of this pass is dropped, as islice does
                yield item
                return
            yield item
        if not got and resumed is None:
            return  # an empty pass ends the window (a resumed pass may have nothing left)


def _is_windowed(p: Any) -> bool:
    return bool(p.repetitions != 1 or p.nsamples >= 0)


def _lazy_functions() -> frozenset[Any]:
    from wds_cloud.core import batching, stages

    return frozenset(
        (
            batching._batched,
            batching._listed,
            stages._map,
            stages._map_dict,
            stages._map_tuple,
            stages._to_tuple,
            stages._select,
            stages._rename,
            stages._rename_keys,
            stages._extract_keys,
        )
    )


def lazy(stages: Iterable[Any]) -> bool:
    """Whether every stage of ``stages`` yields what it pulled before pulling more (a batch of
    the items it pulled, a mapped or selected item), so it holds nothing while its output is
    used: a window under such stages is delivered as it is read."""
    from wds_cloud.core.curry import FilterFunction

    known = _lazy_functions()
    return all(isinstance(s, FilterFunction) and s.f in known for s in stages)


def nested(p: Any) -> tuple[Any, list[Any]] | None:
    """The windowed pipeline under ``p`` (not windowed itself) whose window is ``p``'s, and the
    pipelines from ``p`` down to it (excluded); None when there is none or a stage above it can
    hold items (:func:`lazy`)."""
    from wds_cloud.core.pipeline import DataPipeline

    if _is_windowed(p):
        return None
    path: list[Any] = []
    node = p
    while node.pipeline and isinstance(node.pipeline[0], DataPipeline):
        if not lazy(node.pipeline[1:]):
            return None
        path.append(node)
        node = node.pipeline[0]
        if _is_windowed(node):
            return node, path
    return None


def run_nested(
    p: Any,
    inner: Any,
    path: list[Any],
    state: dict[str, Any] | None,
    run_pass: Callable[[Any, Any], Iterator[Any]],
) -> Iterator[Any]:
    """One ``iter()`` of ``p`` whose window is set on ``inner`` (see :func:`nested`): the window
    of ``inner``, tracked, under the stages of the pipelines in ``path`` run plainly. The
    ledger of the pass in progress is ``p``'s."""
    from wds_cloud.core.pipeline import invoke_stage

    def window() -> Iterator[Any]:
        for item in windowed(inner, state, run_pass):
            p._resume_ledger = inner._resume_ledger
            yield item

    src: Iterator[Any] = window()
    for node in reversed(path):
        for stage in node.pipeline[1:]:
            src = invoke_stage(stage, src)
    return src


def _chain(p: Any) -> Iterator[Any]:
    """``p`` and the pipelines (and DataLoader datasets) under it, top first."""
    from wds_cloud.core.pipeline import DataPipeline
    from wds_cloud.resume.loop import _loader_dataset

    node = p
    while node is not None:
        yield node
        first = node.pipeline[0] if isinstance(node, DataPipeline) and node.pipeline else None
        if first is None:
            return
        dataset = _loader_dataset(first)
        node = dataset if dataset is not None else first
        if not isinstance(node, DataPipeline):
            yield node
            return


def why_not(p: Any) -> str:
    """Why ``p`` cannot be resumed, naming the stage at fault."""

    from wds_cloud.core.mix import RandomMix
    from wds_cloud.core.pipeline import DataPipeline
    from wds_cloud.core.shards import ResampledShards, split_by_sample
    from wds_cloud.resume.loop import tracking_on

    if not tracking_on(p):
        return "resume tracking is switched off (resumable=False or WDS_CLOUD_RESUMABLE=0)"
    name = type(p).__name__
    for node in _chain(p):
        if isinstance(node, RandomMix):
            from wds_cloud.resume.mixing import reason

            why = reason(p) or "it reads a RandomMix that is not a DataLoader's dataset"
            return f"{name} cannot be resumed: {why} (see docs/resume.md, 'RandomMix')"
        if not isinstance(node, DataPipeline):
            continue
        if node is not p and _is_windowed(node):
            return (
                f"{name} cannot be resumed: with_epoch()/repeat() is set on {type(node).__name__}"
                ", a pipeline inside it with stages above it that hold items (a shuffle, "
                "unbatched, a generator: only batched, map, to_tuple, select and the like may "
                "follow it), or under another window; set it on the object you iterate "
                "instead (see "
                "docs/resume.md, 'with_epoch, resampling and RandomMix')"
            )
        if split_by_sample in node.pipeline:
            return (
                f"{name} cannot be resumed: split_by_sample is resumable only right after "
                "tarfile_to_samples (where WebDataset(split_samples=True) puts it)"
            )
        for stage in node.pipeline:
            if isinstance(stage, ResampledShards) and not stage.deterministic:
                return (
                    f"{name} cannot be resumed: ResampledShards(deterministic=False) mixes the "
                    "pid and the time into its draws; use deterministic=True (WebDataset's "
                    "resampled=True does)"
                )
    return (
        f"{name} cannot be resumed: its shard stages are not a shard list (or ResampledShards), "
        "shard shuffle, node/worker splitters and tarfile_to_samples (custom shard stages and "
        "Pipe-mode FIFOs are not resumable; see docs/resume.md)"
    )


# -- a window on the dataset inside a DataLoader: one window per worker -----------------------

#: First element of the mark that a worker puts before the ids of each item of its window.
MARK = "\x00window"


def loader_of(p: Any) -> Any:
    """The DataLoader under ``p`` (found through first stages), or None."""
    from wds_cloud.core.pipeline import DataPipeline
    from wds_cloud.resume.loop import _loader_dataset

    node = p
    while isinstance(node, DataPipeline) and node.pipeline:
        first = node.pipeline[0]
        if _loader_dataset(first) is not None:
            return first
        node = first
    return None


def loader_window(p: Any) -> Any:
    """The windowed dataset of the DataLoader under ``p``, or None."""
    from wds_cloud.core.pipeline import DataPipeline

    loader = loader_of(p)
    dataset = None if loader is None else loader.dataset
    return dataset if isinstance(dataset, DataPipeline) and _is_windowed(dataset) else None


def _step(source: Any) -> int:
    """How much the epoch advances from one pass to the next."""
    from wds_cloud.resume.draws import ResampledSource

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


def _limit(p: Any, reader: list[int]) -> int:
    """Items per window of ``reader`` (:meth:`DataPipeline.epoch_size` for another reader)."""
    n = p.nsamples
    if n > 0 and p.per_rank:
        nworkers, worker = reader[3], reader[2]
        n = n // nworkers + (1 if worker < n % nworkers else 0)
        if n == 0:
            return 0
    return int(n)


def emit_windows(
    p: Any, ctx: dict[str, Any], pairs: Callable[[Any, dict[str, Any]], Iterator[Any]]
) -> Iterator[Any]:
    """One ``with_epoch``/``repeat`` window of the dataset ``p`` in a DataLoader worker, as
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
        yield from _window(p, ctx, state, scope, None, pairs)
        return
    for old in adopted(list(saved_readers), scope):
        yield from _window(p, ctx, state, old, old, pairs)


def _window(
    p: Any,
    ctx: dict[str, Any],
    state: dict[str, Any] | None,
    scope: list[int],
    as_reader: list[int] | None,
    pairs: Callable[[Any, dict[str, Any]], Iterator[Any]],
) -> Iterator[Any]:
    """The window of reader ``scope`` (this one, or ``as_reader`` taken over)."""
    from wds_cloud.resume.loop import innermost
    from wds_cloud.resume.track import Rows, Tagged, flat

    found = innermost(p)
    assert found is not None
    source = found[1]
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
        for item, tags in pairs(p, sub):
            got = True
            mark = (MARK, reader, k, count, first_epoch + k * step)
            if isinstance(tags, Rows):
                tags = Rows([mark, *row] for row in tags)
            else:
                tags = [mark, *flat(tags)]
            count += 1
            yield Tagged(item, tags)
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


def run_loader_windows(p: Any, state: dict[str, Any] | None) -> Iterator[Any]:
    """One ``iter()`` of ``p`` whose DataLoader's dataset has the window (each worker runs
    one, :func:`emit_windows`), from ``state`` if given."""
    from wds_cloud.core.shards import node_info
    from wds_cloud.resume.loop import _deliver, innermost

    found = innermost(p)
    assert found is not None
    inner, source = found
    if state is not None and source.shuffle is not None:
        source.shuffle.epoch = int(state["epoch"])
    epoch = source.order()[0]
    generation = int(state.get("generation", 0)) + 1 if state is not None else 0
    here = [node_info()[1], max(1, int(loader_of(p).num_workers))]
    readers = here
    if state is not None and state.get("readers", readers) != readers:
        # elastic: this rank's workers complete the windows of the old readers they take over
        readers = list(state["readers"])
    header = {
        "epoch": epoch,
        "seed": getattr(inner, "seed", 0),
        "generation": generation,
        "readers": readers,
    }
    loader = loader_of(p)
    if getattr(loader, "persistent_workers", False) or not loader.num_workers:
        header["persistent"] = True  # the readers' datasets (or the one itself) live on
    ledger = LoaderWindows(header, source)
    prev = p.__dict__.get("_resume_ledger")
    if header.get("persistent") and state is None and isinstance(prev, LoaderWindows):
        # persistent workers go on from where their previous windows ended
        for reader, d in prev.state()["windows"].items():
            if "next" in d:
                ledger.next[reader] = int(d["next"])
    if state is not None:
        ledger.load(state)
    win = loader_window(p)
    if win.nsamples > 0:  # each worker's window ends after its share of n items
        rank = node_info()[0]
        mine = [[rank, here[0], w, here[1]] for w in range(here[1])]
        if readers != here:  # the old readers this rank's workers take over
            mine = [old for scope in mine for old in adopted(readers, scope)]
        for scope in mine:
            ledger.limits[f"{scope[0]}.{scope[2]}"] = _limit(win, scope)
    p._resume_ledger = ledger
    return _deliver(p, ledger, {**header, "resume": state}, None, epoch)  # type: ignore[arg-type]


def merge_windows(states: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge the loader states of several ranks with per-worker windows (their readers are
    disjoint: keyed by rank and worker).

    Raises:
        ConfigError: not all states are of worker windows.
    """
    if not all("windows" in s for s in states):
        from wds_cloud.errors import ConfigError

        raise ConfigError("merge_states: worker-window states mixed with other states")
    merged = dict(states[0])
    windows: dict[str, Any] = {}
    for s in states:  # after an elastic resume every rank holds every old reader's entry:
        for r, d in s["windows"].items():  # the one that took it over has the most
            old = windows.get(r)
            if old is None or _progress(d) > _progress(old):
                windows[r] = d
    merged["windows"] = dict(sorted(windows.items()))
    merged["delivered"] = sum(_progress(d)[1] for d in windows.values())
    merged["generation"] = max(int(s.get("generation", 0)) for s in states)
    merged.pop("finished", None)
    if all(s.get("finished") for s in states):
        merged["finished"] = True
    return merged


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


def _progress(d: dict[str, Any]) -> tuple[int, int]:
    return int(d.get("window", 0)), sum(int(p.get("delivered", 0)) for p in d.get("passes", []))
