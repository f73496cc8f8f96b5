"""Turn a shard specification into a list of shard URLs, listing prefixes and globs.

``list_shards`` accepts what ``expand_urls`` accepts (brace templates, ``::``, ``${VAR}``) and,
in each expanded pattern, globs (``*``, ``?``, ``[...]``; matched per path component, so ``*``
never crosses a ``/``) and prefixes ending in ``/`` (every shard below it, recursively). These
are resolved through the backend's ``list(url)``: it returns the full URLs of the objects whose
URL starts with ``url`` (S3-style key prefix, recursive). Plain URLs without wildcards are
returned as they are, without checking that they exist, unless ``prefixes=True`` (what
``wds-cloud ls`` does): then a plain URL is a name prefix too, as in ``aws s3 ls`` and ``ais
bucket ls --prefix``, and nothing under it is an error (:func:`list_prefixes`).

Every listed result has the scheme that was listed: local listings give absolute paths (or
``file://`` URLs), so a file whose name looks like a URL (``pipe:cmd;x.tar``) is read as the
file it is; only a ``pipe:`` string the user wrote runs a command.

:func:`resolve_shards` is the one shard-spec resolver every entry point calls (``WebDataset``
and the shard lists, ``build_index``/``check_index``/``IndexedWebDataset``, the jobs, every
``wds-cloud`` command): on top of :func:`list_shards` it reads a dataset index JSON, takes an
existing local file or folder as that path, and says how a Python list is read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from wds_cloud.errors import ConfigError, ShardNotFoundError
from wds_cloud.openers.capabilities import Lister, SizedLister
from wds_cloud.openers.local import is_file_url, url_to_path
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme
from wds_cloud.redact import redact_url
from wds_cloud.urls import expand_urls, literal_urls

if TYPE_CHECKING:
    from wds_cloud.index.datasetjson import DatasetIndex

DEFAULT_EXTENSIONS = (".tar", ".tgz", ".tar.gz")
_GLOB_CHARS = "*?["


def _split_query(url: str) -> tuple[str, str]:
    """Split off a ``?name=value`` query; a ``?`` not followed by ``=`` is a glob character."""
    if url_scheme(url) in ("file", "pipe"):
        return url, ""
    base, sep, query = url.rpartition("?")
    if not sep or "=" not in query:
        return url, ""
    return base, sep + query


def _is_pattern(path: str) -> bool:
    return path.endswith("/") or any(c in path for c in _GLOB_CHARS)


def _listing_prefix(pattern: str) -> str:
    """The part of ``pattern`` before the path component holding the first wildcard."""
    first = min((i for i in (pattern.find(c) for c in _GLOB_CHARS) if i >= 0), default=-1)
    if first < 0:
        return pattern  # a prefix ending in "/"
    return pattern[: pattern.rfind("/", 0, first) + 1]


def _matches(candidate: str, pattern: str) -> bool:
    if pattern.endswith("/"):
        return candidate.startswith(pattern)
    cparts = candidate.split("/")
    pparts = pattern.split("/")
    if "**" in pparts:
        return fnmatchcase(candidate, pattern.replace("**/", "*").replace("/**", "*"))
    return len(cparts) == len(pparts) and all(
        fnmatchcase(c, p) for c, p in zip(cparts, pparts, strict=True)
    )


def _check_listed(found: list[str], scheme: str, original: str) -> list[str]:
    """Refuse a listing result that would be read as another scheme than the one listed.

    A listed name is data, never a command: a file called ``pipe:cmd;x.tar`` must come back as
    an absolute path (or a ``file://`` URL), never as a name that parses as ``pipe:``.
    """
    for url in found:
        local_ok = scheme != "file" or os.path.isabs(url) or is_file_url(url)
        if url_scheme(url) != scheme or not local_ok:
            raise ConfigError(
                f"listing {redact_url(original)!r} returned {redact_url(url)!r}, which is not "
                f"{'an absolute path or file: URL' if scheme == 'file' else f'a {scheme} URL'}"
                "; refusing to use it (the backend's list() must return full URLs)"
            )
    return found


def _list(registry: OpenerRegistry, pattern: str, original: str) -> list[str]:
    lister = registry.capability(pattern, Lister)
    scheme = url_scheme(pattern)
    if lister is None:
        raise ConfigError(
            f"cannot list {redact_url(pattern)!r} (from {redact_url(original)!r}): the {scheme} "
            "backend has no listing; give the shard names explicitly, e.g. with a brace "
            "template 'shard-{000000..000099}.tar'"
        )
    if scheme == "file":
        # LocalOpener.list expands globs and walks directories
        return _check_listed(list(lister.list(pattern)), scheme, original)
    found = _check_listed(list(lister.list(_listing_prefix(pattern))), scheme, original)
    return [u for u in found if _matches(u, pattern)]


def list_shards(
    spec: str | Iterable[str],
    *,
    registry: OpenerRegistry | None = None,
    extensions: Sequence[str] | None = DEFAULT_EXTENSIONS,
    prefixes: bool = False,
) -> list[str]:
    """Expand ``spec`` into shard URLs, listing globs and ``/``-terminated prefixes.

    Args:
        spec: a shard specification: ``"s3://bkt/train/"``, ``"gs://bkt/shards/*.tar"``,
            ``"data/shard-{000..009}.tar"``, ``"/data/*.tar::/more/*.tar"``, or a list of them.
            A query string (``?etl=name``) after a listed pattern is kept on every result.
        registry: where the backends come from (the default registry when None).
        extensions: only listed names ending in one of these are kept (case-insensitive);
            None keeps everything. Explicit URLs are never filtered.
        prefixes: also take every plain URL (no wildcard, no final ``/``) as a name prefix,
            as ``aws s3 ls`` and ``ais bucket ls --prefix`` do, and check that something is
            there (see :func:`list_prefixes`). False: plain URLs are returned unchecked.

    Returns:
        The URLs in the order of ``spec``, each listed pattern replaced in place by its sorted
        matches. Repeats given explicitly are kept (``"a.tar::a.tar"`` reads it twice).

    Raises:
        ShardNotFoundError: a glob or prefix matched no shard, naming the pattern; with
            ``prefixes``, a plain URL with nothing at or under it, or a missing bucket.
        ConfigError: a malformed template, or a pattern on a backend that cannot list (http).
    """
    registry = registry or default_registry()
    urls = expand_urls(spec)
    under: dict[str, list[str]] = {}
    if prefixes:
        plain = [
            u
            for u in urls
            if u != "-" and url_scheme(u) != "pipe" and not _is_pattern(_split_query(u)[0])
        ]
        under = list_prefixes(plain, registry=registry, extensions=extensions)
    result: list[str] = []
    for url in urls:
        if url in under:
            result.extend(under[url])
        else:
            result.extend(list_pattern(url, registry=registry, extensions=extensions))
    if not result:
        raise ShardNotFoundError(f"no shards in {spec!r}")
    return result


def list_pattern(
    url: str,
    *,
    registry: OpenerRegistry | None = None,
    extensions: Sequence[str] | None = DEFAULT_EXTENSIONS,
) -> list[str]:
    """Resolve one URL without template expansion: list it if it is a glob or a ``/`` prefix.

    :func:`list_shards` calls this for every URL its spec expands to; call it directly for a
    name that must not be expanded (braces, ``::`` and ``${VAR}`` are taken literally).

    Raises:
        ShardNotFoundError: a glob or prefix matched no shard.
        ConfigError: a pattern on a backend that cannot list, or a listing result that is not
            a URL of the listed scheme.
    """
    base, query = _split_query(url)
    if url_scheme(url) == "pipe" or not _is_pattern(base):
        return [url]
    found = sorted(set(_list(registry or default_registry(), base, url)))
    if extensions is not None:
        suffixes = tuple(e.lower() for e in extensions)
        found = [u for u in found if u.lower().endswith(suffixes)]
        kinds = f" with extension {', '.join(suffixes)}"
    else:
        kinds = ""
    if not found:
        raise ShardNotFoundError(f"no shards{kinds} match {redact_url(url)!r}", url=url)
    return [u + query for u in found]


def list_sizes(url: str, *, registry: OpenerRegistry | None = None) -> list[tuple[str, int | None]]:
    """``(url, size)`` of every object a glob or ``/`` prefix matches, sorted by URL: what
    :func:`list_pattern` lists with ``extensions=None``, with the sizes the backend's listing
    gives (``list_sizes``: S3, GCS, AIStore), so sizing a prefix costs its listing only.

    The size is None where the listing cannot tell it: a backend that lists names only (local
    files: ``os.stat`` them), or a URL with a query (an AIStore ``?etl=`` returns other bytes
    than the stored object's).

    Raises:
        ShardNotFoundError: nothing matches.
        ConfigError: ``url`` is not a glob or prefix, its backend cannot list, or a listing
            result that is not a URL of the listed scheme.
    """
    registry = registry or default_registry()
    base, query = _split_query(url)
    if url_scheme(url) == "pipe" or not _is_pattern(base):
        raise ConfigError(f"list_sizes needs a glob or a prefix ending in '/': {redact_url(url)!r}")
    sizer = registry.capability(base, SizedLister)
    if query or url_scheme(base) == "file" or sizer is None:
        return [(u, None) for u in list_pattern(url, registry=registry, extensions=None)]
    listed = dict(sizer.list_sizes(_listing_prefix(base)))
    found = _check_listed(sorted(listed), url_scheme(base), url)
    out = [(u, listed[u]) for u in found if _matches(u, base)]
    if not out:
        raise ShardNotFoundError(f"no shards match {redact_url(url)!r}", url=url)
    return out


def _group_key(url: str, registry: OpenerRegistry) -> tuple[str, str, str]:
    """URLs that one listing call can answer: same scheme, same scope, same query. The scope is
    the bucket (the first path component), or what the opener's ``listing_scope(url)`` says
    when it has one (``hf://``: the repo at its revision)."""
    base, query = _split_query(url)
    scheme = url_scheme(base)
    scope = getattr(registry.for_url(base), "listing_scope", None) if scheme != "file" else None
    if scope is not None:
        return scheme, scope(base), query
    rest = base.split("://", 1)[1] if "://" in base else base
    return scheme, rest.split("/", 1)[0], query


def _list_local_prefix(
    registry: OpenerRegistry, url: str, extensions: Sequence[str] | None
) -> list[str]:
    """A file itself; a folder walked; else the files of its folder whose path starts so."""
    if os.path.isfile(url_to_path(url)):
        return [url]
    try:
        found = _check_listed(list(registry.for_url(url).list(url)), "file", url)
    except ShardNotFoundError as exc:
        folder = os.path.dirname(url_to_path(url)) or "."
        raise ShardNotFoundError(
            f"no such file or folder: {redact_url(url)!r} (and no folder {folder!r} to look "
            "for names starting so)",
            url=url,
        ) from exc
    return _keep(found, extensions, exact=None)


def _common_prefix(names: Sequence[str]) -> str:
    """The longest string every name starts with (character-wise, as object keys are)."""
    low, high = min(names), max(names)
    n = 0
    while n < min(len(low), len(high)) and low[n] == high[n]:
        n += 1
    return low[:n]


def _keep(found: Iterable[str], extensions: Sequence[str] | None, exact: str | None) -> list[str]:
    """``found`` sorted, without names lacking one of ``extensions`` (``exact`` always kept)."""
    suffixes = tuple(e.lower() for e in extensions) if extensions is not None else None
    return sorted(
        {u for u in found if u == exact or suffixes is None or u.lower().endswith(suffixes)}
    )


def list_prefixes(
    urls: Sequence[str],
    *,
    registry: OpenerRegistry | None = None,
    extensions: Sequence[str] | None = DEFAULT_EXTENSIONS,
) -> dict[str, list[str]]:
    """What is at or under each URL, taken as a name prefix (``aws s3 ls``, ``ais bucket ls
    --prefix``): ``ais://images/shuffled`` gives ``shuffled-000.tar``, ``shuffled/a.tar``...

    The object named exactly by a URL is always kept; the other names only when they end in
    one of ``extensions`` (None keeps all). A local file is itself; a local folder is listed
    recursively; anything else local is a name prefix inside its folder. URLs of one bucket
    (of one repo at one revision on ``hf://``) are answered by one listing of their common
    prefix. A backend that cannot list (http) has
    each URL opened once to check that it exists.

    Returns:
        ``{url: sorted URLs}`` for every URL in ``urls``.

    Raises:
        ShardNotFoundError: nothing is at or under a URL (the message names it and counts the
            others), or the bucket or folder does not exist.
        ConfigError: a listing result that is not a URL of the listed scheme.
    """
    registry = registry or default_registry()
    groups: dict[tuple[str, str, str], list[str]] = {}
    for url in dict.fromkeys(urls):
        groups.setdefault(_group_key(url, registry), []).append(url)
    out: dict[str, list[str]] = {}
    for (scheme, _, query), members in groups.items():
        opener = registry.for_url(members[0])
        lister = registry.capability(members[0], Lister)
        if scheme == "file":
            for url in members:
                out[url] = _list_local_prefix(registry, url, extensions)
        elif lister is None:
            for url in members:
                opener.open(url).close()  # raises ShardNotFoundError when it is missing
                out[url] = [url]
        else:
            bases = [_split_query(u)[0] for u in members]
            common = _common_prefix(bases)
            found = _check_listed(list(lister.list(common)), scheme, members[0])
            for url, base in zip(members, bases, strict=True):
                hits = [u + query for u in found if u.startswith(base)]
                out[url] = _keep(hits, extensions, exact=url)
    missing = [u for u in urls if not out[u]]
    if missing:
        more = (
            f" (nor under {len(missing) - 1} more of the {len(urls)} given)" if missing[1:] else ""
        )
        kinds = f" with extension {', '.join(extensions)}" if extensions is not None else ""
        raise ShardNotFoundError(
            f"no object and no shard{kinds} under {redact_url(missing[0])!r}{more}",
            url=missing[0],
        )
    return out


# -- shard specs -----------------------------------------------------------------------------

_SPEC_SYNTAX = ("{", "}", "::", "${", "\\", *_GLOB_CHARS)


@dataclass(frozen=True)
class ResolvedSpec:
    """What a shard spec stands for.

    Attributes:
        urls: the shard URLs, in order.
        index: the dataset index when the whole spec named one dataset JSON (its sample
            counts; ``build_index`` rewrites it), else None.
    """

    urls: list[str]
    index: DatasetIndex | None = None


def _names_dataset_json(spec: str) -> bool:
    """A single URL or path naming a JSON file (``....json``, query aside): a spec that stands
    for the shards of the wids dataset index it names."""
    if "::" in spec or "{" in spec:
        return False
    path = spec.partition("?")[0] if "://" in spec else spec
    return path.lower().endswith(".json")


def _local_path(spec: str) -> str:
    """An existing local file named by ``spec``, as a URL that reads that file: ``spec`` itself,
    or its absolute path when ``spec`` would read as a URL (``pipe:cmd;x.tar``)."""
    plain = url_scheme(spec) == "file" and not is_file_url(spec)
    return spec if plain else os.path.abspath(spec)


def _dataset(url: str, registry: OpenerRegistry) -> ResolvedSpec:
    # the format's one reader (index.datasetjson: openers and the foundation only)
    from wds_cloud.index.datasetjson import load_dataset_json

    index = load_dataset_json(url, registry=registry)
    if not index.urls:
        raise ConfigError(f"the dataset index {redact_url(url)!r} lists no shards")
    return ResolvedSpec(index.urls, index)


def _resolve_string(spec: str, registry: OpenerRegistry, prefixes: bool) -> ResolvedSpec:
    if spec != "-" and os.path.lexists(spec):  # a name the shell gave: the file, literally
        if os.path.isdir(spec):
            folder = os.path.join(os.path.abspath(spec), "")
            return ResolvedSpec(list_pattern(folder, registry=registry))
        path = _local_path(spec)
        return _dataset(path, registry) if _names_dataset_json(spec) else ResolvedSpec([path])
    if _names_dataset_json(spec):
        return _dataset(spec, registry)
    return ResolvedSpec(list_shards(spec, registry=registry, prefixes=prefixes))


def resolve_spec(
    spec: str | Iterable[Any],
    *,
    registry: OpenerRegistry | None = None,
    literal_paths: bool = False,
    prefixes: bool = False,
) -> ResolvedSpec:
    """:func:`resolve_shards` with the dataset index a spec named (its sample counts)."""
    registry = registry or default_registry()
    if isinstance(spec, str):
        resolved = _resolve_string(spec, registry, prefixes)
    elif literal_paths:
        resolved = ResolvedSpec(literal_urls(spec))
    else:
        items = literal_urls(spec)
        resolved = ResolvedSpec(
            [url for item in items for url in _resolve_string(item, registry, prefixes).urls]
        )
    if not resolved.urls:  # an empty list (a string gives a shard or an error)
        raise ConfigError(f"no shards in {spec!r}")
    return resolved


def resolve_shards(
    spec: str | Iterable[Any],
    *,
    registry: OpenerRegistry | None = None,
    literal_paths: bool = False,
    prefixes: bool = False,
) -> list[str]:
    """The shard URLs a shard spec stands for: the one resolver of every entry point.

    A string is one spec, resolved in this order:

    1. an existing local file or folder (the name as the shell gave it, whatever it holds:
       ``[``, ``{``, ``?``, ``::``, ``pipe:``): a file is itself (made absolute when its name
       would read as a URL, so it is never a command), a folder is listed recursively;
    2. a dataset index JSON (``....json``, no braces or ``::``): its shards, in its order;
    3. anything else goes to :func:`list_shards`: braces, ``::``, ``${VAR}``, globs and
       ``/``-ending prefixes listed on every backend that can list. A plain URL or local path
       with none of these is returned unchecked: its backend reports a missing one when it is
       read (``ShardNotFoundError``, a ``FileNotFoundError``), as webdataset does, so a
       dataset can be built before its shards exist.

    Args:
        spec: a string (one spec), or a list of strings or ``{"url": ...}`` dicts.
        registry: where the backends come from (the default registry when None).
        literal_paths: a list is a list of URLs, taken exactly as given (no braces, globs,
            prefixes, JSON): what ``WebDataset``, the shard lists, the index builders and the
            jobs take, so a list that was resolved once (the job CLI's, a listing's) reads the
            same again, and ``s3://b/x[1].tar`` in an explicit list is that object (webdataset's
            ``SimpleShardList`` takes a list as given too). False: each item is a spec of its
            own, resolved as a string is and joined in order (the command line's arguments).
        prefixes: a plain URL is also a name prefix (``wds-cloud ls``, as ``aws s3 ls``): what
            is at or under it, checked to exist (:func:`list_prefixes`). False: a plain URL is
            the shard it names.

    Returns:
        The URLs, each spec replaced in place by what it stands for.

    Raises:
        ShardNotFoundError: a glob or prefix that matches no shard, a missing folder, bucket
            or dataset JSON (each named).
        ConfigError: an empty result, a malformed template, a JSON that is not a dataset
            index, a pattern on a backend that cannot list (http).
    """
    return resolve_spec(
        spec, registry=registry, literal_paths=literal_paths, prefixes=prefixes
    ).urls
