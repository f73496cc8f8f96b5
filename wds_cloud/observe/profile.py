"""The per-process recorder: explicit timers for coarse events, a sampler for per-sample stages.

Two kinds of measurement, chosen for their cost on tiny samples (about 5 µs a sample, so the
2 % budget is 100 ns a sample, less than two clock reads per stage):

* **Timers** for what happens per shard or per batch: listing, open and first byte, read wait
  per backend (with bytes), the consumer's wait in ``next()``. Each is a pair of clock reads.
* **A sampler thread** for what happens per sample (tar parse, grouping, every pipeline stage,
  collation, transfer, device copy): every ``period`` seconds it reads the stack of each
  watched thread (``sys._current_frames``) and charges the time since its last look to the
  innermost pipeline stage on the stack (the generator frames of the stages, registered when a
  profiled pass starts), refined by the code it is in (tar reader, opener, shared-memory
  arena...). Nothing runs per sample; the stage times of a thread add up to its wall time.

Off, nothing here exists: no recorder, no thread, no wrapper (:func:`recorders_created`).
DataLoader workers write their totals to a directory the main process reads
(:func:`dump_dir`), every ``DUMP_EVERY`` seconds from the sampler thread and when a pass ends.
How a pipeline's pass is put under the recorder is in :mod:`.passes`.
"""

from __future__ import annotations

import gc
import os
import pickle
import random
import sys
import threading
import time
import weakref
from array import array
from collections.abc import Callable, Collection, Mapping
from functools import partial
from itertools import accumulate, chain, repeat, starmap, takewhile
from operator import attrgetter
from types import CodeType, FrameType
from typing import Any, cast

from wds_cloud.observe.events import EventColumns
from wds_cloud.settings import BOOL, SECONDS, ConfigTable, Field, above

__all__ = [
    "PROFILE_SETTINGS",
    "Recorder",
    "current",
    "dump_dir",
    "dump_dirs",
    "profile_enabled",
    "recorder",
    "recorders_created",
    "reset",
]

# seconds between two looks of the sampler, on average: 1,200 looks a minute per thread.
# Each look costs the sampled thread far more than the sampler's own ~30 µs of CPU (most on
# decode-heavy threads: measured ~7 % of JPEG-decode samples/s at 20 ms, ~2 % at 50 ms);
# docs/observability.md, "Overhead"
PERIOD = 0.05

#: ``WDS_CLOUD_PROFILE``: profile every pipeline made while it is set (default off);
#: ``WDS_CLOUD_PROFILE_PERIOD``: the sampler's mean period (default 50 ms; shorter is more
#: precise for short runs and costs proportionally more).
PROFILE_SETTINGS = ConfigTable(
    section="",
    owner="DataPipeline",
    what="profiling",
    fields=(
        Field("profile", BOOL, False),
        Field("profile_period", SECONDS, PERIOD, checks=(above(0),)),
    ),
)
DUMP_EVERY = 0.5  # seconds between two dumps of a worker's totals
# trace events kept per process, of each kind (tuple events, EventColumns rows), and batch spans
# per thread (read by passes.py once a pass); later ones are counted, not kept
MAX_EVENTS = 200_000
MAX_BATCH_SPANS = MAX_EVENTS

