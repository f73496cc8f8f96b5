"""``create``: write shards from a directory of files or from a recipe file.

Directory mode groups files by key exactly as a WebDataset reader would (key = relative path
up to the first dot of the basename, extension = the rest). A recipe has one
``archive-name source`` line per member; ``source`` is a file path, ``text:...`` (the literal
text) or ``pipe:CMD`` (the command's stdout; refused, like every ``pipe:``, when
WDS_CLOUD_ALLOW_PIPE=0 or WDS_SECURE=1). Members with the same key must be on consecutive
lines; ``#`` starts a comment line. Shard names (``--pattern``) must stay inside ``--output``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

from wds_cloud.cli.common import emit_json
from wds_cloud.cli.text import redact_data, shown
from wds_cloud.errors import ConfigError, SampleError, WdsCloudError
from wds_cloud.openers.local import url_to_path
from wds_cloud.openers.registry import url_scheme
from wds_cloud.redact import redact_url

Sample = dict[str, Any]


def _split(name: str, where: str) -> tuple[str, str]:
    from wds_cloud.core.samples import base_plus_ext

    key, ext = base_plus_ext(name)
    if key is None or not ext:
        raise ConfigError(f"{where}: {name!r} has no KEY.EXT form (need a dot in the basename)")
    return key, ext


def _group(members: Iterator[tuple[str, str, Any, str]]) -> Iterator[Sample]:
    """Turn ``(key, ext, data-or-loader, where)`` runs with the same key into samples."""
    sample: Sample | None = None
    seen: set[str] = set()
    for key, ext, data, where in members:
        if sample is None or sample["__key__"] != key:
            if sample is not None:
                yield sample
            if key in seen:
                raise SampleError(f"{where}: key {key!r} appears again after other keys")
            seen.add(key)
            sample = {"__key__": key}
        if ext.lower() in sample:
            raise SampleError(f"{where}: extension {ext!r} repeated for key {key!r}")
        sample[ext.lower()] = data() if callable(data) else data
    if sample is not None:
        yield sample


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
            key, ext = _split(rel, path)
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
        key, ext = _split(name, where)
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


def _check_pattern(pattern: str, output: str) -> None:
    """Refuse a ``--pattern`` without a shard number or whose names leave ``--output``."""
    if "%" not in pattern:
        raise ConfigError(f"create: --pattern {pattern!r} needs a %d-style shard number")
    try:
        name = pattern % 0
    except (TypeError, ValueError):
        return  # ShardWriter names the formatting problem
    if name.startswith("/") or ".." in name.split("/") or "\0" in name:
        raise ConfigError(
            f"create: --pattern {pattern!r} would write outside --output "
            f"{redact_url(output)!r}; use a name inside it (no '..' component, no leading '/')"
        )


def cmd_create(args: argparse.Namespace) -> int:
    from wds_cloud.writing.shardwriter import ShardWriter

    if (args.directory is None) == (args.recipe is None):
        raise ConfigError("create: give a DIRECTORY or --recipe FILE (one of them)")
    _check_pattern(args.pattern, args.output)
    # a '%' in --output (a percent-encoded file: URL) is literal, not a format
    target = args.output.rstrip("/").replace("%", "%%") + "/" + args.pattern
    if url_scheme(args.output) == "file" and args.output != "-":
        os.makedirs(url_to_path(args.output), exist_ok=True)
    members = (
        directory_members(args.directory)
        if args.directory is not None
        else recipe_members(args.recipe)
    )
    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(desc="create", unit="sample", leave=False, file=sys.stderr)
    count = 0
    with ShardWriter(target, maxcount=args.maxcount, maxsize=args.maxsize) as sink:
        for sample in _group(members):
            sink.write(sample)
            count += 1
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    shards = list(sink.shards)
    if args.json:
        emit_json(redact_data({"samples": count, "shards": shards}))
    else:
        print(f"wrote {count} samples into {len(shards)} shards")
        for url in shards:
            print(f"  {shown(url)}")
    return 0


def register(sub: Any) -> None:
    """Add ``create`` to ``sub``."""
    p = sub.add_parser(
        "create",
        help="write shards from a directory or a recipe file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory", nargs="?", help="files grouped by key (KEY.EXT names)")
    p.add_argument("--recipe", help="file of 'archive-name source' lines (path, text:, pipe:)")
    p.add_argument(
        "-o", "--output", default=".", help="directory or s3:// gs:// ais:// prefix (default .)"
    )
    p.add_argument(
        "--pattern", default="shard-%06d.tar", help="shard name pattern (default %(default)s)"
    )
    p.add_argument("--maxcount", type=int, default=100000, help="samples per shard at most")
    p.add_argument("--maxsize", type=float, default=3e9, help="bytes per shard at most")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_create)


__all__ = ["cmd_create", "directory_members", "recipe_members", "register"]
