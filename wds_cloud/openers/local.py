"""Local files: plain paths, ``file:`` URLs and ``-`` (standard input, or output when writing).

:func:`url_to_path` is the one URL-to-path mapping; the writers live in
:mod:`wds_cloud.openers.local_write`. No SDK. Files are opened unbuffered (``buffering=0``) so
the tar reader's large ``readinto`` calls go straight to the kernel without an extra copy.

Secure mode (:mod:`wds_cloud.security`) refuses local files, as webdataset 1.0.2's ``gopen``
does when ``enforce_security`` is set: :class:`LocalOpener` is the one place that opens, creates
and lists them, and it decides, first rule that applies:

1. ``LocalOpener(allow=True/False)``;
2. ``WDS_CLOUD_ALLOW_LOCAL`` (read when the opener is created), a boolean
   (:mod:`wds_cloud.settings`): false (``0``/``false``/``no``/``off``) refuses local files,
   true (``1``/``true``/``yes``/``on``) allows them, blank counts as unset, anything else is a
   :class:`ConfigError`;
3. secure mode (checked on each call) refuses them with webdataset's message
   (``gopen: unsafe_gopen is False, cannot open local files``);
4. otherwise they are allowed.

``-`` (standard input and output) is always allowed, as in webdataset.
"""

from __future__ import annotations

import glob
import io
import os
import sys
from typing import Any
from urllib.parse import unquote
from urllib.request import pathname2url

from wds_cloud.errors import ConfigError, ShardNotFoundError, ShardOpenError
from wds_cloud.openers.local_write import AtomicFileWriter, DirectWriter, open_direct
from wds_cloud.openers.streams.stream import ReadStream
from wds_cloud.openers.streams.writer import CommittingWriter, reject_nul
from wds_cloud.redact import redact_url
from wds_cloud.security import refusal, secure_mode
from wds_cloud.settings import env_bool, reject_unknown_options

SCHEMES = ("file",)

_GLOB_CHARS = frozenset("*?[")


def is_file_url(url: str) -> bool:
    """True for ``file:`` URLs (any case), False for plain paths and other schemes."""
    return url[:5].lower() == "file:"


def url_to_path(url: str) -> str:
    """The filesystem path of a plain path or ``file:`` URL.

    This is the one mapping from local URLs to paths: reading, writing, listing and
    ``__local_path__`` all use it, so a URL names the same file everywhere.

    - A plain path is returned unchanged (it is never a command, whatever it starts with).
    - ``file:///data/x.tar``, ``file://localhost/data/x.tar`` and ``file:/data/x.tar`` give
      ``/data/x.tar``; ``file:x.tar`` gives the relative path ``x.tar``.
    - The part after ``file:`` (and the host) is percent-decoded: ``file:///a%20b.tar`` is
      ``/a b.tar``. ``?`` and ``#`` belong to the name (there is no query or fragment);
      :func:`path_to_url` writes them as ``%3F``/``%23``.

    Raises:
        ConfigError: a ``file://`` URL names another host, or the path holds a NUL byte
            (also written ``%00``).
    """
    reject_nul(url)
    if not is_file_url(url):
        return url
    rest = url[len("file:") :]
    if rest.startswith("//"):
        host, slash, tail = rest[2:].partition("/")
        if host.lower() not in ("", "localhost"):
            raise ConfigError(f"file URL {url!r} names host {host!r}; only local files")
        rest = slash + tail
    path = unquote(rest)
    if "\0" in path:
        raise ConfigError(f"file URL {url!r} decodes to a path with a NUL byte")
    return path


def path_to_url(path: str) -> str:
    """``file://`` URL of ``path`` (made absolute); :func:`url_to_path` maps it back exactly."""
    return "file://" + pathname2url(os.path.abspath(path))


def _has_glob(text: str) -> bool:
    return any(c in _GLOB_CHARS for c in text)


class _StdinReader(io.RawIOBase):
    """Standard input as a raw stream whose ``close`` leaves standard input open.

    Reads its file descriptor directly; when ``sys.stdin`` has none (it was replaced, e.g. by
    a test runner), reads ``sys.stdin.buffer`` instead.
    """

    def __init__(self) -> None:
        super().__init__()
        self._raw: Any
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            self._raw = None
            self._buffer = sys.stdin.buffer
        else:
            self._raw = open(fd, "rb", buffering=0, closefd=False)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._raw is None:
            view = memoryview(buffer).cast("B")
            data = self._buffer.read(len(view))
            view[: len(data)] = data
            return len(data)
        n = self._raw.readinto(buffer)
        return 0 if n is None else n

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
        super().close()