_STOP = "-"  # a frame below which the stack is not this thread's work
# what a frame's code is doing, from the most to the least specific; the first rule whose
# path part is in the code's file name (and whose function, when given, is the code's) wins
_RULES: tuple[tuple[str, str | None, str], ...] = (
    # a worker's stack continues below its loop with the parent's frames at fork time
    ("torch/utils/data/_utils/worker.py", "_worker_loop", _STOP),
    ("wds_cloud/observe/stream.py", None, "read wait"),
    # make_loader(order="global"): a batch read (its coalesced requests, or waiting for them)
    ("wds_cloud/index/globalorder.py", "fetch_batch", "batch read"),
    ("wds_cloud/index/globalorder.py", "iter_fetched", "batch read"),
    ("wds_cloud/index/indexed.py", "get_batch", "batch read"),
    ("wds_cloud/index/indexed.py", "iter_batches", "batch read"),
    ("wds_cloud/openers/", None, "open"),
    ("wds_cloud/listing.py", None, "open"),
    ("wds_cloud/core/tarsource.py", None, "tar parse"),
    ("wds_cloud/core/tarheader.py", None, "tar parse"),
    ("wds_cloud/core/tar.py", None, "tar parse"),
    ("wds_cloud/core/samples.py", None, "sample grouping"),
    ("wds_cloud/pytorch/shm.py", None, "transfer"),
    ("wds_cloud/pytorch/loader.py", "fast_convert", "transfer"),
    ("torch/utils/data/dataloader.py", None, "transfer"),
    # the thread executor's hand-over: the training thread waiting for a reader's batch
    ("wds_cloud/core/threadworkers.py", "__next__", "transfer"),
    ("wds_cloud/pytorch/builder.py", "move_to_device", "device copy"),
    ("wds_cloud/pytorch/builder.py", "pin_batch", "device copy"),
    ("wds_cloud/pytorch/builder.py", "_record_stream", "device copy"),
    ("wds_cloud/pytorch/builder.py", "copy", "device copy"),
    ("wds_cloud/core/collate.py", None, "batch/collate"),
    # make_loader's readers decoding JPEGs straight into their batches (core/batchdecode.py)
    ("wds_cloud/core/batchdecode.py", None, "decode (into batches)"),
)
# when several kinds of code are on the stack below the innermost stage, the one that says most
_PRIORITY = {
    "read wait": 0,
    "batch read": 0,
    "open": 1,
    "device copy": 2,
    "transfer": 3,
    "tar parse": 4,
    "sample grouping": 5,
    "decode (into batches)": 6,
    "batch/collate": 7,
}

CONSUMER = "consumer"  # the main thread outside next(): the training step
IDLE = "idle"  # a worker outside its pipeline: waiting for the main process to take a batch
CONSUMER_WAIT = "consumer wait"  # the timer of the main thread's time blocked in next()
WORKER_BATCH = "worker batch"  # the timer of a worker's next() of its (batching) pipeline
UNSAMPLED = "unsampled"  # a pass that ended before the sampler's first look at it


