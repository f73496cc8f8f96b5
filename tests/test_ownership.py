"""The leak checks look only at what their own test made (``tests/support/ownership.py``).

An unrelated process (``unrelated_process``: detached, so it is nobody's child here) makes a
``/dev/shm`` segment named as torch names them while a check runs: the check passes. A segment left by this
process, or by a child of it that has exited since, fails it. A thread alive before a check
is not the check's; a port held by :func:`refused_port` cannot be taken by another process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.support.ownership import (
    SHM,
    Detached,
    NewThreads,
    ProcessTree,
    descendants,
    held_here,
    name_pid,
    refused_port,
    shm_left,
    shm_segments,
)

pytestmark = pytest.mark.skipif(not os.path.isdir(SHM), reason="needs /dev/shm and /proc")

# Makes /dev/shm/NAME (NAME from argv, "{pid}" replaced by its own PID), prints the name and
# waits for one line on stdin before it exits, leaving the segment behind.
LEAKING_CHILD = """
import os, sys
name = sys.argv[1].replace("{pid}", str(os.getpid()))
os.close(os.open("/dev/shm/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
print(name, flush=True)
sys.stdin.readline()
"""


def _remove(name: str) -> None:
    try:
        os.unlink(f"{SHM}/{name}")
    except FileNotFoundError:
        pass


def test_the_pid_in_a_segment_name() -> None:
    assert name_pid("torch_4242_1877_0") == 4242
    assert name_pid("psm_4242abcd") is None
    assert name_pid("sem.mp-4242_0") is None


def test_an_unrelated_process_s_segment_during_the_check_is_not_the_test_s(
    unrelated_process: Detached,
) -> None:
    assert unrelated_process.pid not in descendants(os.getpid())
    before = shm_segments()
    with ProcessTree(interval=0.01) as tree:
        name = unrelated_process.make_segment()  # made while the check runs, and left there
        time.sleep(0.05)
    assert name == f"torch_{unrelated_process.pid}_1877_0" and name in shm_segments() - before
    assert unrelated_process.pid not in tree.pids
    assert shm_left(before, tree) == set()


def test_a_segment_a_child_left_behind_fails_the_check() -> None:
    before = shm_segments()
    with ProcessTree(interval=0.01) as tree:
        child = subprocess.Popen(
            [sys.executable, "-c", LEAKING_CHILD, "torch_{pid}_1877_0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdin is not None
        name = child.stdout.readline().strip()
        try:
            deadline = time.monotonic() + 10
            while child.pid not in tree.pids and time.monotonic() < deadline:
                time.sleep(0.01)
            child.stdin.write("\n")
            child.stdin.close()
            child.wait(timeout=30)  # gone, its segment still there
        except BaseException:
            _remove(name)
            raise
    try:
        assert name_pid(name) == child.pid
        assert shm_left(before, tree) == {name}
    finally:
        _remove(name)


def test_a_segment_this_process_holds_fails_the_check() -> None:
    """Named with no PID, but held open here: this process's."""
    name = f"psm_test_{os.getpid()}x"
    before = shm_segments()
    with ProcessTree() as tree:
        fd = os.open(f"{SHM}/{name}", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        assert name in held_here()
        assert shm_left(before, tree) == {name}
    finally:
        os.close(fd)
        _remove(name)
    assert shm_left(before, tree) == set()


def test_a_thread_alive_before_the_check_is_not_the_check_s() -> None:
    stop = threading.Event()
    earlier = threading.Thread(target=stop.wait, name="wds-readahead earlier", daemon=True)
    earlier.start()
    try:
        new = NewThreads()
        assert new("wds-readahead") == []
        mine = threading.Thread(target=stop.wait, name="wds-readahead mine", daemon=True)
        mine.start()
        assert new("wds-readahead") == [mine]
        assert new("wds-s3") == []
    finally:
        stop.set()
    earlier.join()
    mine.join()
    assert new() == []


def test_a_refused_port_cannot_be_taken_by_another_process() -> None:
    take = "import socket, sys; socket.socket().bind(('127.0.0.1', int(sys.argv[1])))"
    with refused_port() as port:
        other = subprocess.run(
            [sys.executable, "-c", take, str(port)], capture_output=True, text=True, timeout=60
        )
        assert other.returncode != 0 and "Address already in use" in other.stderr
        with socket.socket() as s, pytest.raises(ConnectionRefusedError):
            s.connect(("127.0.0.1", port))
