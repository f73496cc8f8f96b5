"""``create``: write shards from a directory of files or from a recipe file.

Directory mode groups files by key exactly as a WebDataset reader would (key = relative path
up to the first dot of the basename, extension = the rest). A recipe has one
``archive-name source`` line per member; ``source`` is a file path, ``text:...`` (the literal
text) or ``pipe:CMD`` (the command's stdout; refused, like every ``pipe:``, when
WDS_CLOUD_ALLOW_PIPE=0 or WDS_SECURE=1). Members with the same key must be on consecutive
lines; ``#`` starts a comment line.

Shard names: ``-o DIR`` (or an ``s3://``, ``gs://``, ``ais://`` prefix) with ``--pattern``
(default ``shard-%06d.tar``, which must stay inside ``-o``), or ``-o`` holding the integer
format itself, as ``ShardWriter`` takes it: ``-o out/shard-%06d.tar``. Every check (names,
keys, recipe lines, an input with no sample) runs before anything is written, and a command
that fails later removes the shards it wrote and the folders it made.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

from wds_cloud.cli.common import emit_json
from wds_cloud.cli.text import one_line, redact_data, shown
from wds_cloud.errors import ConfigError, WdsCloudError
from wds_cloud.openers.local import is_file_url, url_to_path
from wds_cloud.openers.registry import url_scheme
from wds_cloud.redact import redact_url
from wds_cloud.writing.members import (
    Member,
    directory_members,
    group_members,
    load_sample,
    recipe_members,
)

_DEFAULT_PATTERN = "shard-%06d.tar"
# a printf integer conversion, as ShardWriter formats the shard number ('%%' is a literal %)
_INT_FORMAT = re.compile(r"%(?:%|[-+ #0]*\d*(?:\.\d+)?([diouxX])?)")


def is_shard_pattern(output: str) -> bool:
    """True when ``-o`` holds an integer ``%`` format (``out/shard-%06d.tar``): the shard names.

    In a ``file:`` URL ``%`` is percent-encoding (``file:///data/my%20set``), never a format.
    """
    if is_file_url(output):
        return False
    return any(m.group(1) for m in _INT_FORMAT.finditer(output))


def _check_pattern(pattern: str, output: str) -> None:
    """Refuse a ``--pattern`` without a shard number or whose names leave ``--output``."""
    if "%" not in pattern:
        raise ConfigError(f"create: --pattern {pattern!r} needs a %d-style shard number")
    try:
        name = pattern % 0
    except (TypeError, ValueError):
        return  # _shard_names names the formatting problem
    if name.startswith("/") or ".." in name.split("/") or "\0" in name:
        raise ConfigError(
            f"create: --pattern {pattern!r} would write outside --output "
            f"{redact_url(output)!r}; use a name inside it (no '..' component, no leading '/')"
        )


def _shard_names(args: argparse.Namespace) -> str:
    """The ShardWriter pattern from ``-o`` (a directory or prefix, or itself a pattern) and
    ``--pattern``, checked before anything is written."""
    if is_shard_pattern(args.output):
        if args.pattern is not None:
            raise ConfigError(
                f"create: -o {redact_url(args.output)!r} already holds the shard name pattern; "
                "leave out --pattern (or give -o a directory)"
            )
        target: str = args.output
        flag = "-o"
    else:
        pattern = _DEFAULT_PATTERN if args.pattern is None else args.pattern
        _check_pattern(pattern, args.output)
        # a '%' in -o (a percent-encoded file: URL, a '100%' folder) is literal, not a format
        target, flag = args.output.rstrip("/").replace("%", "%%") + "/" + pattern, "--pattern"
    try:
        first, second = target % 0, target % 1
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"create: {flag} {redact_url(target)!r} must hold exactly one integer format "
            f"such as %06d for the shard number ({exc})"
        ) from exc
    if first == second:
        raise ConfigError(f"create: {flag} {redact_url(target)!r} gives every shard the same name")
    return target


def _source(args: argparse.Namespace) -> list[list[Member]]:
    """The samples to write, grouped and checked (nothing loaded yet); never empty."""
    if (args.directory is None) == (args.recipe is None):
        raise ConfigError("create: give a DIRECTORY or --recipe FILE (one of them)")
    if args.directory is not None:
        samples = group_members(directory_members(args.directory))
        what = f"directory {args.directory!r} holds no files"
    else:
        samples = group_members(recipe_members(args.recipe))
        what = f"recipe {args.recipe!r} lists no members"
    if not samples:
        raise ConfigError(f"create: nothing to write: {what}")
    return samples


def _local_opener(made: list[str]) -> Any:
    """ShardWriter ``opener=`` for local shards: makes the shard's directory first, recording
    the directories it made."""
    from wds_cloud.cli.cleanup import make_dirs
    from wds_cloud.openers.registry import open_sink

    def open_shard(name: str) -> Any:
        make_dirs(os.path.dirname(url_to_path(name)), made)
        return open_sink(name)

    return open_shard


def cmd_create(args: argparse.Namespace) -> int:
    from wds_cloud.cli.cleanup import undo
    from wds_cloud.writing.shardwriter import ShardWriter

    target = _shard_names(args)
    samples = _source(args)
    local = url_scheme(target) == "file" and target != "-"
    made: list[str] = []
    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=len(samples), desc="create", unit="sample", leave=False, file=sys.stderr)
    sink = ShardWriter(
        target,
        maxcount=args.maxcount,
        maxsize=args.maxsize,
        opener=_local_opener(made) if local else None,
    )
    try:
        with sink:
            for members in samples:
                sink.write(load_sample(members))
                if bar is not None:
                    bar.update(1)
    except BaseException as exc:
        left = undo(list(sink.shards), made)
        if left and isinstance(exc, Exception):
            raise WdsCloudError(
                f"{one_line(exc)}; and {len(left)} of the written shards or folders could not "
                f"be removed: {', '.join(redact_url(u) for u in left)}"
            ) from exc
        raise
    finally:
        if bar is not None:
            bar.close()
    shards = list(sink.shards)
    if args.json:
        emit_json(redact_data({"samples": len(samples), "shards": shards}))
    else:
        print(f"wrote {len(samples)} samples into {len(shards)} shards")
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
        "-o",
        "--output",
        default=".",
        help="directory or s3:// gs:// ais:// prefix (default .), or the shard names "
        "themselves: out/shard-%%06d.tar",
    )
    p.add_argument(
        "--pattern",
        help=f"shard names inside -o (default {_DEFAULT_PATTERN.replace('%', '%%')})",
    )
    p.add_argument("--maxcount", type=int, default=100000, help="samples per shard at most")
    p.add_argument("--maxsize", type=float, default=3e9, help="bytes per shard at most")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_create)


__all__ = ["cmd_create", "directory_members", "is_shard_pattern", "recipe_members", "register"]