class LocalOpener:
    """Opens local files, ``file:`` URLs and ``-`` (standard input).

    Args:
        allow: open local paths and ``file:`` URLs at all. None (the default):
            ``WDS_CLOUD_ALLOW_LOCAL`` decides when it is set, else they are allowed unless
            secure mode is on (see the module docstring). ``-`` is always allowed.
    """

    remote: bool = False  # local files are memory-mapped, not read ahead

    def __init__(self, allow: bool | None = None) -> None:
        if allow is None:
            allow = env_bool("WDS_CLOUD_ALLOW_LOCAL", None)
        self.allow = allow

    def check_allowed(self, url: str, action: str = "open") -> None:
        """Raise unless this opener may touch ``url`` now (``-`` always may).

        Args:
            url: a local path or ``file:`` URL.
            action: what is about to happen, for the message (``"read"``, ``"write"``, ...).

        Raises:
            ConfigError: local files are disabled (``allow=False``, ``WDS_CLOUD_ALLOW_LOCAL=0``),
                or secure mode is on and nothing allowed them; the message starts with
                webdataset's ``gopen: unsafe_gopen is False, cannot open local files``.
        """
        if url == "-" or self.allow is True:
            return
        what = f"refusing to {action} {redact_url(url)!r}"
        if self.allow is False:
            raise ConfigError(
                f"local files are disabled, {what}; enable them with LocalOpener(allow=True) "
                "or WDS_CLOUD_ALLOW_LOCAL=1"
            )
        if secure_mode():
            raise ConfigError(
                refusal(
                    "gopen: unsafe_gopen is False, cannot open local files",
                    what,
                    "use LocalOpener(allow=True) or WDS_CLOUD_ALLOW_LOCAL=1",
                )
            )

    def open(self, url: str, **options: Any) -> ReadStream:
        """Open ``url`` for reading, unbuffered.

        Raises:
            ConfigError: local files are refused (see :meth:`check_allowed`), or an option was
                given (local files take none).
            ShardNotFoundError: the file does not exist.
            ShardOpenError: permission denied, a directory, or any other OS error.
        """
        reject_unknown_options(options, (), "local open()")
        if url == "-":
            return _StdinReader()
        return self._open_file(url)

    def _open_file(self, url: str) -> io.FileIO:
        """The file of ``url`` (not ``-``) opened unbuffered; errors as :meth:`open`."""
        self.check_allowed(url, "read")
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

    def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes:
        """Bytes ``offset .. offset + length`` of a local file (``pread``).

        Raises:
            ConfigError: an option was given (local files take none).
            ShardNotFoundError: the file does not exist.
            ShardReadError: the file ends before ``offset + length``.
            ShardOpenError: ``-`` (standard input cannot be read at an offset), other OS errors.
        """
        from wds_cloud.errors import ShardReadError

        reject_unknown_options(options, (), "local read_range()")
        if url == "-":
            raise ShardOpenError("standard input cannot be read at an offset", url=url)
        stream = self._open_file(url)
        try:
            fd = stream.fileno()
            parts = []
            got = 0
            while got < length:
                chunk = os.pread(fd, length - got, offset + got)
                if not chunk:
                    raise ShardReadError(
                        f"the file ends before byte {offset + length}", url=url, offset=offset + got
                    )
                parts.append(chunk)
                got += len(chunk)
        except OSError as exc:
            if isinstance(exc, ShardReadError):
                raise
            raise ShardOpenError(f"cannot read {url!r}: {exc}", url=url) from exc
        finally:
            stream.close()
        return b"".join(parts)

    def local_path(self, url: str) -> str | None:
        """The filesystem path for ``url`` (used as ``__local_path__``); None for stdin."""
        if url == "-":
            return None
        return url_to_path(url)

    def list(self, url: str) -> list[str]:
        """List files under a directory, matching a glob, or starting with a path prefix.

        A directory is walked recursively. A glob (``*``, ``?``, ``[...]``) is matched with
        :func:`glob.glob` (``**`` spans directories). Anything else is a name prefix: the files
        in its directory whose path starts with it. Results are sorted absolute paths, or
        ``file://`` URLs (see :func:`path_to_url`) when ``url`` is a ``file:`` URL: never a
        relative name, which could read as another scheme (a file named ``pipe:cmd;x.tar``).

        Raises:
            ShardNotFoundError: the directory (or the prefix's directory) does not exist.
            ConfigError: a NUL byte in ``url``, or local files are refused (see
                :meth:`check_allowed`).
        """
        self.check_allowed(url, "list")
        path = url_to_path(url)
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
        absolute = sorted(os.path.abspath(p) for p in found)
        return [path_to_url(p) for p in absolute] if is_file_url(url) else absolute

    def create(self, url: str) -> CommittingWriter:
        """Open ``url`` for writing; ``close()`` commits, anything else discards.

        A regular file (new or existing) gets an :class:`AtomicFileWriter` (temporary file
        renamed into place on ``close()``); an existing FIFO or device, and ``-`` (standard
        output), are written in place by a :class:`DirectWriter`.

        Raises:
            ConfigError: a NUL byte, a ``file://`` URL naming another host, or local files are
                refused (see :meth:`check_allowed`).
            UploadError: the directory is missing, the target is a directory, or it cannot
                be opened.
        """
        if url == "-":
            return DirectWriter(sys.stdout.buffer, url, own=False)
        self.check_allowed(url, "write")
        path = url_to_path(url)
        return open_direct(path, url) or AtomicFileWriter(path, url=url)


def _strip_dot(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _walk(directory: str) -> list[str]:
    found = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in files:
            found.append(os.path.join(root, name))
    return found


__all__ = [
    "SCHEMES",
    "AtomicFileWriter",
    "DirectWriter",
    "LocalOpener",
    "is_file_url",
    "path_to_url",
    "url_to_path",
]
