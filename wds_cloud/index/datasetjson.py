"""webdataset's wids dataset index (a JSON file per dataset): reading, writing, URL resolution.

::

    {"__kind__": "wids-shard-index-v1", "wids_version": 1,
     "name": "train", "description": "...",
     "shardlist": [{"url": "shard-000000.tar", "nsamples": 1000, "filesize": 123456}, ...]}

Shard URLs are relative to the JSON's own location (``shard-000000.tar`` next to
``s3://b/train/index.json`` is ``s3://b/train/shard-000000.tar``) or absolute; a path starting
with ``/`` keeps the JSON's scheme and bucket (as wids' ``urlmerge`` does). A top-level
``base`` (written by ``wids_index create --base``) replaces the JSON's directory as the base,
and ``datasets`` entries (inline ``shardlist``, or ``source_url`` naming another JSON) are
appended to the list as ``wids`` does. The query string of the JSON's URL is not carried over
to its shards (as in wids).

A shard spec naming a ``.json`` stands for its shards wherever specs are taken: the one
shard-spec resolver, :func:`wds_cloud.listing.resolve_shards`, reads it with
:func:`load_dataset_json`.
"""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass, field
from typing import Any

from wds_cloud.errors import ConfigError, ShardReadError
from wds_cloud.openers.registry import OpenerRegistry, default_registry, url_scheme
from wds_cloud.redact import redact_url

KIND = "wids-shard-index-v1"
DEFAULT_NAME = "index.json"


@dataclass(frozen=True)
class ShardInfo:
    """One shard of a dataset index.

    Attributes:
        url: the shard URL, resolved (absolute, or relative to the working directory for a
            local JSON given by a relative path).
        nsamples: samples in the shard (as the sample reader counts them).
        filesize: the shard's size in bytes, when known.
    """

    url: str
    nsamples: int
    filesize: int | None = None


@dataclass
class DatasetIndex:
    """A dataset: its shards and their sample counts.

    Attributes:
        shards: the shards in order.
        name: optional dataset name.
        description: optional free text.
        url: where the JSON was read from or written to.
        extra: other top-level keys of a loaded JSON, written back unchanged.
    """

    shards: list[ShardInfo]
    name: str | None = None
    description: str | None = None
    url: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def nsamples(self) -> int:
        """Samples in the whole dataset."""
        return sum(s.nsamples for s in self.shards)

    @property
    def urls(self) -> list[str]:
        """The shard URLs in order."""
        return [s.url for s in self.shards]

    def to_json(self, at: str | None = None) -> dict[str, Any]:
        """The JSON object, shard URLs made relative to ``at`` (the JSON's URL) where they can."""
        where = at or self.url
        out: dict[str, Any] = {"__kind__": KIND, "wids_version": 1}
        if self.name is not None:
            out["name"] = self.name
        if self.description is not None:
            out["description"] = self.description
        for key, value in self.extra.items():
            out.setdefault(key, value)
        shardlist = []
        for shard in self.shards:
            entry: dict[str, Any] = {
                "url": relative_url(where, shard.url) if where else shard.url,
                "nsamples": shard.nsamples,
            }
            if shard.filesize is not None:
                entry["filesize"] = shard.filesize
            shardlist.append(entry)
        out["shardlist"] = shardlist
        return out

    def dumps(self, at: str | None = None) -> bytes:
        """The JSON text (indented, UTF-8, trailing newline)."""
        return (json.dumps(self.to_json(at), indent=2, ensure_ascii=False) + "\n").encode()

    def merged(self, newer: DatasetIndex) -> DatasetIndex:
        """This index updated with ``newer``: shards with the same URL replaced in place, new
        ones appended; ``newer``'s name and description win when set."""
        position = {s.url: i for i, s in enumerate(self.shards)}
        shards = list(self.shards)
        for shard in newer.shards:
            if shard.url in position:
                shards[position[shard.url]] = shard
            else:
                position[shard.url] = len(shards)
                shards.append(shard)
        return DatasetIndex(
            shards,
            name=newer.name if newer.name is not None else self.name,
            description=newer.description if newer.description is not None else self.description,
            url=newer.url or self.url,
            extra={**self.extra, **newer.extra},
        )


