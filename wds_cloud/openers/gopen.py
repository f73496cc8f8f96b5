"""``gopen``: webdataset's one call to open any URL for reading or writing, over the openers.

``gopen(url, "rb")`` opens ``url`` through the opener registry (local paths, ``file:``, ``-``,
``pipe:``, ``http(s)://``, ``s3://``, ``gs://``, ``ais://`` and whatever else is registered)
and returns a buffered binary stream; ``gopen(url, "wb")`` returns the target's committing
writer (the same sink :class:`~wds_cloud.TarWriter` writes to): ``close()``, or leaving a
``with`` block normally, commits the file or object, an exception in the block discards it.

As in webdataset 1.0.2:

- ``GOPEN_REWRITE="prefix1=replacement1;prefix2=replacement2"`` rewrites a URL before it is
  opened (:func:`rewrite_url`; each prefix is a regular expression anchored at the start of
  the URL, the first rule that changes it wins);
- secure mode (:mod:`wds_cloud.security`, ``wds.utils.enforce_security = True`` or
  ``WDS_SECURE=1``) refuses local paths and ``file:`` URLs, ``pipe:`` URLs and
  ``GOPEN_REWRITE``, each with a ``ValueError`` carrying webdataset's message; ``-``
  (standard input or output) and the network schemes stay open;
- :data:`gopen_schemes` maps a scheme to a handler ``f(url, mode, bufsize, **kw)`` that
  ``gopen`` calls instead of the registry. It starts empty here, because every scheme goes
  through the registry; register a backend with :func:`~wds_cloud.register_opener` instead,
  which every reader and writer uses, not only ``gopen``.

Not carried over: ``GOPEN_VERBOSE`` and ``GOPEN_BUFFER`` (webdataset reads through ``curl``,
``gsutil`` and ``ais`` commands, wds_cloud through SDKs). ``USE_AIS_FOR`` is honoured by the
registry for reads (:mod:`wds_cloud.openers.ais.route`); writes are not routed.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable
from typing import IO, Any, Literal, overload

from wds_cloud.errors import ConfigError
from wds_cloud.openers.registry import OpenerRegistry, open_url, url_scheme
from wds_cloud.openers.streams.stream import ReadStream
from wds_cloud.redact import redact_url
from wds_cloud.security import refusal, secure_mode
from wds_cloud.settings import env_str

__all__ = ["gopen", "gopen_schemes", "reader", "rewrite_url"]

GopenHandler = Callable[..., IO[bytes]]

gopen_schemes: dict[str, GopenHandler] = {}
"""Scheme -> handler ``f(url, mode, bufsize, **kw)`` that :func:`gopen` uses instead of the
opener registry (empty by default; see the module docstring)."""


def rewrite_url(url: str) -> str:
    """Apply the ``GOPEN_REWRITE`` rules to ``url`` (read from the environment on each call).

    ``GOPEN_REWRITE`` holds ``pattern=replacement`` rules separated by ``;``. Each pattern is a
    regular expression matched at the start of the URL; the first rule that changes the URL
    gives the result. Without the variable the URL is returned unchanged.

    Raises:
        ConfigError: secure mode is on while ``GOPEN_REWRITE`` is set (a ``ValueError`` whose
            message starts with webdataset's), or a rule is malformed.
    """
    rules = env_str("GOPEN_REWRITE", None)
    if rules is None:
        return url
    if secure_mode():
        raise ConfigError(
            refusal(
                "rewrite_url: unsafe_gopen is False, cannot rewrite URLs using environment "
                "variables",
                f"GOPEN_REWRITE is set; refusing to rewrite {redact_url(url)!r}",
                "unset GOPEN_REWRITE",
            )
        )
    for rule in rules.split(";"):
        if not rule.strip():
            continue
        pattern, eq, replacement = rule.partition("=")
        if not eq:
            raise ConfigError(f"GOPEN_REWRITE rule {rule!r} has no '=' (pattern=replacement)")
        try:
            rewritten = re.sub("^" + pattern, replacement, url)
        except re.error as exc:
            raise ConfigError(f"GOPEN_REWRITE rule {rule!r} is not a valid pattern: {exc}")
        if rewritten != url:
            return rewritten
    return url


@overload
def gopen(
    url: str | os.PathLike[str],
    mode: Literal["wb"],
    bufsize: int = ...,
    *,
    registry: OpenerRegistry | None = ...,
    **options: Any,
) -> IO[bytes]: ...


@overload
def gopen(
    url: str | os.PathLike[str],
    mode: str = ...,
    bufsize: int = ...,
    *,
    registry: OpenerRegistry | None = ...,
    **options: Any,
) -> ReadStream | IO[bytes]: ...


def gopen(
    url: str | os.PathLike[str],
    mode: str = "rb",
    bufsize: int = 8192,
    *,
    registry: OpenerRegistry | None = None,
    **options: Any,
) -> ReadStream | IO[bytes]:
    """Open ``url`` for reading (``"rb"``) or writing (``"wb"``).

    Args:
        url: any URL the registry handles, a local path, or ``-`` (stdin / stdout).
        mode: ``"rb"`` or ``"wb"``.
        bufsize: read buffer size in bytes (writers buffer as their target needs).
        registry: the opener registry (the default one when None).
        **options: passed to the opener's ``open`` (reading only) or to a
            :data:`gopen_schemes` handler.

    Returns:
        For ``"rb"``, a binary stream (an :class:`io.BufferedReader` over the opener's
        stream when it is an :class:`io.RawIOBase`, else the opener's
        :class:`~wds_cloud.openers.streams.stream.ReadStream` itself); for ``"wb"``, the target's committing writer (``close()`` commits,
        ``abort()`` or an exception in a ``with`` block discards).

    Raises:
        ConfigError: an unknown mode, writing with options, a URL that secure mode refuses
            (local files, ``pipe:``, ``GOPEN_REWRITE``), a ``pipe:`` URL while ``pipe:`` is
            switched off.
        UnsupportedSchemeError: no opener for the URL's scheme (a ``ValueError``, as
            webdataset's ``no gopen handler defined``).
        ShardError: reading could not start (:class:`ShardNotFoundError` for a missing file
            or object).
        UploadError: writing could not start.
    """
    if mode not in ("rb", "wb"):
        raise ConfigError(f"gopen: mode must be 'rb' or 'wb', got {mode!r}")
    url = os.fspath(url)
    if url != "-":
        url = rewrite_url(url)
    handler = gopen_schemes.get(url_scheme(url))
    if handler is not None:
        return handler(url, mode, bufsize, **options)
    if mode == "wb":
        if options:
            raise ConfigError(f"gopen: options {sorted(options)} apply to reading only")
        from wds_cloud.openers.registry import open_sink

        sink: IO[bytes] = open_sink(url, registry)
        return sink
    stream = open_url(url, registry=registry, **options)
    if isinstance(stream, io.RawIOBase):
        size = bufsize if bufsize > 0 else io.DEFAULT_BUFFER_SIZE
        return io.BufferedReader(stream, buffer_size=size)
    return stream


def reader(url: str | os.PathLike[str], **options: Any) -> ReadStream | IO[bytes]:
    """``gopen(url, "rb", **options)``."""
    return gopen(url, "rb", **options)
