"""What a test made, told apart from what other processes and earlier tests made.

Leak checks look only at their own test's traces, so a user's DataLoader running beside the
suite, another pytest-xdist worker or a thread left over from an earlier test never fails them:

- :class:`ProcessTree`: the PIDs of this process and of every process below it seen while a
  check runs (``/proc`` read every ``interval`` seconds, and once more at the end).
- :func:`shm_left`: ``/dev/shm`` segments new since a snapshot that one of those processes made
  (torch names its segments ``torch_<pid>_…``) or that this process still holds open or mapped.
- :class:`NewThreads`: threads started since it was made (Thread objects, not names or counts).
- :func:`refused_port`: a port nothing listens on for as long as the block runs (held bound, so
  no other process can take it between the choice and the connection).
- :class:`Detached`: a process that belongs to no process of the test, making ``/dev/shm``
  segments when asked (the proof that the checks leave other programs' traces alone).

Linux only (``/proc``, ``/dev/shm``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from types import TracebackType

SHM = "/dev/shm"

#: the creator's PID in a segment name: ``torch_<pid>_<random>_<n>`` (torch's own scheme)
_NAME_PID = re.compile(r"^[A-Za-z]+_(\d+)_")


def descendants(pid: int) -> list[int]:
    """PIDs of every process below ``pid`` now (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


class ProcessTree:
    """This process and every process below it seen between ``__enter__`` and ``__exit__``.

    A child that starts and ends between two looks (``interval`` seconds apart) is missed: the
    processes a test starts to do work (DataLoader workers, pipes) live far longer.
    """

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.pids: set[int] = {os.getpid()}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def look(self) -> None:
        """Add the processes below this one now."""
        self.pids.update(descendants(os.getpid()))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.look()

    def __enter__(self) -> ProcessTree:
        self.look()
        self._thread = threading.Thread(target=self._run, name="test-process-tree", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.look()


def shm_segments() -> set[str]:
    """Names in ``/dev/shm`` now."""
    return set(os.listdir(SHM)) if os.path.isdir(SHM) else set()


def name_pid(name: str) -> int | None:
    """The creator's PID a segment name carries (``torch_<pid>_…``), or None."""
    match = _NAME_PID.match(name)
    return int(match.group(1)) if match else None


def held_here() -> set[str]:
    """``/dev/shm`` names this process has open or mapped now."""
    held = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(SHM + "/"):
                held.add(target[len(SHM) + 1 :].removesuffix(" (deleted)"))
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.rstrip("\n").split(maxsplit=5)  # address perms offset dev inode path
            if len(fields) == 6 and fields[5].startswith(SHM + "/"):
                held.add(fields[5][len(SHM) + 1 :].removesuffix(" (deleted)"))
    return held


def shm_left(before: set[str], tree: ProcessTree) -> set[str]:
    """Segments not in ``before`` that a process of ``tree`` made or this process holds.

    A name without a PID that no live process of the tree holds cannot be told from another
    program's, and is left out.
    """
    new = shm_segments() - before
    held = held_here() if new else set()
    return {n for n in new if name_pid(n) in tree.pids or n in held}


class NewThreads:
    """The threads of this process started after this object was made."""

    def __init__(self) -> None:
        self.before = set(threading.enumerate())

    def __call__(self, prefix: str | tuple[str, ...] = "") -> list[threading.Thread]:
        """Those still alive whose name starts with ``prefix`` (any of them, for a tuple)."""
        return [
            t for t in threading.enumerate() if t not in self.before and t.name.startswith(prefix)
        ]


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections while the block runs: bound by this process,
    never listened on, so no other process can take it in the meantime."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


# Forks, the parent exits (so the grandchild belongs to no process of the test), prints its PID,
# then for each line read: "make NAME" creates /dev/shm/NAME, "drop NAME" removes it; it exits at
# the end of its input.
_DETACHED = """
import os, sys
if os.fork():
    os._exit(0)
os.setsid()
print(os.getpid(), flush=True)
for line in sys.stdin:
    verb, _, name = line.strip().partition(" ")
    if verb == "make":
        os.close(os.open("/dev/shm/" + name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600))
    else:
        os.unlink("/dev/shm/" + name)
    print("done", flush=True)
"""


def _running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, exited and not yet reaped by init, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


class Detached:
    """A process detached from this one (its parent exited at once), driven line by line.

    :meth:`make_segment` makes ``/dev/shm/torch_<its pid>_1877_<n>``, as a user's DataLoader
    beside the suite would; :meth:`end` removes them and ends the process.
    """

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _DETACHED],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        self.pid = int(self._proc.stdout.readline())
        self._proc.wait(timeout=30)  # the intermediate parent, gone: the PID is orphaned
        self.made: list[str] = []

    def _ask(self, line: str) -> None:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()
        if self._proc.stdout.readline().strip() != "done":
            raise RuntimeError(f"the detached process {self.pid} did not do {line!r}")

    def make_segment(self) -> str:
        """Make one more segment; returns its name."""
        name = f"torch_{self.pid}_1877_{len(self.made)}"
        self._ask(f"make {name}")
        self.made.append(name)
        return name

    def end(self) -> None:
        """Remove the segments it made, end its input and wait for it to exit (10 s, then
        SIGKILL)."""
        try:
            for name in self.made:
                self._ask(f"drop {name}")
        finally:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            deadline = time.monotonic() + 10
            while _running(self.pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            if _running(self.pid):
                os.kill(self.pid, signal.SIGKILL)