# -- URL resolution -------------------------------------------------------------------------


def _split(url: str) -> tuple[str, str, str]:
    """``(scheme://netloc, path, ?query)`` of a URL; ``("", path, "")`` for local paths."""
    if url_scheme(url) == "file" and url[:5].lower() != "file:":
        return "", url, ""
    scheme, sep, rest = url.partition("://")
    if not sep:  # file:/abs or file:rel
        return url[:5], url[5:], ""
    rest, qsep, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    return f"{scheme}://{netloc}", slash + path, qsep + query


def _is_absolute(ref: str) -> bool:
    scheme = url_scheme(ref)
    return scheme != "file" or ref[:5].lower() == "file:"


def resolve_url(base: str, ref: str) -> str:
    """``ref`` (a shard URL from a dataset JSON) resolved against ``base``, the JSON's URL.

    Raises:
        ConfigError: ``ref`` is relative and ``base`` is a ``pipe:`` command or ``-``.
    """
    if _is_absolute(ref):
        return ref
    if url_scheme(base) == "pipe" or base == "-":
        raise ConfigError(
            f"shard URL {ref!r} is relative, but the dataset JSON came from "
            f"{redact_url(base)!r}, which has no directory"
        )
    prefix, path, _ = _split(base)
    if not prefix:  # a local JSON
        if ref.startswith("/"):
            return os.path.normpath(ref)
        return os.path.normpath(os.path.join(os.path.dirname(path), ref))
    if ref.startswith("/"):
        return prefix + posixpath.normpath(ref)
    ref_path, qsep, query = ref.partition("?")
    directory = posixpath.dirname(path) or "/"
    joined = posixpath.normpath(posixpath.join(directory, ref_path))
    if joined.startswith("//"):
        joined = joined[1:]
    return prefix + joined + qsep + query


def relative_url(base: str, url: str) -> str:
    """``url`` relative to the directory of ``base`` when it lies below it, else ``url``; a
    relative local path is made relative to that directory (it is read against it)."""
    bprefix, bpath, _ = _split(base)
    uprefix, upath, uquery = _split(url)
    if bprefix and not uprefix:  # a local path in a remote JSON: only a file: URL says so
        from wds_cloud.openers.local import path_to_url

        return path_to_url(upath)
    if not bprefix and not uprefix:  # both local paths (a "?" is part of a file name)
        directory = os.path.dirname(os.path.abspath(bpath))
        target = os.path.abspath(upath)
        if os.path.isabs(upath) and not target.startswith(directory.rstrip(os.sep) + os.sep):
            return url
        rel = os.path.relpath(target, directory)  # relative to the JSON's folder, as it is read
        return target if _is_absolute(rel) else rel  # "pipe:x.tar" would read as a command
    if bprefix != uprefix or uquery or "?" in upath:
        return url
    directory = posixpath.dirname(bpath).rstrip("/") + "/"
    rest = upath[len(directory) :]
    if not upath.startswith(directory) or not rest:
        return url
    if any(part in ("", ".", "..") for part in rest.split("/")) or _is_absolute(rest):
        return url  # would not resolve back to the same URL
    return rest


def default_json_url(shard_urls: list[str]) -> str:
    """``index.json`` in the directory of the first shard."""
    if not shard_urls:
        raise ConfigError("no shards to write a dataset index for")
    first = shard_urls[0]
    prefix, path, _ = _split(first)
    if not prefix:
        return os.path.join(os.path.dirname(path), DEFAULT_NAME)
    return prefix + posixpath.join(posixpath.dirname(path) or "/", DEFAULT_NAME)


# -- reading and writing ---------------------------------------------------------------------


def _shardlist(value: Any, base: str, where: str) -> list[ShardInfo]:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: 'shardlist' must be a list")
    shards = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            raise ConfigError(f"{where}: shardlist[{i}] must be an object with a 'url' string")
        nsamples = entry.get("nsamples")
        if not isinstance(nsamples, int) or isinstance(nsamples, bool) or nsamples < 0:
            raise ConfigError(
                f"{where}: shardlist[{i}] ({entry['url']!r}) needs 'nsamples', an integer >= 0"
            )
        filesize = entry.get("filesize")
        shards.append(
            ShardInfo(
                resolve_url(base, entry["url"]),
                nsamples,
                filesize if isinstance(filesize, int) else None,
            )
        )
    return shards


