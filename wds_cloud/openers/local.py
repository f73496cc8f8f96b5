"""Local files: plain paths, ``file://`` URLs and ``-`` (standard input).

No SDK and no environment variables. Files are opened unbuffered (``buffering=0``) so the tar
reader's large ``readinto`` calls go straight to the kernel without an extra copy.
"""

from __future__ import annotations

import glob
import io
import os
import secrets
import sys
from typing import IO, Any
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from wds_cloud.errors import ConfigError, ShardNotFoundError, ShardOpenError, UploadError

SCHEMES = ("file",)

_GLOB_CHARS = frozenset("*?[")


def url_to_path(url: str) -> str:
    """Return the filesystem path of a plain path or ``file:`` URL.

    ``file:///data/x.tar`` and ``file:/data/x.tar`` give ``/data/x.tar``; ``file:x.tar`` and
    ``x.tar`` stay relative. A ``file://host/...`` URL with a host other than ``localhost`` is a
    :class:`ConfigError`.
    """
    if not url.startswith("file:"):
        return url
    if url.startswith("file://"):
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(f"file URL {url!r} names host {parts.netloc!r}; only local files")
        return url2pathname(parts.path)
    return unquote(url[len("file:") :])


def _has_glob(text: str) -> bool:
    return any(c in _GLOB_CHARS for c in text)


class _StdinReader(io.RawIOBase):
    """Standard input as a raw stream whose ``close`` leaves fd 0 open."""

    def __init__(self) -> None:
        super().__init__()
        self._raw = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._raw.readinto(buffer)
        return 0 if n is None else n

    def close(self) -> None:
        self._raw.close()
        super().close()


class AtomicFileWriter(io.RawIOBase):
    """Writes to a temporary file next to ``path``; ``close`` renames it into place.

    ``close()`` flushes, fsyncs and ``os.replace``-s the temporary file to its final name, so
    readers see either nothing or the whole file. ``abort()`` (or leaving a ``with`` block with
    an exception) deletes the temporary file.

    Args:
        path: final file name; its directory must exist.
        url: the URL shown in errors (defaults to ``path``).
    """

    def __init__(self, path: str | os.PathLike[str], *, url: str | None = None) -> None:
        super().__init__()
        self.path = self.name = os.fspath(path)
        self.url = url if url is not None else self.path
        directory, base = os.path.split(os.path.abspath(self.path))
        # The pid in the name tells which process left a temp file behind after a SIGKILL.
        self.temp_path = os.path.join(
            directory, f".{base}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        )
        try:
            self._file = open(self.temp_path, "xb", buffering=1 << 20)
        except FileNotFoundError as exc:
            raise UploadError(f"directory {directory!r} does not exist", url=self.url) from exc
        except OSError as exc:
            raise UploadError(
                f"cannot create a file in {directory!r}: {exc}", url=self.url
            ) from exc
        self._done = False

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        total = 0
        try:
            while total < len(view):
                n = self._file.write(view[total:])
                total += n or 0
        except OSError as exc:
            self.abort()
            raise UploadError(f"writing failed: {exc}", url=self.url) from exc
        return total

    def abort(self) -> None:
        """Discard everything written so far; the final file is not touched."""
        if self._done:
            return
        self._done = True
        try:
            self._file.close()
        except OSError:
            pass  # a failed flush of data being discarded anyway
        try:
            os.unlink(self.temp_path)
        except FileNotFoundError:
            pass
        super().close()

    def close(self) -> None:
        """Commit: fsync and rename the temporary file to the final name."""
        if self._done:
            super().close()
            return
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self.temp_path, self.path)
        except OSError as exc:
            self.abort()
            raise UploadError(f"committing {self.path!r} failed: {exc}", url=self.url) from exc
        self._done = True
        super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()


class LocalOpener:
    """Opens local files, ``file:`` URLs and ``-`` (standard input)."""

    def __init__(self) -> None:
        pass

    def open(self, url: str, **options: Any) -> IO[bytes]:
        """Open ``url`` for reading, unbuffered.

        Raises:
            ShardNotFoundError: the file does not exist.
            ShardOpenError: permission denied, a directory, or any other OS error.
        """
        if url == "-":
            return _StdinReader()  # type: ignore[return-value]
        path = url_to_path(url)
        try:
            return open(path, "rb", buffering=0)
        except FileNotFoundError as exc:
            raise ShardNotFoundError(f"no such file: {path!r}", url=url) from exc
        except IsADirectoryError as exc:
            raise ShardOpenError(f"{path!r} is a directory, not a shard", url=url) from exc
        except PermissionError as exc:
            raise ShardOpenError(f"permission denied reading {path!r}", url=url) from exc
        except OSError as exc:
            raise ShardOpenError(f"cannot open {path!r}: {exc}", url=url) from exc

    def local_path(self, url: str) -> str | None:
        """The filesystem path for ``url`` (used as ``__local_path__``); None for stdin."""
        if url == "-":
            return None
        return url_to_path(url)

    def list(self, url: str) -> list[str]:
        """List files under a directory, matching a glob, or starting with a path prefix.

        A directory is walked recursively. A glob (``*``, ``?``, ``[...]``) is matched with
        :func:`glob.glob` (``**`` spans directories). Anything else is a name prefix: the files
        in its directory whose path starts with it. Results keep the ``file://`` form when
        ``url`` used it, and are sorted.

        Raises:
            ShardNotFoundError: the directory (or the prefix's directory) does not exist.
        """
        path = url_to_path(url)
        prefix = "file://" if url.startswith("file://") else ""
        if _has_glob(path):
            found = [p for p in glob.glob(path, recursive=True) if os.path.isfile(p)]
        elif os.path.isdir(path):
            found = _walk(path)
        else:
            directory = os.path.dirname(path)
            if not os.path.isdir(directory or "."):
                raise ShardNotFoundError(f"no such directory: {directory!r}", url=url)
            candidates = _walk(directory or ".")
            if not directory:
                candidates = [_strip_dot(p) for p in candidates]
            found = [p for p in candidates if p.startswith(path)]
        if prefix:
            found = [prefix + os.path.abspath(p) for p in found]
        return sorted(found)

    def create(self, url: str) -> AtomicFileWriter:
        """Open ``url`` for writing: a temporary file renamed into place on ``close()``."""
        if url == "-":
            raise ConfigError("writing to '-' (stdout) is not supported by create(); use a path")
        return AtomicFileWriter(url_to_path(url), url=url)


def _strip_dot(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _walk(directory: str) -> list[str]:
    found = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in files:
            found.append(os.path.join(root, name))
    return found
