"""Committing writers for local targets (see :meth:`LocalOpener.create`).

- :class:`AtomicFileWriter`: a regular file, written to ``.<name>.tmp-<pid>-<rand>`` next to it
  and ``fsync`` + ``os.replace``-d into place on ``close()``; every other ending removes the
  temporary file and leaves the final name untouched.
- :class:`DirectWriter`: a FIFO, a device or standard output, written in place (there is no
  name to publish atomically); ``close()`` flushes, ``abort()`` only stops writing.
"""

from __future__ import annotations

import os
import secrets
import stat
from typing import IO, Any

from wds_cloud.errors import UploadError
from wds_cloud.openers.streams.writer import CommittingWriter


class AtomicFileWriter(CommittingWriter):
    """Writes to a temporary file next to ``path``; ``close()`` renames it into place.

    ``close()`` flushes, fsyncs and ``os.replace``-s the temporary file to its final name, so
    readers see either nothing or the whole file. ``abort()``, leaving a ``with`` block with an
    exception, or garbage collection delete the temporary file.

    Args:
        path: final file name; its directory must exist.
        url: the URL shown in errors (defaults to ``path``).

    Raises:
        UploadError: the temporary file cannot be created.
    """

    def __init__(self, path: str | os.PathLike[str], *, url: str | None = None) -> None:
        self.path = self.name = os.fspath(path)
        url = url if url is not None else self.path
        directory, base = os.path.split(os.path.abspath(self.path))
        # The pid in the name tells which process left a temp file behind after a SIGKILL.
        self.temp_path = os.path.join(
            directory, f".{base}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        )
        try:
            self._file = open(self.temp_path, "xb", buffering=1 << 20)
        except FileNotFoundError as exc:
            raise UploadError(f"directory {directory!r} does not exist", url=url) from exc
        except OSError as exc:
            raise UploadError(f"cannot create a file in {directory!r}: {exc}", url=url) from exc
        super().__init__(url)

    def _write(self, view: memoryview) -> None:
        total = 0
        while total < len(view):
            total += self._file.write(view[total:]) or 0

    def _commit(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self.temp_path, self.path)

    def _discard(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass  # a failed flush of data being discarded anyway
        try:
            os.unlink(self.temp_path)
        except FileNotFoundError:
            pass

    def _error(self, exc: Exception, action: str) -> UploadError:
        target = self.path if action == "committing" else self.temp_path
        return UploadError(f"{action} {target!r} failed: {exc}", url=self.url)


class DirectWriter(CommittingWriter):
    """Writes straight into ``stream`` (a FIFO, a device, standard output).

    Args:
        stream: the open binary stream.
        url: the target as given.
        own: close ``stream`` when the writer ends (False for standard output).
    """

    def __init__(self, stream: IO[bytes], url: str, *, own: bool) -> None:
        self.name = url
        self._stream = stream
        self._own = own
        super().__init__(url)

    def _write(self, view: memoryview) -> None:
        self._stream.write(view)

    def _commit(self) -> None:
        self._stream.flush()
        if self._own:
            self._stream.close()

    def _discard(self) -> None:
        if self._own:
            try:
                self._stream.close()
            except OSError:
                pass  # unflushed bytes of a discarded stream

    def _error(self, exc: Exception, action: str) -> UploadError:
        return UploadError(f"{action} failed: {exc}", url=self.url)


def open_direct(path: str, url: str) -> DirectWriter | None:
    """A :class:`DirectWriter` when ``path`` is a FIFO or a device, else None.

    Raises:
        UploadError: ``path`` is a directory, or the FIFO or device cannot be opened.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # a new file (or an unreadable name: creating it will say why)
    if stat.S_ISDIR(mode):
        raise UploadError(f"{path!r} is a directory, not a file name", url=url)
    if stat.S_ISREG(mode):
        return None
    try:
        stream: Any = open(path, "wb")
    except OSError as exc:
        raise UploadError(f"cannot open {path!r} for writing: {exc}", url=url) from exc
    return DirectWriter(stream, url, own=True)


__all__ = ["AtomicFileWriter", "DirectWriter", "open_direct"]
