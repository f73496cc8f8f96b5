"""``ProcessLocal``, the per-process client holder of the openers, with real processes."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable
from typing import Any

import pytest

from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.clients import ProcessLocal
from wds_cloud.openers.gcs.opener import GcsOpener
from wds_cloud.openers.http.opener import HttpOpener
from wds_cloud.openers.s3.opener import S3Opener

fork = multiprocessing.get_context("fork")
spawn = multiprocessing.get_context("spawn")


class Made:
    """A value that remembers the process that made it."""

    def __init__(self) -> None:
        self.pid = os.getpid()


def _in_child(ctx: Any, target: Callable[..., Any], *args: Any) -> Any:
    """``target(*args)`` run in a child process of ``ctx``; its result (or its error)."""
    with ctx.Pool(1) as pool:
        return pool.apply_async(target, args).get(timeout=60)


def _made_here(holder: ProcessLocal[Made]) -> tuple[int, int, bool]:
    """(the pid of the value the child gets, the child's pid, whether it had one before)."""
    before = holder.peek() is not None
    return holder.get(Made).pid, os.getpid(), before


# the holder a forked child inherits as it is in the parent's memory
_INHERITED: ProcessLocal[Made] = ProcessLocal()


def _made_in_forked_child() -> tuple[int, int, bool]:
    return _made_here(_INHERITED)


def test_a_forked_child_makes_its_own_value() -> None:
    parent = _INHERITED.get(Made)
    assert parent.pid == os.getpid() and _INHERITED.get(Made) is parent  # made once
    made_pid, child_pid, before = _in_child(fork, _made_in_forked_child)
    assert before is False  # the parent's value is not the child's
    assert made_pid == child_pid != os.getpid()
    assert _INHERITED.get(Made) is parent  # the parent keeps its own


def test_a_spawned_child_gets_an_empty_holder_and_makes_its_own() -> None:
    holder: ProcessLocal[Made] = ProcessLocal()
    holder.get(Made)
    made_pid, child_pid, before = _in_child(spawn, _made_here, holder)
    assert before is False
    assert made_pid == child_pid != os.getpid()


def test_pickling_drops_the_value() -> None:
    holder: ProcessLocal[bytes] = ProcessLocal()
    holder.get(lambda: b"secret-connection-state")
    blob = pickle.dumps(holder)
    assert b"secret-connection-state" not in blob
    clone = pickle.loads(blob)
    assert clone.peek() is None
    assert clone.get(lambda: b"new") == b"new"
    assert holder.peek() == b"secret-connection-state"


_LOCKED: ProcessLocal[Made] = ProcessLocal()


def test_a_lock_held_by_a_parent_thread_at_fork_does_not_block_the_child() -> None:
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with _LOCKED._process_lock(os.getpid()):
            taken.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert taken.wait(10)
        proc = fork.Process(target=_LOCKED.get, args=(Made,))
        proc.start()
        proc.join(30)
        stuck = proc.is_alive()
        if stuck:
            proc.kill()
            proc.join()
        assert not stuck and proc.exitcode == 0
    finally:
        release.set()
        thread.join()


def test_threads_share_one_value_made_once_and_a_failure_keeps_nothing() -> None:
    holder: ProcessLocal[Made] = ProcessLocal()
    calls = []
    gate = threading.Barrier(8)

    def make() -> Made:
        calls.append(1)
        return Made()

    def ask() -> Made:
        gate.wait()
        return holder.get(make)

    results: list[Made] = []
    threads = [threading.Thread(target=lambda: results.append(ask())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len({id(r) for r in results}) == 1

    failing: ProcessLocal[Made] = ProcessLocal()

    def broken() -> Made:
        raise OSError("no route")

    with pytest.raises(OSError, match="no route"):
        failing.get(broken)
    assert failing.peek() is None
    assert isinstance(failing.get(Made), Made)


# -- the openers: each keeps its clients in holders -------------------------------------------

OPENERS: dict[str, Callable[[], Any]] = {
    "s3": lambda: S3Opener(endpoint_url="http://127.0.0.1:9", region="us-east-1"),
    "gcs": lambda: GcsOpener(endpoint="http://127.0.0.1:9", project="p"),
    "ais": lambda: AisOpener(endpoint="http://127.0.0.1:9"),
    "http": HttpOpener,
}
_OPENER: Any = None
_PARENT_CLIENTS: list[Any] = []


def _clients(opener: Any) -> list[Any]:
    """Every client the opener makes (none of them connects yet)."""
    if isinstance(opener, HttpOpener):
        return [opener.client()]
    return [opener.client(), opener.read_client()]


def _child_clients_are_new() -> list[bool]:
    return [new is not old for new, old in zip(_clients(_OPENER), _PARENT_CLIENTS, strict=True)]


def _pickled_opener_clients(blob: bytes) -> int:
    opener = pickle.loads(blob)
    return len(_clients(opener))


@pytest.mark.parametrize("name", list(OPENERS))
def test_opener_clients_are_per_process_and_never_pickled(name: str) -> None:
    global _OPENER
    _OPENER = opener = OPENERS[name]()
    parent = _clients(opener)
    _PARENT_CLIENTS[:] = parent
    assert all(a is b for a, b in zip(_clients(opener), parent, strict=True))  # made once
    assert _in_child(fork, _child_clients_are_new) == [True] * len(parent)
    blob = pickle.dumps(opener)
    for client in parent:
        assert type(client).__module__.encode() not in blob, type(client)
    clone = pickle.loads(blob)
    assert clone.config == opener.config
    holders = [h for h in vars(clone).values() if isinstance(h, ProcessLocal)]
    assert holders and all(h.peek() is None for h in holders)
    assert _in_child(spawn, _pickled_opener_clients, blob) == len(parent)
