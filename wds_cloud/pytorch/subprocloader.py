"""``make_loader(executor="subprocess-threads")``: the thread loader in one child process.

The whole pipeline of ``executor="threads"`` (shard reads, tar parsing, the decode pool,
batching) runs in one child process, so its threads never compete for the GIL with the
training loop's own Python threads. Each batch reaches the parent in one hand-off: the child
copies the batch's tensors into a slot of its shared-memory arena
(:class:`~wds_cloud.pytorch.shm.ShmCollate`, an anonymous ``memfd``, sent to the parent once
per arena over the control socket) and sends a small descriptor; the parent returns tensors
viewing the slot, freed for reuse when the batch's last tensor is gone. A batch that does not
fit a free slot (batches kept alive, no memfd) is pickled instead.

The parent holds a credit of ``prefetch`` batches: the child runs at most that far ahead of
the batch last handed out. With each batch the child sends its loader's resume state as of
that batch, so :meth:`SubprocessLoader.state_dict` returns the state after the batch last
handed out (gathered across ranks in the parent under ``torch.distributed``), and
:meth:`~SubprocessLoader.load_state_dict` makes the next pass in the child start there.

The child lives from the first ``iter()`` to :meth:`~SubprocessLoader.close` (or the loader's
garbage collection, or the parent's death: the child stops when its control socket closes);
leaving an iteration early stops the child's pass, not the child.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
import pickle
import traceback
import weakref
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle, send_handle
from typing import Any

from wds_cloud.errors import ConfigError, WdsCloudError
from wds_cloud.pytorch.shm import ShmCollate, view_batch

__all__ = ["SubprocessLoader", "subprocess_threads"]

_STOP_WAIT = 10.0  # seconds a child gets to leave after "stop" before it is killed


class _Abort(Exception):
    """The parent asked the child to stop its pass (or to stop)."""

    def __init__(self, stop: bool) -> None:
        super().__init__("abort")
        self.stop = stop


def _identity(x: Any) -> Any:
    return x


def _local_state(loader: Any) -> tuple[Any, bool, Any]:
    """``(state, gather, error)``: the loader's state in this process, whether the parent must
    gather it across ranks, or the error taking it raised."""
    from wds_cloud.pytorch.datasets import DataPipeline
    from wds_cloud.resume.loop import local_state
    from wds_cloud.resume.plan import tracking_on

    try:
        if isinstance(loader, DataPipeline):
            if not tracking_on(loader):
                return None, False, None
            state, gather = local_state(loader)
            return state, gather, None
        return loader.state_dict(), False, None
    except ConfigError as exc:
        return None, False, exc


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a :class:`WdsCloudError` with its text; the
    child's traceback is added as a note either way."""
    note = "in the subprocess-threads child:\n" + "".join(traceback.format_exception(exc))
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # any failure to round-trip: send the text instead
        exc = WdsCloudError(f"{type(exc).__name__}: {exc}")
    exc.add_note(note)
    return exc


class _Serve:
    """The child's side: one loader, passes run on request, batches sent with credits."""

    def __init__(self, conn: Connection, loader: Any, slots: int, prefetch: int) -> None:
        self.conn = conn
        self.loader = loader
        self.packer = ShmCollate(_identity, slots=slots)
        self.prefetch = prefetch
        self.arenas: dict[int, int] = {}  # fd -> arena id sent to the parent
        self.inflight = 0

    def handle(self, msg: tuple[Any, ...]) -> None:
        if msg[0] == "ack":
            self.inflight -= 1
        elif msg[0] in ("abort", "stop"):
            raise _Abort(msg[0] == "stop")

    def run(self, state: Any, epoch: int | None) -> None:
        loader = self.loader
        if state is not None:
            loader.load_state_dict(state)
        if epoch is not None and hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        self.inflight = 0
        batches = iter(loader)
        try:
            for batch in batches:
                taken = _local_state(loader)
                payload = self.place(batch)
                del batch
                while self.inflight >= self.prefetch:
                    self.handle(self.conn.recv())
                self.conn.send(("batch", payload, taken))
                self.inflight += 1
                while self.conn.poll():
                    self.handle(self.conn.recv())
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()
        report = loader.profile_report() if getattr(loader, "profiling", False) else None
        self.conn.send(("end", _local_state(loader), report))

    def place(self, batch: Any) -> tuple[Any, ...]:
        placed = self.packer.place(batch)
        if placed is None:
            return ("pickle", batch)
        arena, slot, specs, skeleton = placed
        aid = self.arenas.get(arena.fd)
        if aid is None:
            aid = self.arenas[arena.fd] = len(self.arenas)
            self.conn.send(("arena", aid, arena.size))
            send_handle(self.conn, arena.fd, os.getppid())
        return ("shm", aid, arena.offset(slot), arena.slot_bytes, slot, specs, skeleton)


