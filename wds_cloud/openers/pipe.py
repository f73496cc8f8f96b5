"""``pipe:CMD`` URLs: read a shard from a shell command's stdout (or write to its stdin).

No SDK. Whether commands run at all, first rule that applies:

1. ``PipeOpener(allow=True/False)``;
2. ``WDS_CLOUD_PIPE_ALLOW``, else ``WDS_CLOUD_ALLOW_PIPE`` (read when a :class:`PipeOpener` is
   created), a boolean
   (:mod:`wds_cloud.settings`): false (``0``/``false``/``no``/``off``) disables ``pipe:`` URLs,
   true (``1``/``true``/``yes``/``on``) allows them, blank counts as unset, anything else is a
   :class:`ConfigError`;
3. secure mode (:mod:`wds_cloud.security`: ``wds.utils.enforce_security = True``,
   ``WDS_SECURE=1`` or ``WDS_CLOUD_SECURE=1``, checked each time a command is about to run)
   disables them, with webdataset's message (``gopen_pipe: unsafe_gopen is False, ...``);
4. otherwise they are allowed.

The switch is checked by :func:`_start`, the one function in wds_cloud that runs a command, so
it holds for reading, for writing (``TarWriter``/``ShardWriter``/``upload_shards`` and the
``wds-cloud`` commands all write through :meth:`PipeOpener.create`) and for ``create`` recipes.

The command runs with ``sh -c`` in its own process group. Its stderr is drained by a thread
that keeps the last :attr:`PipeConfig.stderr_tail` bytes, so a chatty command never blocks.
At end of stream the exit status is checked: non-zero raises :class:`PipeCommandError` (a
:class:`ShardOpenError`) with the exit code and the stderr tail; 141 (a shell reporting
SIGPIPE) and death by SIGPIPE are ignored, as in webdataset. ``close()`` before the end sends
SIGTERM to the process group, SIGKILL after :attr:`PipeConfig.grace` seconds, and reaps it.
Writing: :class:`PipeWriter` is a committing writer: ``close()`` succeeds only when the command
exits with 0; ``abort()``, an exception in a ``with`` block or garbage collection kill it.
"""

from __future__ import annotations

import collections
import io
import os
import signal
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any, Self, cast

from wds_cloud.errors import ConfigError, ShardOpenError, UploadError
from wds_cloud.openers.streams.writer import CommittingWriter
from wds_cloud.redact import redact_url
from wds_cloud.security import refusal, secure_mode
from wds_cloud.settings import (
    BOOL,
    BYTES,
    SECONDS,
    ConfigTable,
    Field,
    at_least,
    reject_unknown_options,
)

SCHEMES = ("pipe",)

_IGNORED_STATUS = (0, 141, -signal.SIGPIPE)


class PipeCommandError(ShardOpenError):
    """A ``pipe:`` command exited with a non-zero status.

    Attributes:
        returncode: the exit status (negative: killed by that signal).
        stderr_tail: the last bytes the command wrote to stderr, decoded.
    """

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        offset: int | None = None,
        returncode: int | None = None,
        stderr_tail: str = "",
    ) -> None:
        super().__init__(message, url=url, offset=offset)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


#: How each :class:`PipeConfig` field is resolved (``docs/openers.md`` has the table in words).
PIPE_SETTINGS = ConfigTable(
    section="PIPE",
    owner="PipeConfig",
    what="pipe:",
    fields=(
        Field("allow", BOOL, env=("WDS_CLOUD_ALLOW_PIPE",)),
        Field("grace", SECONDS, 2.0),
        Field("stderr_tail", BYTES, 2048, checks=(at_least(0),)),
        Field("exit_timeout", SECONDS, 600.0),
    ),
)


