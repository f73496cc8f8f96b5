"""One exception tree for everything wds_cloud raises.

::

    WdsCloudError
      ConfigError(ValueError)              UnsupportedSchemeError(ValueError)
      MissingDependencyError(ImportError)  -- names the extra: pip install 'wds_cloud[s3]'
      ShardError  (.url, .offset, .member)
        ShardNotFoundError(FileNotFoundError)
        ShardOpenError(OSError)
        ShardReadError(OSError, tarfile.ReadError)
      SampleError(ValueError)              (.url, .key)
      UploadError(OSError)                 (.url)
      DsortSpecError(ValueError)           (.field)

Every class also inherits the matching builtin, so ``except OSError`` or ``except
tarfile.ReadError`` written for the ``webdataset`` package keeps working. Each class takes the
message as its only positional argument (PyTorch re-raises worker exceptions as
``type(message)``), and the structured fields as keywords; the message shown to the user
already names the URL, byte offset and member.

Credentials never reach the text: every message (and ``reason``) is passed through
:func:`wds_cloud.redact.redact_text`, so a password or a presigned signature in a URL shows as
``***``. The ``url`` attribute keeps the URL exactly as given, for programs that reopen it;
print ``str(exc)``, never ``exc.url``, where people can see it.
"""

from __future__ import annotations

import tarfile
from typing import Any

from wds_cloud.redact import redact_text, redact_url


class WdsCloudError(Exception):
    """Root of every exception raised by wds_cloud; its message is redacted."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(redact_text(a) if isinstance(a, str) else a for a in args))


class ConfigError(WdsCloudError, ValueError):
    """A configuration value (argument, environment variable, option) is invalid."""


class UnsupportedSchemeError(WdsCloudError, ValueError):
    """No opener is registered for a URL's scheme."""


class MissingDependencyError(WdsCloudError, ImportError):
    """An optional SDK is not installed; the message names the extra to install."""

    def __init__(self, message: str, *, extra: str | None = None) -> None:
        if extra and "pip install" not in message:
            message = f"{message}; install it with: pip install 'wds_cloud[{extra}]'"
        super().__init__(message)
        self.extra = extra


def _context(url: str | None, offset: int | None, member: str | None) -> str:
    parts = []
    if url is not None:
        parts.append(f"url={redact_url(url)!r}")
    if offset is not None:
        parts.append(f"offset={offset}")
    if member is not None:
        parts.append(f"member={member!r}")
    return f" [{', '.join(parts)}]" if parts else ""


class ShardError(WdsCloudError):
    """A shard could not be opened or read.

    Attributes:
        url: the shard URL as the user gave it.
        offset: byte offset in the (uncompressed) stream where the problem was found.
        member: tar member name involved, when known.
        reason: the message without the location suffix.
    """

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        offset: int | None = None,
        member: str | None = None,
    ) -> None:
        super().__init__(message + _context(url, offset, member))
        self.reason = redact_text(message)
        self.url = url
        self.offset = offset
        self.member = member


class ShardNotFoundError(ShardError, FileNotFoundError):
    """The shard (object, file, bucket) does not exist."""


class ShardOpenError(ShardError, OSError):
    """The shard exists (or might) but could not be opened: permissions, endpoint, command."""


class ShardReadError(ShardError, OSError, tarfile.ReadError):
    """The shard's bytes are not a valid tar stream, or the stream broke mid-shard."""


class SampleError(WdsCloudError, ValueError):
    """A sample is malformed (duplicate extension, missing field, failed decode)."""

    def __init__(self, message: str, *, url: str | None = None, key: str | None = None) -> None:
        where = []
        if key is not None:
            where.append(f"key={key!r}")
        if url is not None:
            where.append(f"url={redact_url(url)!r}")
        super().__init__(message + (f" [{', '.join(where)}]" if where else ""))
        self.reason = redact_text(message)
        self.url = url
        self.key = key


class SampleKeyError(SampleError, KeyError):
    """A sample lacks a key a stage needs where webdataset raises ``KeyError`` (``map_dict``)."""

    __str__ = BaseException.__str__  # the message, not KeyError's repr of it


class UploadError(WdsCloudError, OSError):
    """Writing a shard to its destination failed; the partial upload was aborted."""

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message + (f" [url={redact_url(url)!r}]" if url is not None else ""))
        self.reason = redact_text(message)
        self.url = url


class DsortSpecError(WdsCloudError, ValueError):
    """A dSort specification is invalid; ``field`` names the offending key."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.reason = redact_text(message)
        self.field = field