def _child_main(
    conn: Connection,
    parent_end: Connection,
    factory: Callable[[], Any],
    slots: int,
    prefetch: int,
    env: dict[str, str],
) -> None:
    """Entry point of the child process."""
    parent_end.close()  # forked with it: kept open, the parent's death would go unnoticed
    os.environ.update(env)
    try:
        serve = _Serve(conn, factory(), slots, prefetch)
    except BaseException as exc:  # reported to the parent, which raises it
        conn.send(("error", _portable(exc)))
        return
    conn.send(("ready",))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        try:
            if msg[0] == "run":
                serve.run(msg[1], msg[2])
            elif msg[0] == "state":
                conn.send(("state", _local_state(serve.loader)))
            elif msg[0] == "stop":
                return
        except _Abort as abort:
            if abort.stop:
                return
            conn.send(("aborted",))
        except (EOFError, BrokenPipeError, ConnectionResetError):
            return
        except BaseException as exc:  # reported to the parent, which raises it
            conn.send(("error", _portable(exc)))


class _Child:
    """The parent's handle on the child: process, control socket, mapped arenas."""

    def __init__(self, proc: Any, conn: Connection) -> None:
        self.proc = proc
        self.conn = conn
        self.arenas: dict[int, mmap.mmap] = {}
        self.busy = False  # a pass is running

    def recv(self) -> tuple[Any, ...]:
        while True:
            try:
                msg: tuple[Any, ...] = self.conn.recv()
            except (EOFError, OSError) as exc:
                code = self.proc.exitcode if not self.proc.is_alive() else None
                self.busy = False
                raise WdsCloudError(
                    f"subprocess-threads loader: the child process (pid {self.proc.pid}) "
                    f"died (exit code {code})"
                ) from exc
            if msg[0] != "arena":
                return msg
            fd = recv_handle(self.conn)
            try:
                self.arenas[msg[1]] = mmap.mmap(fd, msg[2])
            finally:
                os.close(fd)

    def unpack(self, payload: tuple[Any, ...]) -> Any:
        if payload[0] == "pickle":
            return payload[1]
        _, aid, start, length, slot, specs, skeleton = payload
        return view_batch(self.arenas[aid], start, length, slot, specs, skeleton)

    def drop(self, payload: tuple[Any, ...]) -> None:
        """Free the slot of a batch read and never handed out."""
        if payload[0] == "shm":
            self.arenas[payload[1]][payload[4]] = 0

    def abort(self) -> None:
        """Stop the pass in progress; the batches still on their way are dropped."""
        if not self.busy:
            return
        self.conn.send(("abort",))
        while True:
            msg = self.recv()
            if msg[0] == "batch":
                self.drop(msg[1])
            elif msg[0] in ("aborted", "end", "error"):
                break
        self.busy = False

    def stop(self) -> None:
        """End the child (politely, then by its pid) and unmap its arenas."""
        proc = self.proc
        try:
            self.conn.send(("stop",))
        except OSError:
            pass
        proc.join(_STOP_WAIT)
        if proc.is_alive():
            proc.kill()
            proc.join()
        self.conn.close()
        proc.close()
        for mm in self.arenas.values():
            try:
                mm.close()
            except BufferError:  # batches still alive view it: unmapped with them
                pass
        self.arenas.clear()


