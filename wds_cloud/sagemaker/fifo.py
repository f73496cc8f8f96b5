"""Open a SageMaker Pipe-mode FIFO without ever blocking forever.

A plain ``open(fifo, "rb")`` blocks until a writer opens the other end, with no timeout. Here the
read end is opened with ``O_NONBLOCK`` (which returns at once) and ``poll`` waits, bounded, for
the writer's first bytes or its hang-up. Until a writer has connected, a non-blocking read
returns ``b""`` exactly as at end of file, so the stream is handed out only after ``poll``
reported data or a hang-up; from then on ``b""`` really means the writer closed its end.

Closing the stream closes the read end: a writer still writing gets ``EPIPE`` (or is killed by
``SIGPIPE`` if it does not ignore that signal) instead of blocking on a full pipe.
"""

from __future__ import annotations

import io
import os
import select
import stat
import time
from typing import Any

from wds_cloud.errors import ShardNotFoundError, ShardOpenError, ShardReadError

DEFAULT_OPEN_TIMEOUT = 600.0
_POLL_MASK = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR


class FifoReader(io.RawIOBase):
    """The read end of a FIFO as a raw binary stream, with an optional stall timeout.

    Args:
        fd: a file descriptor opened ``O_RDONLY | O_NONBLOCK`` after a writer connected.
        path: the FIFO path, named in errors.
        read_timeout: seconds without any byte after which a read raises (``None``: wait as
            long as the writer keeps its end open).
    """

    def __init__(self, fd: int, path: str, read_timeout: float | None = None) -> None:
        super().__init__()
        self._fd = fd
        self.path = path
        self.read_timeout = read_timeout
        self.offset = 0
        self._poller = select.poll()
        self._poller.register(fd, _POLL_MASK)

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def readinto(self, buffer: Any) -> int:
        if self.closed:
            raise ValueError("read from a closed FifoReader")
        if len(buffer) == 0:
            return 0
        while True:
            try:
                n = os.readv(self._fd, [buffer])
            except BlockingIOError:
                timeout_ms = None if self.read_timeout is None else int(self.read_timeout * 1000)
                if not self._poller.poll(timeout_ms):
                    raise ShardReadError(
                        f"SageMaker Pipe-mode FIFO {self.path}: no data for "
                        f"{self.read_timeout} s (writer stalled)",
                        url=self.path,
                        offset=self.offset,
                    ) from None
                continue
            except OSError as exc:
                raise ShardReadError(
                    f"cannot read FIFO {self.path}: {exc}", url=self.path, offset=self.offset
                ) from exc
            self.offset += n
            return n

    def close(self) -> None:
        if not self.closed:
            try:
                self._poller.unregister(self._fd)
            finally:
                os.close(self._fd)
        super().close()


def _wait_exists(path: str, deadline: float) -> os.stat_result:
    delay = 0.01
    while True:
        try:
            return os.stat(path)
        except FileNotFoundError:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return os.stat(path)  # raises FileNotFoundError for the caller
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.25)


def open_fifo(
    path: str,
    *,
    timeout: float = DEFAULT_OPEN_TIMEOUT,
    read_timeout: float | None = None,
) -> io.RawIOBase:
    """Open a Pipe-mode FIFO for reading, waiting at most ``timeout`` seconds in all.

    The wait covers both the FIFO appearing (SageMaker creates ``<channel>_<n+1>`` only after
    epoch ``n``) and a writer connecting. A regular file at ``path`` is opened as it is (handy
    to replay a captured stream).

    Args:
        path: the FIFO, e.g. ``/opt/ml/input/data/train_0``.
        timeout: seconds to wait for the FIFO and its writer.
        read_timeout: see :class:`FifoReader`.

    Raises:
        ShardNotFoundError: ``path`` did not appear within ``timeout``.
        ShardOpenError: no writer connected within ``timeout``, or ``path`` is neither a FIFO
            nor a regular file.
    """
    deadline = time.monotonic() + timeout
    try:
        st = _wait_exists(path, deadline)
    except FileNotFoundError as exc:
        raise ShardNotFoundError(
            f"SageMaker Pipe-mode FIFO {path} did not appear within {timeout} s (is the channel "
            "in Pipe mode, and was the previous epoch's FIFO read to the end or closed?)",
            url=path,
        ) from exc
    if stat.S_ISREG(st.st_mode):
        return open(path, "rb", buffering=0)
    if not stat.S_ISFIFO(st.st_mode):
        raise ShardOpenError(f"{path} is neither a FIFO nor a regular file", url=path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ShardOpenError(f"cannot open FIFO {path}: {exc}", url=path) from exc
    try:
        poller = select.poll()
        poller.register(fd, _POLL_MASK)
        remaining = max(0.0, deadline - time.monotonic())
        if not poller.poll(int(remaining * 1000)):
            raise ShardOpenError(
                f"no writer opened SageMaker Pipe-mode FIFO {path} within {timeout} s (each "
                "epoch's FIFO is written once; with DataLoader workers that are not "
                "persistent, call dataset.set_epoch(epoch) before each epoch)",
                url=path,
            )
        poller.unregister(fd)
        return FifoReader(fd, path, read_timeout)
    except BaseException:
        os.close(fd)
        raise
