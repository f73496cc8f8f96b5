"""Keeping credentials out of what wds_cloud shows: messages, log lines, reprs, CLI output.

Every place that puts a URL into text meant for people (exception messages, ``logging`` calls,
command-line output) passes it through :func:`redact_url`; every configuration class that holds a
credential masks it in its ``repr`` with :func:`mask`.
"""

from __future__ import annotations

import re
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


# ``scheme://user:password@`` anywhere in a string (also inside a ``pipe:`` command).
_USERINFO = re.compile(r"([A-Za-z][\w+.-]*://[^\s/@:]*):[^\s/@]*@")


def redact_url(url: str) -> str:
    """``url`` with its password and credential-bearing query values replaced by ``***``.

    ``http://user:pw@host/x.tar?X-Amz-Signature=abc`` becomes
    ``http://user:***@host/x.tar?X-Amz-Signature=***``; a ``user:password@`` inside a longer
    string (a ``pipe:curl ...`` command) is masked too. Strings without secrets come back
    unchanged.
    """
    if "://" not in url:
        return url
    url = _USERINFO.sub(rf"\1:{MASK}@", url)
    if not url[:1].isalpha() or url.startswith("pipe:"):
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
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


def mask(value: object) -> str:
    """The repr of a credential field: ``'***'`` when set, ``None`` when not."""
    return repr(None) if value is None else repr(MASK)
