"""Files to samples, as ``wds-cloud create`` and the convert job read them: a directory's files
or a recipe's lines become ``(key, ext, data or loader, where)`` members, grouped into samples
by the WebDataset key rule (key = path up to the first dot of the basename, extension = the
rest), with every structural error (a key seen again later, a repeated extension, a name with
no extension) found before anything is loaded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from wds_cloud.errors import ConfigError, SampleError, WdsCloudError
from wds_cloud.redact import redact_url

Sample = dict[str, Any]


def split_name(name: str, where: str) -> tuple[str, str]:
    from wds_cloud.core.samples import base_plus_ext

    key, ext = base_plus_ext(name)
    if key is None or not ext:
        raise ConfigError(f"{where}: {name!r} has no KEY.EXT form (need a dot in the basename)")
    return key, ext


Member = tuple[str, str, Any, str]  # (key, ext, data or loader, where)


def group_members(members: Iterable[Member]) -> list[list[Member]]:
    """Group runs of members with the same key into samples, checking keys and extensions.

    Nothing is loaded: every structural error is found before anything is written.
    """
    samples: list[list[Member]] = []
    seen: set[str] = set()
    exts: set[str] = set()
    for member in members:
        key, ext, _, where = member
        if not samples or samples[-1][0][0] != key:
            if key in seen:
                raise SampleError(f"{where}: key {key!r} appears again after other keys")
            seen.add(key)
            exts = set()
            samples.append([])
        if ext.lower() in exts:
            raise SampleError(f"{where}: extension {ext!r} repeated for key {key!r}")
        exts.add(ext.lower())
        samples[-1].append(member)
    return samples


def load_sample(members: list[Member]) -> Sample:
    """The sample of one group, its data loaded (files read, ``pipe:`` commands run)."""
    sample: Sample = {"__key__": members[0][0]}
    for _, ext, data, _ in members:
        sample[ext.lower()] = data() if callable(data) else data
    return sample


def directory_members(root: str) -> Iterator[tuple[str, str, Any, str]]:
    """Every file under ``root`` as ``(key, ext, loader, path)``, sorted by (key, ext)."""
    if not os.path.isdir(root):
        raise ConfigError(f"create: {root!r} is not a directory")
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if name.startswith("."):
                raise ConfigError(f"create: hidden file {path!r} has no key; remove it first")
            key, ext = split_name(rel, path)
            entries.append((key, ext, path))
    entries.sort(key=lambda e: (e[0], e[1]))
    for key, ext, path in entries:
        yield key, ext, (lambda p=path: _read_file(p)), path


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _pipe(source: str, where: str) -> bytes:
    """The stdout of a recipe's ``pipe:CMD`` source, run by the ``pipe:`` opener (and its gate)."""
    from wds_cloud.openers.pipe import PipeCommandError
    from wds_cloud.openers.registry import default_registry

    try:
        with default_registry().open(source) as stream:
            return bytes(stream.read())
    except PipeCommandError as exc:
        err = exc.stderr_tail.splitlines()
        raise ConfigError(
            f"{where}: {redact_url(source)} exited with {exc.returncode}"
            + (f": {err[-1]}" if err else "")
        ) from exc
    except WdsCloudError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def recipe_members(recipe: str) -> Iterator[tuple[str, str, Any, str]]:
    """``(key, ext, loader, 'recipe:line')`` for every line of a recipe file."""
    base = os.path.dirname(os.path.abspath(recipe))
    with open(recipe, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for number, line in enumerate(lines, 1):
        where = f"{recipe}:{number}"
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        parts = stripped.split(None, 1)
        if len(parts) != 2:
            raise ConfigError(f"{where}: expected 'archive-name source', got {stripped!r}")
        name, source = parts
        key, ext = split_name(name, where)
        if source.startswith("text:"):
            text = source[len("text:") :]
            yield key, ext, text.encode(), where
        elif source.startswith("pipe:"):
            yield key, ext, (lambda c=source, w=where: _pipe(c, w)), where
        else:
            path = os.path.join(base, os.path.expanduser(source))
            if not os.path.isfile(path):
                raise ConfigError(f"{where}: source file {source!r} does not exist")
            yield key, ext, (lambda p=path: _read_file(p)), where