def _read_json(url: str, registry: OpenerRegistry) -> Any:
    stream = registry.open(url)
    try:
        data = stream.read()
    finally:
        stream.close()
    try:
        return json.loads(data)
    except ValueError as exc:
        raise ShardReadError(f"not a JSON dataset index: {exc}", url=url) from None


def parse_dataset_json(
    obj: Any, url: str, *, registry: OpenerRegistry | None = None
) -> DatasetIndex:
    """A :class:`DatasetIndex` from a loaded JSON object found at ``url``.

    Raises:
        ConfigError: not a wids dataset index, or a malformed shard list.
    """
    where = redact_url(url)
    if not isinstance(obj, dict):
        raise ConfigError(f"{where}: a dataset index is a JSON object, not {type(obj).__name__}")
    if obj.get("__kind__") not in (None, KIND) or obj.get("wids_version", 1) != 1:
        raise ConfigError(
            f"{where}: not a wids dataset index (__kind__={obj.get('__kind__')!r}, "
            f"wids_version={obj.get('wids_version')!r}; expected {KIND!r}, 1)"
        )
    if "shardlist" not in obj and "datasets" not in obj:
        raise ConfigError(f"{where}: a dataset index needs a 'shardlist'")
    base = url
    if isinstance(obj.get("base"), str):  # a directory: resolve names against a file in it
        base = resolve_url(url, obj["base"].rstrip("/") + "/_")
    shards = _shardlist(obj.get("shardlist", []), base, where)
    for i, component in enumerate(obj.get("datasets") or []):
        if not isinstance(component, dict):
            raise ConfigError(f"{where}: datasets[{i}] must be an object")
        sub_base = base
        if isinstance(component.get("source_url"), str):
            sub_url = resolve_url(url, component["source_url"])
            shards.extend(load_dataset_json(sub_url, registry=registry).shards)
            continue
        if isinstance(component.get("base"), str):
            sub_base = resolve_url(url, component["base"].rstrip("/") + "/_")
        shards.extend(_shardlist(component.get("shardlist"), sub_base, f"{where} datasets[{i}]"))
    known = {"__kind__", "wids_version", "name", "description", "shardlist", "base", "datasets"}
    return DatasetIndex(
        shards,
        name=obj.get("name") if isinstance(obj.get("name"), str) else None,
        description=obj.get("description") if isinstance(obj.get("description"), str) else None,
        url=url,
        extra={k: v for k, v in obj.items() if k not in known},
    )


def load_dataset_json(url: str, *, registry: OpenerRegistry | None = None) -> DatasetIndex:
    """Read the dataset index at ``url`` (any backend) with its shard URLs resolved.

    Raises:
        ShardNotFoundError: no such file or object.
        ConfigError: not a wids dataset index.
    """
    registry = registry or default_registry()
    return parse_dataset_json(_read_json(url, registry), url, registry=registry)


def save_dataset_json(
    index: DatasetIndex,
    url: str,
    *,
    registry: OpenerRegistry | None = None,
    update: bool = False,
) -> DatasetIndex:
    """Write ``index`` to ``url`` (committed on success only); returns what was written.

    Args:
        index: the dataset.
        url: the JSON's destination (any backend with ``create``).
        registry: opener registry (the default one when None).
        update: merge into an existing JSON at ``url`` (see :meth:`DatasetIndex.merged`).
    """
    registry = registry or default_registry()
    if update:
        try:
            existing = load_dataset_json(url, registry=registry)
        except FileNotFoundError:
            pass
        else:
            index = existing.merged(index)
    index = DatasetIndex(index.shards, index.name, index.description, url, dict(index.extra))
    from wds_cloud.openers.registry import open_sink

    with open_sink(url, registry) as sink:
        sink.write(index.dumps(url))
    return index


__all__ = [
    "DEFAULT_NAME",
    "KIND",
    "DatasetIndex",
    "ShardInfo",
    "default_json_url",
    "load_dataset_json",
    "parse_dataset_json",
    "relative_url",
    "resolve_url",
    "save_dataset_json",
]
