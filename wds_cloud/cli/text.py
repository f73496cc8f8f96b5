"""What the command line shows people: no credentials, no terminal control sequences.

Names that come from data (member names, sample keys, object keys, URLs) can hold anything,
``ESC [ 2 J`` included; :func:`printable` escapes every character ``str.isprintable`` rejects
the way ``repr`` does (``\\x1b``, ``\\u202e``), so the terminal shows the name instead of obeying
it. :func:`shown` also redacts the credentials in URLs. JSON output is escaped by the JSON
encoder; :func:`redact_data` redacts the URLs in it.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any

from wds_cloud.redact import RedactingFilter, redact_text

__all__ = ["LOGGER_NAME", "cli_logging", "one_line", "printable", "redact_data", "shown"]

LOGGER_NAME = "wds_cloud"


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with every non-printable character (controls, bidi overrides) escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def shown(value: object) -> str:
    """``str(value)`` as the command line prints it: URLs redacted, control characters escaped."""
    return printable(redact_text(str(value)))


def redact_data(data: Any) -> Any:
    """A copy of JSON-like ``data`` with the URLs in every string redacted."""
    if isinstance(data, str):
        return redact_text(data)
    if isinstance(data, dict):
        return {redact_data(k): redact_data(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(v) for v in data]
    return data


def one_line(exc: BaseException) -> str:
    """The one-line message shown for ``exc``.

    An exception re-raised by a PyTorch DataLoader carries the worker's traceback in its
    message; only its last line (the original message) is kept. Exceptions outside the
    wds_cloud tree and the builtin ``OSError``/``ValueError``/``LookupError`` families are
    unexpected, so their type is named.
    """
    from wds_cloud.errors import WdsCloudError

    text = str(exc)
    if "Original Traceback" in text:
        last = [line for line in text.splitlines() if line.strip()][-1]
        name, sep, rest = last.partition(": ")
        text = rest if sep and name.split(".")[-1] == type(exc).__name__ else last
    text = " ".join(part.strip() for part in text.splitlines() if part.strip())
    if not text:
        text = type(exc).__name__
    elif not isinstance(exc, (WdsCloudError, OSError, ValueError, LookupError)):
        text = f"{type(exc).__name__}: {text}"
    return shown(text)


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))


@contextlib.contextmanager
def cli_logging(debug: bool) -> Iterator[None]:
    """While active, wds_cloud's log records go to stderr, redacted (DEBUG and up with
    ``debug``, else WARNING and up); the logger is restored afterwards."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RedactingFilter())
    if debug:
        handler.setFormatter(_Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(_Formatter("%(levelname)s: %(message)s"))
    logger = logging.getLogger(LOGGER_NAME)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if debug else logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        handler.close()