def _stop_child(child: _Child) -> None:
    child.stop()


class SubprocessLoader:
    """Iterate the loader that ``factory()`` builds, run in one child process.

    Args:
        factory: a picklable callable returning the loader (under ``make_loader``: a
            ``make_loader(..., executor="threads")`` call); called once, in the child.
        prefetch: batches the child may run ahead of the one last handed out.
        slots: shared-memory slots (batches in flight or held before the pickled path).
        multiprocessing_context: how the child starts (``"fork"``, ``"spawn"``,
            ``"forkserver"``; None: multiprocessing's default, as ``DataLoader``).
        length: what ``len()`` returns (None: ``len()`` raises ``TypeError``).
        profiling: whether the child's loader profiles (:meth:`profile_report`).
        pin: applied to each batch in the parent as it arrives (``pin_batch``).
    """

    def __init__(
        self,
        factory: Callable[[], Any],
        *,
        prefetch: int = 2,
        slots: int | None = None,
        multiprocessing_context: str | None = None,
        length: int | None = None,
        profiling: bool = False,
        pin: Callable[[Any], Any] | None = None,
    ) -> None:
        if prefetch < 1:
            raise ConfigError(f"SubprocessLoader: prefetch must be >= 1, got {prefetch}")
        self.factory = factory
        self.prefetch = prefetch
        self.slots = slots if slots is not None else prefetch + 2
        self.context = multiprocessing_context
        self.length = length
        self.profiling = profiling
        self.pin = pin
        self.resumable = True
        self._child: _Child | None = None
        self._stopper: weakref.finalize[Any, Any] | None = None
        self._epoch: int | None = None
        self._pending: dict[str, Any] | None = None  # loaded, for the next pass
        self._taken: tuple[Any, bool, Any] | None = None  # after the batch last handed out
        self._report: Any = None
        self._owner: object | None = None  # the iteration in progress

    def __len__(self) -> int:
        if self.length is None:
            raise TypeError("this SubprocessLoader has no length (make_loader: epoch_size=)")
        return self.length

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return self._child.proc.pid if self._child is not None else None

    def _start(self) -> _Child:
        if self._child is not None:
            return self._child
        from wds_cloud.core.shards import node_info

        rank, world = node_info()
        env = {"RANK": str(rank), "WORLD_SIZE": str(world)} if world > 1 else {}
        ctx: Any = multiprocessing.get_context(self.context)  # typeshed: BaseContext lacks Process
        mine, theirs = ctx.Pipe(duplex=True)
        proc = ctx.Process(
            target=_child_main,
            args=(theirs, mine, self.factory, self.slots, self.prefetch, env),
            name="wds_cloud-subprocess-threads",
            daemon=True,
        )
        proc.start()
        theirs.close()
        child = _Child(proc, mine)
        self._stopper = weakref.finalize(self, _stop_child, child)
        msg = child.recv()
        if msg[0] == "error":
            self.close()
            raise msg[1]
        self._child = child
        return child

    def close(self) -> None:
        """Stop the child process and free its shared memory (also done on garbage
        collection); the next ``iter()`` starts a new child."""
        self._child = None
        self._owner = None
        if self._stopper is not None:
            self._stopper()
            self._stopper = None

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch of the next pass (forwarded to the child's loader)."""
        self._epoch = epoch

    def state_dict(self) -> dict[str, Any]:
        """The loader's resume state after the batch last handed out (``docs/resume.md``);
        under ``torch.distributed`` every rank must call it at the same step.

        Raises:
            ConfigError: the loader cannot be resumed (names why).
        """
        from wds_cloud.resume.loop import gather_states

        if self._pending is not None:
            return self._pending
        taken = self._taken
        if taken is None:
            child = self._start()
            if child.busy:
                raise ConfigError(
                    "subprocess-threads loader: state_dict() between iter() and its first "
                    "batch; take it after a batch, or before iter()"
                )
            child.conn.send(("state",))
            msg = child.recv()
            if msg[0] == "error":
                raise msg[1]
            taken = msg[1]
        state, gather, error = taken
        if error is not None:
            raise error
        if state is None:
            raise ConfigError(
                "subprocess-threads loader keeps no resume state (tracking switched off with "
                "resumable=False / WDS_CLOUD_RESUMABLE=0)"
            )
        return gather_states(state) if gather else dict(state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` deliver what ``state`` did not."""
        from wds_cloud.resume.state import check_state

        self._pending = check_state(dict(state))
        self._taken = None

    def profile_report(self) -> Any:
        """The child's :class:`~wds_cloud.observe.report.ProfileReport` as of the end of the
        last complete pass (None before one)."""
        return self._report

    def __iter__(self) -> Iterator[Any]:
        child = self._start()
        child.abort()  # an iteration left behind without being closed
        child.conn.send(("run", self._pending, self._epoch))
        # until the first batch, the state is the one loaded (or none: state_dict() refuses)
        self._taken = None if self._pending is None else (self._pending, False, None)
        self._pending = None
        child.busy = True
        self._owner = token = object()
        return self._batches(child, token)

    def _batches(self, child: _Child, token: object) -> Iterator[Any]:
        try:
            while True:
                msg = child.recv()
                if msg[0] == "batch":
                    batch = child.unpack(msg[1])
                    if self.pin is not None:
                        batch = self.pin(batch)
                    self._taken = msg[2]
                    child.conn.send(("ack",))
                    yield batch
                elif msg[0] == "end":
                    child.busy = False
                    self._taken, self._report = msg[1], msg[2]
                    return
                elif msg[0] == "error":
                    child.busy = False
                    raise msg[1]
        finally:
            if self._owner is token and self._child is child:
                child.abort()


def subprocess_threads(
    make_loader: Callable[..., Any], args: dict[str, Any], pin_batch: Callable[[Any], Any]
) -> SubprocessLoader:
    """``make_loader(**args, executor="subprocess-threads")``: ``make_loader(...,
    executor="threads")`` built and run in one child, as a :class:`SubprocessLoader`.

    ``args`` are ``make_loader``'s arguments by name (``webdataset_kw`` among them). The
    device side stays in the parent: ``make_loader`` wraps the result in a ``DevicePrefetcher``
    for ``device=``; without a device, ``pin_memory=`` pins each batch (``pin_batch``) as it
    arrives (CUDA only).

    Raises:
        ConfigError: what ``executor="threads"`` refuses (``num_workers < 1``,
            ``order="global"``).
    """
    import functools
    import logging
    import math

    import torch

    from wds_cloud.observe.profile import profile_enabled
    from wds_cloud.pytorch.threadloader import check_threads

    kw = dict(args)
    check_threads(kw["num_workers"], kw["order"])
    urls = kw.pop("urls")
    for name in ("device", "prefetch_to_device", "pin_memory"):  # the parent's side
        kw.pop(name)
    kw.update(kw.pop("webdataset_kw"), executor="threads")
    epoch_size = kw["epoch_size"]
    pin = args["pin_memory"] and args["device"] is None
    if pin and not torch.cuda.is_available():
        logging.getLogger(__name__).warning(
            "make_loader(pin_memory=True): CUDA is not available; batches are not pinned"
        )
        pin = False
    return SubprocessLoader(
        functools.partial(make_loader, urls, **kw),
        prefetch=kw["prefetch_factor"],
        length=None if epoch_size is None else math.ceil(epoch_size / kw["batch_size"]),
        profiling=profile_enabled(kw["profile"]),
        pin=pin_batch if pin else None,
    )