def profile_enabled(value: bool | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """``value`` when not None, else ``WDS_CLOUD_PROFILE`` (default off).

    Raises:
        ConfigError: the variable is not a boolean.
    """
    return bool(PROFILE_SETTINGS.values({"profile": value}, environ=environ)["profile"])


def _rule(code: CodeType) -> str:
    path = code.co_filename.replace(os.sep, "/")
    for part, name, label in _RULES:
        if part in path and (name is None or code.co_name == name):
            return label
    return ""


class ThreadRecord:
    """What the sampler keeps for one watched thread."""

    __slots__ = ("depth", "frames", "ident", "last", "name", "outside", "span", "tid")

    def __init__(self, ident: int, name: str, tid: int, outside: str) -> None:
        self.ident = ident
        self.name = name
        self.tid = tid
        self.outside = outside
        self.depth = 0  # profiled passes open in this thread (nested pipelines)
        self.last = 0  # clock of the last look, 0 while no pass is open
        self.span: tuple[str, int] | None = None  # the stage being run and since when
        self.frames: list[int] = []  # ids of the stage frames registered for its passes


MAX_DEPTH = 1024  # frames read per stack at most, from the innermost (the recursion limit's order)
_CODE = attrgetter("f_code")
Stack = tuple[list[int], list[CodeType]]  # a stack's frame ids and code objects, innermost first


class _Gc:
    """The collector as the looks leave it: ``off``, a look has switched it off (it was on)
    and not back yet; ``hooked``, the fork hook that mends a child forked meanwhile is in."""

    off = False
    hooked = False


def gc_off() -> bool:
    """Switch the garbage collector off for a look and say whether it was on. Nothing is
    allocated before it is off (a collection could start at any allocation). A process forked
    before :func:`gc_restore` (a DataLoader worker started while the sampler looks) would run
    its whole life without collecting cycles: the hook :func:`fork_hook` registers turns it
    back on there."""
    enabled = gc.isenabled()
    gc.disable()
    _Gc.off = enabled
    return enabled


def gc_restore(enabled: bool) -> None:
    """The collector back to its state before :func:`gc_off`."""
    _Gc.off = False
    if enabled:
        gc.enable()


def fork_hook() -> None:
    """Register, once per process, the fork hook that turns the collector back on in a child
    forked while a look had it off (called when a recorder is made, never at import)."""
    if not _Gc.hooked:
        _Gc.hooked = True
        os.register_at_fork(after_in_child=_after_fork)


def _after_fork() -> None:
    if _Gc.off:
        _Gc.off = False
        gc.enable()


def current_frames() -> dict[int, FrameType]:
    """``sys._current_frames()`` with the garbage collector off while it runs.

    CPython 3.11 holds the runtime's thread-list lock while the call builds its dict; a
    collection started there can run a finalizer that releases the GIL (a urllib3 pool closing
    its sockets), and a thread that then takes the GIL and needs that lock (one ending, or
    starting) waits for it while this one waits for the GIL: the process hangs. Seen in this
    project's test suite (a py-spy dump: the sampler in ``sock_close`` under
    ``_PyThread_CurrentFrames``, every other thread waiting for the GIL). The collector is
    turned back on only if it was on.
    """
    enabled = gc_off()
    try:
        return sys._current_frames()
    finally:
        gc_restore(enabled)


def thread_stacks(idents: Collection[int]) -> dict[int, Stack]:
    """The stacks of the threads ``idents`` (those running Python code) as plain data: each
    frame's ``id`` and code object, innermost first, at most :data:`MAX_DEPTH` frames.

    Another thread's frames may only be walked while that thread cannot run. A Python loop
    over ``f_back`` can be switched out between two steps (another thread waiting 5 ms for the
    GIL is enough); the walked thread then runs on, suspends or resumes the generators on its
    stack, and the walk goes on through frames that no longer belong together (a stage's time
    charged to ``idle``). CPython 3.11 sampling profilers that walk ``f_back`` in Python have
    crashed with use-after-free (sentry-python #6119, ddtrace #13567); this one once saw a
    DataLoader worker's segmentation fault and an ``f_back`` that returned a ``dict``. So
    the call and every walk are one C-level evaluation (:func:`_read_stacks`), which runs no
    bytecode and so never gives up the GIL, with the collector off (no finalizer runs in it
    either, see :func:`current_frames`); the frames are dropped before this returns.
    """
    enabled = gc_off()
    try:
        wanted = list(idents)
        chains = _read_stacks(wanted)
        try:
            return {
                ident: (list(map(id, frames)), list(map(_CODE, frames)))
                for ident, frames in zip(wanted, chains, strict=True)
                if frames
            }
        finally:
            for frames in chains:  # this thread's own frame may be in them: no cycle left
                frames.clear()
    finally:
        gc_restore(enabled)


_BACK = ("f_back",) * MAX_DEPTH


def _read_stacks(idents: list[int]) -> list[list[FrameType]]:
    """``sys._current_frames()`` and the chain of frames of each thread of ``idents`` from
    its innermost one (empty for a thread running no Python code), read by one C-level
    evaluation: ``list`` drives iterators of C functions only, so no bytecode runs from the
    call to the last frame read. The call comes through ``starmap``, its dict is repeated
    once per thread for ``dict.get``, and each chain is ``accumulate(chain((top,), _BACK),
    getattr)`` (top, top.f_back, ...) up to the first None."""
    calls = starmap(sys._current_frames, ((),))
    dicts = chain.from_iterable(map(repeat, calls, (len(idents),)))
    tops = zip(map(dict.get, dicts, idents))  # (top,) or (None,): the first item of a walk
    walks = map(accumulate, map(chain, tops, repeat(_BACK)), repeat(getattr))
    chains = list(map(list, map(partial(takewhile, bool), walks)))
    return cast("list[list[FrameType]]", chains)  # accumulate's items are untyped


class Recorder:
    """Everything measured in one process; :meth:`snapshot` is its plain-data form.

    Attributes:
        role: ``"main"`` or ``"worker <i>"``.
        rank: this process's rank (``RANK`` or ``torch.distributed``).
        worker: the DataLoader worker index (-1 in the main process).
        timers: ``name -> [seconds, count, bytes]``.
        stages: ``(thread, stage) -> seconds`` charged by the sampler.
        events: the trace events with ``args`` (a shard's span), see :mod:`.trace`; those
            without (stage spans, counters) are kept as numbers (:mod:`.events`), the
            ``batch`` spans of the timed passes too (:meth:`batch_track`), and
            :meth:`trace_events` gives them all.
    """

    created = 0  # recorders made in this process: 0 while profiling was never on

    def __init__(self, role: str, rank: int = 0, worker: int = -1, dump: str | None = None):
        Recorder.created += 1
        fork_hook()
        self.role = role
        self.rank = rank
        self.worker = worker
        self.pid = os.getpid()
        self.dump = dump
        self.period = float(PROFILE_SETTINGS.values({})["profile_period"])
        self.start_ns = time.perf_counter_ns()
        self.timers: dict[str, list[float]] = {}
        self.stages: dict[tuple[str, str], float] = {}
        self.events: list[tuple[Any, ...]] = []
        self._numbers = EventColumns()  # the events without args
        self._numbers_dumped = 0
        # thread ident -> (starts, durations) of its batch spans, in ns
        self._batches: dict[int, tuple[array[int], array[int]]] = {}
        self._batches_dumped: dict[int, int] = {}  # batch spans already written, per thread
        self.dropped = 0
        self.bytes_read = 0  # by the shard streams (the "bytes read" counter)
        self._bytes_seen = 0  # its value at the last look
        self.shards_open = 0  # shards opened and not closed yet (the "shards open" counter)
        # queue depths and bytes in flight, read at each look: name -> [(owner, read)], the
        # value of a counter is the sum over the live owners; the last value written per name
        self._gauges: dict[str, list[tuple[weakref.ref[Any], Callable[[Any], float]]]] = {}
        self._gauge_values: dict[str, float] = {}
        self._dumped = 0  # events already written to the dump file
        self._frames: dict[int, tuple[FrameType, str]] = {}  # id(frame) -> (frame, stage)
        self._codes: dict[CodeType, str] = {}
        self._threads: dict[int, ThreadRecord] = {}
        self._lock = threading.RLock()  # a pass dropped by the GC ends under it too
        self._sampler: threading.Thread | None = None
        self._stop = threading.Event()
        self._open = threading.Event()  # a pass is open: the sampler looks (else it idles)
        self._jitter = random.Random(self.pid)

    @property
    def items(self) -> int:
        """Items (batches) the timed passes gave so far: the count of their timers."""
        timers = self.timers
        return sum(int(timers[n][1]) for n in (CONSUMER_WAIT, WORKER_BATCH) if n in timers)

    # -- explicit timers and events ---------------------------------------------------------

    def add(self, name: str, seconds: float, count: int = 1, nbytes: int = 0) -> None:
        """Add ``seconds`` (and ``count`` events of ``nbytes``) to timer ``name`` (from any
        thread: shards may be opened ahead on another one)."""
        with self._lock:
            slot = self.timers.get(name)
            if slot is None:
                self.timers[name] = [seconds, count, nbytes]
            else:
                slot[0] += seconds
                slot[1] += count
                slot[2] += nbytes

    def span(
        self, name: str, cat: str, start_ns: int, end_ns: int, args: Mapping[str, Any] | None = None
    ) -> None:
        """A trace span of the calling thread (a shard read, a batch)."""
        ident = threading.get_ident()
        if args is not None:
            self._event(("X", name, cat, ident, start_ns, end_ns - start_ns, args))
            return
        with self._lock:
            self._number(self._numbers.span, name, cat, ident, start_ns, end_ns - start_ns)

    def counter(self, name: str, value: float) -> None:
        """A trace counter sample (bytes read, queue depth) at the current time."""
        with self._lock:
            self._number(self._numbers.counter, name, time.perf_counter_ns(), value)

    def _stage_span(self, stage: str, tid: int, start_ns: int, end_ns: int) -> None:
        """A span of ``stage`` on the stage track of thread ``tid`` (under the lock)."""
        self._number(self._numbers.span, stage, "stage", -tid, start_ns, end_ns - start_ns)

    def _number(self, add: Callable[..., None], *row: Any) -> None:
        """``add(*row)`` (a row of :attr:`_numbers`) while fewer than ``MAX_EVENTS`` are kept,
        else count it dropped (under the lock)."""
        if len(self._numbers) < MAX_EVENTS:
            add(*row)
        else:
            self.dropped += 1

    def gauge(self, name: str, owner: Any, read: Callable[[Any], float]) -> None:
        """A ``C`` counter ``name`` (a queue depth, bytes in flight) read at every look of
        the sampler: ``read(owner)`` summed over the live owners of that name, written when it
        changed. An owner is held weakly: once it is gone it counts no more."""
        with self._lock:
            self._gauges.setdefault(name, []).append((weakref.ref(owner), read))
            self._read_gauges((name,))  # its first value, however soon it is gone

    def refresh(self, name: str) -> None:
        """Read gauge ``name`` now (its owner changed it: a stream closed)."""
        with self._lock:
            if name in self._gauges:
                self._read_gauges((name,))

    def _read_gauges(self, names: tuple[str, ...] | None = None) -> None:
        for name in names if names is not None else list(self._gauges):
            owners = self._gauges[name]
            total = 0.0
            live = []
            for ref, read in owners:
                owner = ref()
                if owner is None:
                    continue
                live.append((ref, read))
                try:
                    total += read(owner)
                except Exception:  # a gauge of something torn down meanwhile counts 0
                    continue
            if live:
                self._gauges[name] = live
            else:
                del self._gauges[name]
            if self._gauge_values.get(name) != total:
                self._gauge_values[name] = total
                self.counter(name, total)

    def batch_track(self, ident: int) -> tuple[array[int], array[int]]:
        """The batch spans of thread ``ident``: two arrays, their starts and durations (ns),
        appended to by its timed passes (:func:`~.passes._outermost`).

        A span a batch as a tuple would leave three long-lived objects in the heap per batch,
        among the batch's own short-lived ones: they fragment the allocator's pools, and the
        process that receives batches (often the bottleneck) measured ~10 us more of CPU a
        batch for it (docs/observability.md, "Overhead"). Two int64 arrays keep none."""
        track = self._batches.get(ident)
        if track is None:
            with self._lock:
                track = self._batches.setdefault(ident, (array("q"), array("q")))
        return track

    def trace_events(self, dumped: bool = False) -> list[tuple[Any, ...]]:
        """The trace events kept so far, all kinds (``dumped``: only those not written to the
        dump yet, and marks them written)."""
        with self._lock:
            start = self._dumped if dumped else 0
            out = self.events[start:]
            out.extend(self._numbers.tuples(self._numbers_dumped if dumped else 0))
            if dumped:
                self._dumped = len(self.events)
                self._numbers_dumped = len(self._numbers)
            for ident, (starts, durs) in list(self._batches.items()):
                first = self._batches_dumped.get(ident, 0) if dumped else 0
                end = len(durs)  # a start is appended before its duration
                out.extend(
                    ("X", "batch", "batch", ident, starts[i], durs[i], None)
                    for i in range(first, end)
                )
                if dumped:
                    self._batches_dumped[ident] = end
            return out

    def _event(self, event: tuple[Any, ...]) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append(event)
        else:
            self.dropped += 1

    # -- the sampler -----------------------------------------------------------------------

    def thread(self, outside: str) -> ThreadRecord:
        """The calling thread's record (made on first use)."""
        ident = threading.get_ident()
        thread = self._threads.get(ident)
        if thread is None:
            with self._lock:
                name = threading.current_thread().name
                label = self.role if name == "MainThread" else f"{self.role} / {name}"
                thread = self._threads[ident] = ThreadRecord(ident, label, ident, outside)
        return thread

    def watched(self) -> ThreadRecord | None:
        """The calling thread's record, or None when it never ran a profiled pass."""
        return self._threads.get(threading.get_ident())

    def enter(self, thread: ThreadRecord) -> None:
        """The outermost profiled pass of ``thread`` starts: the sampler watches it."""
        with self._lock:
            thread.depth += 1
            if thread.depth == 1:
                thread.last = time.perf_counter_ns()
            self._open.set()
            if self._sampler is None:
                self._stop = threading.Event()
                self._sampler = threading.Thread(
                    target=self._run, args=(self._stop,), name="wds_cloud-profile", daemon=True
                )
                self._sampler.start()

    def leave(self, thread: ThreadRecord) -> None:
        """The pass entered with :meth:`enter` ends: charge its last stretch, forget the
        stage frames registered in it, write the dump of a worker."""
        with self._lock:
            thread.depth -= 1
            if thread.depth == 0:
                self._charge(thread, time.perf_counter_ns(), None)
                thread.last = 0
                for frame_id in thread.frames:
                    self._frames.pop(frame_id, None)
                thread.frames = []
                if all(t.depth == 0 for t in self._threads.values()):
                    self._open.clear()  # no pass open: the sampler idles until the next one
        if self.dump is not None:
            self.write_dump()

    def watch(self, thread: ThreadRecord, frame: FrameType, stage: str) -> None:
        """Charge the time spent in ``frame`` (a stage's generator frame) to ``stage``."""
        with self._lock:
            self._frames[id(frame)] = (frame, stage)
            thread.frames.append(id(frame))

    def unwatch(self, thread: ThreadRecord, count: int) -> None:
        """Forget the last ``count`` stage frames :meth:`watch` registered for ``thread``
        (stages run per batch inside a long pass: a global-order batch's)."""
        with self._lock:
            for frame_id in thread.frames[-count:]:
                self._frames.pop(frame_id, None)
            del thread.frames[-count:]

    def _label(self, stack: Stack, thread: ThreadRecord) -> str:
        best = ""
        frames, codes = self._frames, self._codes
        for frame_id, code in zip(*stack, strict=True):
            found = frames.get(frame_id)
            if found is not None:  # a registered stage frame (held there: its id is its own)
                return best or found[1]
            label = codes.get(code)
            if label is None:
                label = codes[code] = _rule(code)
            if label == _STOP:
                break
            if label and (not best or _PRIORITY[label] < _PRIORITY[best]):
                best = label
        return best or thread.outside

    def _charge(self, thread: ThreadRecord, now: int, stack: Stack | None) -> None:
        """Charge ``[thread.last, now]`` to what ``stack`` runs (None: the pass ended, or the
        thread runs no Python code: to the stage of the last look) and close the trace span of
        a stage left."""
        prev = thread.span
        if stack is not None:
            label = self._label(stack, thread)
        else:  # a pass shorter than one period may end before any look: say so
            label = prev[0] if prev else UNSAMPLED
        if label:
            key = (thread.name, label)
            self.stages[key] = self.stages.get(key, 0.0) + (now - thread.last) / 1e9
        if stack is None:
            if prev is not None and now > prev[1]:
                self._stage_span(prev[0], thread.tid, prev[1], now)
            thread.span = None
        elif prev is None:
            thread.span = (label, thread.last)
        elif label != prev[0]:
            if thread.last > prev[1]:
                self._stage_span(prev[0], thread.tid, prev[1], thread.last)
            thread.span = (label, thread.last)
        thread.last = now

    def sample(self) -> None:
        """Look once at every watched thread (the sampler thread calls this): read their
        stacks (:func:`thread_stacks`: plain data, no frame kept), then charge each."""
        with self._lock:
            watched = [t for t in self._threads.values() if t.depth > 0]
        stacks = thread_stacks([t.ident for t in watched]) if watched else {}
        now = time.perf_counter_ns()
        with self._lock:
            for thread in watched:  # one that entered since is charged at the next look
                if thread.depth > 0:
                    self._charge(thread, now, stacks.get(thread.ident))
            if self.bytes_read != self._bytes_seen:  # written when it changed
                self._bytes_seen = self.bytes_read
                self.counter("bytes read", self.bytes_read)
            if self._gauges:
                self._read_gauges()

    def _run(self, stop: threading.Event) -> None:
        """The sampler thread: a look every ``period`` seconds on average while a pass is
        open, nothing between passes (it waits for the next one: the thread lives as long as
        the recorder, so a loader's epochs do not each start one), a worker's dump every
        ``DUMP_EVERY`` seconds."""
        next_dump = time.monotonic() + DUMP_EVERY
        jitter = self._jitter
        while not stop.is_set():
            if not self._open.is_set():
                self._open.wait()  # between passes; stop() sets it too
                continue
            # a random period (uniform around PERIOD) cannot lock onto a periodic workload
            if stop.wait(self.period * (0.5 + jitter.random())) or os.getpid() != self.pid:
                return
            self.sample()
            if self.dump is not None and time.monotonic() >= next_dump:
                next_dump = time.monotonic() + DUMP_EVERY
                self.write_dump()

    def stop(self) -> None:
        """Stop the sampler thread (a new pass starts another)."""
        with self._lock:
            sampler, self._sampler = self._sampler, None
            self._stop.set()
            self._open.set()  # an idle sampler wakes to see the stop
        if sampler is not None and sampler is not threading.current_thread():
            sampler.join()

    # -- plain data ------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Totals as plain data (picklable, JSON-able but for tuple keys), after a fresh look
        at every watched thread (so they are up to date)."""
        self.sample()
        now = time.perf_counter_ns()
        with self._lock:
            return {
                "role": self.role,
                "rank": self.rank,
                "worker": self.worker,
                "pid": self.pid,
                "start_ns": self.start_ns,
                "now_ns": now,
                "timers": {k: list(v) for k, v in self.timers.items()},
                "stages": dict(self.stages),
                "threads": {t.tid: t.name for t in self._threads.values()},
                "items": self.items,
                "dropped": self.dropped,
            }

    def write_dump(self) -> None:
        """Write the totals (replacing the last ones) and the new events (appended) to the
        dump directory, for the main process to read (:func:`~wds_cloud.observe.report.read_dumps`)."""
        if self.dump is None:
            return
        snap = self.snapshot()
        new = self.trace_events(dumped=True)
        base = os.path.join(self.dump, str(self.pid))
        try:
            if new:
                with open(base + ".events", "ab") as f:
                    pickle.dump(new, f)
            with open(base + ".tmp", "wb") as f:
                pickle.dump(snap, f)
            os.replace(base + ".tmp", base + ".totals")
        except OSError:
            pass  # the main process is gone (and its directory with it)


class _State:
    """This process's recorder and the dump directories it made (one per profiled loader)."""

    def __init__(self) -> None:
        self.recorder: Recorder | None = None
        self.dirs: list[str] = []
        self.cleanup = False  # whether the directories are removed at exit


_STATE = _State()


def current() -> Recorder | None:
    """This process's recorder, or None while profiling is off here."""
    rec = _STATE.recorder
    if rec is not None and rec.pid != os.getpid():
        return None  # inherited through fork: the child makes its own
    return rec


def recorder(dump: str | None = None) -> Recorder:
    """This process's recorder, made on first use (in a DataLoader worker: ``worker <i>``,
    writing its totals to ``dump``)."""
    rec = current()
    if rec is None:
        rank, worker = _identity()
        role = "main" if worker < 0 else f"worker {worker}"
        rec = _STATE.recorder = Recorder(role, rank, worker, dump if worker >= 0 else None)
        if worker >= 0:
            _STATE.dirs = []
    return rec


def _identity() -> tuple[int, int]:
    """``(rank, worker)``; worker -1 outside a DataLoader worker. Torch is only consulted
    when already imported."""
    rank = 0
    text = os.environ.get("RANK")
    if text is not None and text.strip().isdigit():
        rank = int(text)
    else:
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank = dist.get_rank()
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    return rank, (info.id if info is not None else -1)


def dump_dir() -> str:
    """A new directory for the workers of one profiled loader, removed by :func:`reset` or
    when the process that made it exits."""
    import atexit
    import tempfile

    path = tempfile.mkdtemp(prefix="wds_cloud-profile-")
    if not _STATE.dirs and not _STATE.cleanup:
        _STATE.cleanup = True
        atexit.register(_remove_dirs)
    _STATE.dirs.append(path)
    return path


def _remove_dirs() -> None:
    import shutil

    if current() is not None or _STATE.recorder is None:  # the process that made them
        for path in _STATE.dirs:
            shutil.rmtree(path, ignore_errors=True)


def dump_dirs() -> list[str]:
    """The worker dump directories made in this process."""
    return list(_STATE.dirs)


def reset() -> None:
    """Forget everything measured in this process (stops the sampler)."""
    import shutil

    rec = current()
    if rec is not None:
        rec.stop()
    _STATE.recorder = None
    for path in _STATE.dirs:
        shutil.rmtree(path, ignore_errors=True)
    _STATE.dirs = []


def recorders_created() -> int:
    """How many recorders this process has made (0: profiling never switched on here)."""
    return Recorder.created
