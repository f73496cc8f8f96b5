"""The sampler's looks (``observe.profile``): no garbage collection (so no finalizer) runs
inside ``sys._current_frames()`` (a finalizer there can deadlock CPython 3.11; see
``current_frames``), a look keeps no frame, reads each stack at one instant, and a process
forked during a look collects again."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from wds_cloud.observe.profile import current_frames, fork_hook, gc_off, gc_restore, thread_stacks


class _Cycle:
    """Cyclic garbage whose finalizer notes the functions on the stack it runs under."""

    seen: list[set[str]] = []

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        names, frame = set(), sys._getframe(1)
        while frame is not None:
            names.add(frame.f_code.co_name)
            frame = frame.f_back
        _Cycle.seen.append(names)


@pytest.fixture
def eager_gc() -> Iterator[None]:
    """A collection at nearly every allocation, while cyclic garbage with finalizers waits."""
    old = gc.get_threshold()
    gc.collect()
    gc.set_threshold(1, 1, 1)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.collect()
        _Cycle.seen.clear()


def _finalizers_inside(call: Callable[[], Any], name: str) -> int:
    """How many finalizers ran while ``call`` (a function named ``name``) was on the stack."""
    _Cycle.seen.clear()
    for _ in range(300):
        _Cycle()
        call()
    return sum(name in names for names in _Cycle.seen)


def test_no_collection_runs_inside_the_call(eager_gc: None) -> None:
    def plain() -> Any:
        return sys._current_frames()

    assert _finalizers_inside(plain, "plain") > 0  # the hazard is real without the guard
    assert _finalizers_inside(current_frames, "current_frames") == 0


def test_the_collector_is_left_as_it_was() -> None:
    assert gc.isenabled()
    assert isinstance(current_frames(), dict) and gc.isenabled()
    gc.disable()
    try:
        current_frames()
        assert not gc.isenabled()
    finally:
        gc.enable()


class _Held:
    """An object only a thread's local variable holds."""


def test_a_look_keeps_no_frame_alive() -> None:
    """A look drops the frames it took before returning: ``sys._current_frames()`` includes
    the looking thread's own frame, whose locals hold the dict, so a dict left behind was cyclic
    garbage that kept every thread's frames and their locals (a DataLoader iterator, whose
    shutdown then waited out its workers' timeouts) until a collection."""
    from wds_cloud.observe.profile import Recorder

    rec = Recorder("main", 0, -1, None)
    started, release = threading.Event(), threading.Event()
    ref: list[weakref.ref[_Held]] = []

    def hold() -> None:
        held = _Held()
        ref.append(weakref.ref(held))
        started.set()
        release.wait()

    worker = threading.Thread(target=hold)
    gc.collect()
    gc.disable()  # only reference counting frees what follows
    try:
        worker.start()
        started.wait()
        rec.sample()
        release.set()
        worker.join()
        assert ref[0]() is None, "a look kept the thread's frame (and its locals) alive"
    finally:
        gc.enable()
        release.set()


# -- a look reads each stack in one step ------------------------------------------------------


def _deep(n: int) -> int:
    return n if n == 0 else _deep(n - 1)


def _inner() -> Iterator[int]:
    while True:
        yield _deep(3)


def _outer() -> Iterator[int]:
    yield from _inner()


def _consistent(names: list[str]) -> bool:
    """A stack of :func:`_pipeline`'s thread as it can be at one instant: the generators'
    callers are under them."""
    if "_deep" in names and "_inner" not in names:
        return False
    if "_inner" in names and "_outer" not in names:
        return False
    return "_outer" not in names or "_pipeline" in names


def _pipeline(stop: threading.Event) -> None:
    for _ in _outer():
        if stop.is_set():
            return


def _python_walk(ident: int) -> list[str]:
    """What a look did before: ``f_back`` followed by a Python loop (one call per step)."""
    frames = sys._current_frames()
    frame, names = frames[ident], []
    frames.clear()
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return names


def _thread_walk(ident: int) -> list[str]:
    return [code.co_name for code in thread_stacks([ident])[ident][1]]


def _reads_under_switches(walk: Callable[[int], list[str]], reads: int) -> list[list[str]]:
    """``reads`` stacks of a thread running generators, read by ``walk`` with the GIL handed
    to that thread at every call the reading thread makes (a profile hook that sleeps)."""
    stop = threading.Event()
    worker = threading.Thread(target=_pipeline, args=(stop,))
    worker.start()
    seen: list[list[str]] = []
    try:
        sys.setprofile(lambda frame, event, arg: time.sleep(0) if "call" in event else None)
        try:
            for _ in range(reads):
                seen.append(walk(worker.ident or 0))
        finally:
            sys.setprofile(None)
    finally:
        stop.set()
        worker.join()
    return seen


def test_a_stack_is_read_at_one_instant() -> None:
    """The walked thread runs between two steps of a Python loop over ``f_back``: its
    generators are suspended and resumed under the walk, which then reads a stack that never
    was (here: a generator without its caller; CPython 3.11 sampling profilers walking that way
    have crashed). :func:`thread_stacks` reads every stack in one C-level step."""
    before = _reads_under_switches(_python_walk, 60)
    assert any(not _consistent(names) for names in before), before  # the hazard is real
    after = _reads_under_switches(_thread_walk, 60)
    assert all(_consistent(names) for names in after), [n for n in after if not _consistent(n)]
    assert any("_inner" in names for names in after)  # the generators were on the stacks read


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_during_a_look_collects_again() -> None:
    """A look switches the collector off; a process forked then (a DataLoader worker started
    while the sampler looks) would never collect cycles: the fork hook turns it back on."""
    fork_hook()
    enabled = gc_off()
    try:
        pid = os.fork()
        if pid == 0:
            os._exit(0 if gc.isenabled() else 1)
    finally:
        gc_restore(enabled)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child runs with the collector off"
    assert gc.isenabled()
