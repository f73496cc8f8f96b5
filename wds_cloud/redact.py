"""Keeping credentials out of what wds_cloud shows: messages, log lines, reprs, CLI output.

Every place that puts a URL into text meant for people (exception messages, ``logging`` calls,
command-line output) passes it through :func:`redact_url` (one URL) or :func:`redact_text` (a
message that may hold several); every configuration class that holds a credential masks it in
its ``repr`` with :func:`mask`, :func:`mask_headers` or :func:`config_repr`. The exception tree
(:mod:`wds_cloud.errors`) runs :func:`redact_text` over every message it is given, so a URL
named in any wds_cloud exception is shown redacted; the ``url`` attribute keeps it as given.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

#: Shown instead of a secret.
MASK = "***"

# Query parameters that carry credentials in presigned or tokenised URLs (S3, GCS, Azure SAS,
# CloudFront, OAuth), compared case-insensitively.
_SECRET_PARAMS = frozenset(
    {
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
        "x-goog-signature",
        "x-goog-credential",
        "signature",
        "sig",
        "token",
        "access_token",
        "api_key",
        "apikey",
        "key",
        "password",
        "secret",
        "policy",
        "key-pair-id",
    }
)

# ``scheme://user:password@`` anywhere in a string (also inside a ``pipe:`` command). The
# password runs to the last ``@`` before the next ``/`` or blank, so a raw ``@`` or ``:`` in it
# is masked too.
_USERINFO = re.compile(r"([A-Za-z][\w+.-]*://[^\s/@:]*):[^\s/]*@")
# One URL inside a longer text: up to a blank or a quote.
_URL_IN_TEXT = re.compile(r"[A-Za-z][\w+.-]*://[^\s'\"<>`]+")
_TRAILING = ".,;:!)]}"

# Credentials outside a URL: Azure connection strings (``AccountKey=...;``,
# ``SharedAccessSignature=...;``) and SAS tokens (``sv=...&sig=...``), case-insensitive.
_LOOSE_SECRETS = re.compile(r"(?i)\b(AccountKey|SharedAccessSignature|sig)=([A-Za-z0-9%+/=_-]+)")

# Request headers whose values are credentials, by exact name, prefix or part of the name.
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
_SECRET_HEADER_PREFIXES = ("x-amz-", "x-goog-")
_SECRET_HEADER_WORDS = ("token", "key", "secret", "auth", "password", "session", "signature")


# Azure URLs in adlfs's spelling put the container before the "@", not a user:
# ``abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/blob``.
_CONTAINER_AT_SCHEMES = frozenset({"abfs", "abfss", "az", "azure"})


def _names_container(scheme: str, netloc: str) -> bool:
    return scheme.lower() in _CONTAINER_AT_SCHEMES and ":" not in netloc.rpartition("@")[0]


def _redact_one(url: str) -> str:
    url = _USERINFO.sub(rf"\1:{MASK}@", url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc and not _names_container(parts.scheme, netloc):
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if colon else f"{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in _SECRET_PARAMS for k, _ in pairs):
            query = "&".join(
                f"{quote(k, safe='')}={MASK if k.lower() in _SECRET_PARAMS else quote(v, safe='')}"
                for k, v in pairs
            )
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_url(url: str) -> str:
    """``url`` with its password and credential-bearing query values replaced by ``***``.

    ``http://user:pw@host/x.tar?X-Amz-Signature=abc`` becomes
    ``http://user:***@host/x.tar?X-Amz-Signature=***``; URLs inside a longer string (a
    ``pipe:curl ...`` command) are redacted the same way. Strings without secrets come back
    unchanged.
    """
    if "://" not in url:
        return url
    if url[:1].isalpha() and not url.startswith("pipe:") and not any(c.isspace() for c in url):
        return _redact_one(url)
    return redact_text(url)


def _redact_match(match: re.Match[str]) -> str:
    token = match.group(0)
    core = token.rstrip(_TRAILING)
    return _redact_one(core) + token[len(core) :]


def redact_text(text: str) -> str:
    """``text`` with every URL in it passed through :func:`redact_url` (messages, log lines),
    and the credentials that appear outside URLs masked: an Azure connection string's
    ``AccountKey=`` and ``SharedAccessSignature=``, a bare SAS token's ``sig=``."""
    if "=" in text:
        text = _LOOSE_SECRETS.sub(rf"\1={MASK}", text)
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(_redact_match, text)


def mask(value: object) -> str:
    """The repr of a credential field: ``'***'`` when set, ``None`` when not."""
    return repr(None) if value is None else repr(MASK)


def is_secret_header(name: str) -> bool:
    """True for request headers that carry credentials (``Authorization``, ``X-Amz-*``, ...)."""
    low = name.lower()
    return (
        low in _SECRET_HEADERS
        or low.startswith(_SECRET_HEADER_PREFIXES)
        or any(word in low for word in _SECRET_HEADER_WORDS)
    )


def mask_headers(headers: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A copy of ``headers`` with the values of credential headers replaced by ``***``."""
    if headers is None:
        return None
    return {k: MASK if is_secret_header(str(k)) else v for k, v in headers.items()}


def config_repr(obj: Any, *, secrets: Iterable[str] = (), headers: Iterable[str] = ()) -> str:
    """The dataclass repr of a configuration with its credentials masked.

    Fields named in ``secrets`` show as ``'***'`` (or None), mappings named in ``headers`` have
    their credential headers masked, and every other string field is passed through
    :func:`redact_url` (an endpoint may carry a password).
    """
    hidden, header_fields = set(secrets), set(headers)
    shown = []
    for f in dataclasses.fields(obj):
        if not f.repr:
            continue
        value = getattr(obj, f.name)
        if f.name in hidden:
            text = mask(value)
        elif f.name in header_fields:
            text = repr(mask_headers(value))
        elif isinstance(value, str):
            text = repr(redact_url(value))
        else:
            text = repr(value)
        shown.append(f"{f.name}={text}")
    return f"{type(obj).__name__}({', '.join(shown)})"


class RedactingFilter(logging.Filter):
    """A logging filter that redacts URLs in the formatted message of every record it sees.

    Attach it to a handler (``handler.addFilter(RedactingFilter())``): handler filters see the
    records of every logger below the one the handler is on. ``wds-cloud`` installs it on its
    own stderr handler.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