@dataclass(frozen=True)
class PipeConfig:
    """Settings for ``pipe:`` URLs; None fields are resolved by :data:`PIPE_SETTINGS`:
    argument > ``WDS_CLOUD_PIPE_<FIELD>`` > (``allow`` only) ``WDS_CLOUD_ALLOW_PIPE`` > default.

    Attributes:
        allow: run ``pipe:`` commands at all; None after :meth:`resolve` means "unless secure
            mode is on" (checked when a command runs).
        grace: seconds between SIGTERM and SIGKILL when a stream is closed early (default 2).
        stderr_tail: how many trailing stderr bytes to keep for error messages (default 2048).
        exit_timeout: seconds to wait for the command to exit after its stdout ended
            (default 600).
    """

    allow: bool | None = None
    grace: float | None = None
    stderr_tail: int | None = None
    exit_timeout: float | None = None

    def resolve(
        self,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """A copy with ``overrides`` applied, then the None fields filled from the environment
        (``environ``, default ``os.environ``) or the default.

        ``allow`` stays None when neither the argument nor a variable decides: secure mode
        then decides each time a command is about to run.

        Raises:
            ConfigError: an unknown override, or a bad value (naming its variable).
        """
        return PIPE_SETTINGS.resolve(self, overrides, environ=environ)


class _StderrTail:
    """Drains a pipe on a daemon thread, keeping only its last ``limit`` bytes."""

    def __init__(self, pipe: IO[bytes], limit: int) -> None:
        self._pipe = pipe
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._limit = limit
        self._thread = threading.Thread(target=self._run, name="wds-pipe-stderr", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                chunk = self._pipe.read(65536)
                if not chunk:
                    break
                self._chunks.append(chunk)
                self._size += len(chunk)
                while self._chunks and self._size - len(self._chunks[0]) >= self._limit:
                    self._size -= len(self._chunks.popleft())
        except (OSError, ValueError):
            pass
        finally:
            self._pipe.close()

    def text(self, timeout: float = 5.0) -> str:
        """The kept tail, decoded (after waiting for the command to close stderr)."""
        self._thread.join(timeout)
        data = b"".join(list(self._chunks))[-self._limit :]
        return data.decode("utf-8", errors="replace").strip()


def _shown(command: str) -> str:
    """``command`` quoted for a message, credentials masked."""
    return repr(redact_url(command))


def pipe_command(url: str, config: PipeConfig) -> str:
    """The shell command of ``pipe:CMD``, after the checks every run goes through.

    Raises:
        ConfigError: not a ``pipe:`` URL, ``pipe:`` is switched off (``config.allow`` is False,
            e.g. ``WDS_CLOUD_ALLOW_PIPE=0``, or None while secure mode is on), an empty command,
            or a NUL byte.
    """
    if not url.startswith("pipe:"):
        raise ConfigError(f"{redact_url(url)!r} is not a pipe: URL")
    if config.allow is False:
        raise ConfigError(
            f"pipe: URLs are disabled, refusing to run {redact_url(url)!r}; enable them with "
            "PipeOpener(allow=True) or WDS_CLOUD_ALLOW_PIPE=1"
        )
    if config.allow is None and secure_mode():
        raise ConfigError(
            refusal(
                "gopen_pipe: unsafe_gopen is False, cannot open pipe URLs",
                f"pipe: URLs are disabled, refusing to run {redact_url(url)!r}",
                "use PipeOpener(allow=True) or WDS_CLOUD_ALLOW_PIPE=1",
            )
        )
    command = url[len("pipe:") :]
    if not command.strip():
        raise ConfigError(f"pipe: URL {redact_url(url)!r} has no command")
    if "\0" in command:
        raise ConfigError(f"pipe: URL {redact_url(url)!r} contains a NUL byte")
    return command


def _start(
    url: str, config: PipeConfig, *, stdin: int | None, stdout: int | None
) -> subprocess.Popen[bytes]:
    """Run ``pipe:CMD`` with ``sh -c``: the one place wds_cloud starts a command.

    Raises:
        ConfigError: see :func:`pipe_command` (nothing is run).
        OSError: the shell could not be started.
    """
    return subprocess.Popen(
        pipe_command(url, config),
        shell=True,
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        bufsize=0,
        start_new_session=True,
    )


def _kill_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the command's process group, SIGKILL after ``grace`` seconds, reap the shell.

    Members of the group that outlive the shell (they ignored SIGTERM, or the shell exited
    first) get SIGKILL at once; they are not our children, so their parent (init) reaps them.
    """
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _describe(status: int) -> str:
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit status {status}"


class PipeReader(io.RawIOBase):
    """A running command's stdout as a raw stream; see the module docstring."""

    def __init__(self, url: str, config: PipeConfig) -> None:
        super().__init__()
        self.url = url
        self.command = url[len("pipe:") :]
        self._config = config
        self.position = 0
        try:
            self._proc = _start(url, config, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        except OSError as exc:
            raise ShardOpenError(
                f"cannot start command {_shown(self.command)}: {exc}", url=url
            ) from exc
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._stdout = cast(io.RawIOBase, self._proc.stdout)  # bufsize=0: a FileIO
        self._stderr = _StderrTail(self._proc.stderr, config.stderr_tail or 0)
        self._finished = False

    @property
    def pid(self) -> int:
        """The process id of the shell running the command (also its process group id)."""
        return self._proc.pid

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._finished:
            return 0
        n = self._stdout.readinto(buffer) or 0
        if n:
            self.position += n
            return n
        self._finish()
        return 0

    def _finish(self) -> None:
        self._finished = True
        self._stdout.close()
        try:
            status = self._proc.wait(self._config.exit_timeout)
        except subprocess.TimeoutExpired:
            _kill_group(self._proc, self._config.grace or 0.0)
            raise ShardOpenError(
                f"command {_shown(self.command)} closed its output but did not exit within "
                f"{self._config.exit_timeout}s; killed it",
                url=self.url,
                offset=self.position,
            ) from None
        if status not in _IGNORED_STATUS:
            tail = self._stderr.text()
            raise PipeCommandError(
                f"command {_shown(self.command)} failed with {_describe(status)}"
                + (f"; stderr: {tail}" if tail else "; no stderr output"),
                url=self.url,
                offset=self.position,
                returncode=status,
                stderr_tail=tail,
            )

    def close(self) -> None:
        if self.closed:
            return
        if not hasattr(self, "_stderr"):  # the constructor failed
            super().close()
            return
        try:
            self._stdout.close()
            if not self._finished:
                _kill_group(self._proc, self._config.grace or 0.0)
            self._stderr.text(timeout=1.0)
        finally:
            super().close()


class PipeWriter(CommittingWriter):
    """A command's stdin as a committing writer.

    ``close()`` closes the command's stdin, waits for it and raises :class:`UploadError` unless
    it exits with 0; ``abort()`` (and garbage collection) kills its process group.
    """

    def __init__(self, url: str, config: PipeConfig) -> None:
        self.command = url[len("pipe:") :]
        self._config = config
        try:
            self._proc = _start(url, config, stdin=subprocess.PIPE, stdout=None)
        except OSError as exc:
            raise UploadError(
                f"cannot start command {_shown(self.command)}: {exc}", url=url
            ) from exc
        assert self._proc.stdin is not None and self._proc.stderr is not None
        self._stdin = self._proc.stdin
        self._stderr = _StderrTail(self._proc.stderr, config.stderr_tail or 0)
        super().__init__(url)

    @property
    def pid(self) -> int:
        """The process id of the shell running the command."""
        return self._proc.pid

    def _write(self, view: memoryview) -> None:
        pos = 0
        try:
            while pos < len(view):
                pos += self._stdin.write(view[pos:]) or 0
        except BrokenPipeError as exc:
            status = self._proc.wait(self._config.exit_timeout)
            raise self._failure(f"command stopped reading its input ({_describe(status)})") from exc

    def _failure(self, what: str) -> UploadError:
        tail = self._stderr.text()
        return UploadError(
            f"{what}: {_shown(self.command)}" + (f"; stderr: {tail}" if tail else ""), url=self.url
        )

    def _discard(self) -> None:
        # kill before closing stdin: an end of input first would look like a clean end to the
        # command, which could publish what it got before the signal arrives
        _kill_group(self._proc, self._config.grace or 0.0)
        try:
            self._stdin.close()
        except OSError:
            pass

    def _commit(self) -> None:
        try:
            self._stdin.close()
        except BrokenPipeError:
            pass
        try:
            status = self._proc.wait(self._config.exit_timeout)
        except subprocess.TimeoutExpired:
            raise self._failure(
                f"command did not exit within {self._config.exit_timeout}s"
            ) from None
        if status != 0:
            raise self._failure(f"command failed with {_describe(status)}")


class PipeOpener:
    """Runs ``pipe:CMD`` URLs with ``sh -c``.

    Args:
        config: a :class:`PipeConfig`; fields left None come from the environment.
        **overrides: individual :class:`PipeConfig` fields, e.g. ``allow=False``.
    """

    remote: bool = False  # the command already runs in parallel with its reader

    def __init__(self, config: PipeConfig | None = None, **overrides: Any) -> None:
        self.config = (config or PipeConfig()).resolve(overrides)

    def open(self, url: str, **options: Any) -> PipeReader:
        """Start the command and return its stdout as a stream.

        Raises:
            ConfigError: ``pipe:`` is disabled, the command is empty, or an option was given
                (``pipe:`` takes none).
            ShardOpenError: the command could not be started; at end of stream,
                :class:`PipeCommandError` when it exited with a non-zero status.
        """
        reject_unknown_options(options, (), "pipe: open()")
        return PipeReader(url, self.config)

    def create(self, url: str) -> PipeWriter:
        """Start the command and return its stdin as a :class:`PipeWriter`.

        Raises:
            ConfigError: ``pipe:`` is disabled, or the command is empty.
            UploadError: the command could not be started.
        """
        return PipeWriter(url, self.config)
