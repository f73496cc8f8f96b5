"""``CommittingWriter``: the one base class of every writer that ``create(url)`` returns.

A committing writer is a writable binary stream with two ways to end:

- ``close()`` (or leaving a ``with`` block normally) **commits**: the file or object appears
  under its final name, complete.
- ``abort()``, leaving a ``with`` block by an exception, a failed write or commit, and garbage
  collection of a writer that was neither closed nor aborted **discard**: nothing appears under
  the final name, temporary files are removed, remote uploads are cancelled.

Garbage collection never commits (``io.IOBase.__del__`` would call ``close()``; this class
replaces it) and emits a :class:`ResourceWarning` naming the writer's URL, so a forgotten
``close()`` shows up instead of silently publishing a truncated shard.

Subclasses acquire their resource (temp file, process, upload session) in their constructor,
then call ``super().__init__(url)`` last, and implement :meth:`_write`, :meth:`_commit` and
:meth:`_discard`; :meth:`_error` may be overridden to translate their exceptions.
"""

from __future__ import annotations

import io
import logging
import warnings
from typing import Any, Protocol, Self

from wds_cloud.errors import ConfigError, UploadError
from wds_cloud.redact import redact_url

log = logging.getLogger(__name__)


def reject_nul(url: str) -> None:
    """Raise :class:`ConfigError` when ``url`` holds a NUL byte (no store accepts one).

    Raises:
        ConfigError: naming the (redacted) URL.
    """
    if "\0" in url:
        raise ConfigError(f"{redact_url(url)!r} contains a NUL byte; no file or object has one")


def warn_discarded(kind: str, url: str | None) -> None:
    """Emit the :class:`ResourceWarning` for a writer finalised without ``close()``."""
    try:
        warnings.warn(
            f"{kind} for {redact_url(url or '<stream>')!r} was garbage-collected without "
            "close() or abort(); it was discarded and nothing was committed",
            ResourceWarning,
            stacklevel=2,
        )
    except Exception:  # pragma: no cover - interpreter shutdown: the warnings module is gone
        pass


class _Ending(Protocol):
    def close(self) -> None: ...

    def abort(self) -> None: ...


class CommitsOnExit:
    """``with`` for a writer that ends by ``close()`` (commit) or ``abort()`` (discard):
    leaving the block normally commits, leaving it by an exception discards. For writers that
    are not streams (``TarWriter``, ``ShardWriter``); :class:`CommittingWriter` keeps io's
    ``__enter__``, which refuses a closed stream."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self: _Ending, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class CommittingWriter(io.RawIOBase):
    """Writable binary stream: ``close()`` commits, everything else discards.

    Attributes:
        url: the destination, as given to ``create()``.
        bytes_written: bytes accepted by :meth:`write`.
    """

    url: str = ""
    bytes_written: int = 0
    _ended = True  # until __init__ has run: a half-built writer owns nothing to discard

    def __init__(self, url: str) -> None:
        """Arm the writer; subclasses call this after acquiring their resource.

        Raises:
            ConfigError: ``url`` holds a NUL byte.
        """
        reject_nul(url)
        super().__init__()
        self.url = url
        self.bytes_written = 0
        self._ended = False

    # -- what subclasses implement -----------------------------------------------------------

    def _write(self, view: memoryview) -> None:  # pragma: no cover - abstract
        """Accept all of ``view`` (a byte-format memoryview)."""
        raise NotImplementedError

    def _commit(self) -> None:  # pragma: no cover - abstract
        """Make the data visible under the final name."""
        raise NotImplementedError

    def _discard(self) -> None:  # pragma: no cover - abstract
        """Release the resource so that nothing appears under the final name (best effort)."""
        raise NotImplementedError

    def _error(self, exc: Exception, action: str) -> UploadError:
        """Translate an exception from :meth:`_write` or :meth:`_commit` (``action`` says which)."""
        return UploadError(f"{action} failed: {type(exc).__name__}: {exc}", url=self.url)

    # -- the protocol ------------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        """True once the writer committed or discarded."""
        return self._ended

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        """Write all of ``data``.

        Raises:
            UploadError: writing failed; the writer was aborted.
            ValueError: the writer already committed or discarded.
        """
        if self._ended:
            raise ValueError(
                f"write to a closed or aborted {type(self).__name__} ({redact_url(self.url)})"
            )
        view = memoryview(data).cast("B")
        try:
            self._write(view)
        except BaseException as exc:
            self.abort()
            if isinstance(exc, UploadError) or not isinstance(exc, Exception):
                raise
            raise self._error(exc, "writing") from exc
        self.bytes_written += len(view)
        return len(view)

    def close(self) -> None:
        """Commit (idempotent; a no-op after :meth:`abort`).

        Raises:
            UploadError: committing failed; everything was discarded.
        """
        if self._ended:
            super().close()
            return
        self._ended = True
        try:
            self._commit()
        except BaseException as exc:
            self._discard_quietly()
            if isinstance(exc, UploadError) or not isinstance(exc, Exception):
                raise
            raise self._error(exc, "committing") from exc
        finally:
            super().close()

    def abort(self) -> None:
        """Discard everything written; nothing appears under the final name (idempotent)."""
        if not self._ended:
            self._ended = True
            self._discard_quietly()
        super().close()

    def _discard_quietly(self) -> None:
        try:
            self._discard()
        except Exception as exc:  # the data is being thrown away; the first error matters more
            log.warning("discarding %s failed: %r", redact_url(self.url), exc)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        # Replaces io.IOBase.__del__, which would call close() and commit a truncated file.
        if self._ended:
            return
        warn_discarded(type(self).__name__, self.url)
        self.abort()


__all__ = ["CommittingWriter", "reject_nul", "warn_discarded"]
