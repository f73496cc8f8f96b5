"""``wds-cloud``: the command line (``python -m wds_cloud.cli`` works too).

Subcommands: ``demo``, ``create``, ``ls``, ``cat``, ``stats``, ``verify``, ``preview``,
``upload``, ``dsort-spec``, ``bench``. Each has ``--help``; those that report take ``--json``.
Expected failures (a missing shard, a corrupt tar, a bad flag value) print one line
``wds-cloud <command>: error: <message>`` on stderr and exit with 1 (2 for usage errors);
``verify`` exits with 1 when it finds a corrupt shard.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from wds_cloud.errors import WdsCloudError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    from wds_cloud.cli.create import register as register_create
    from wds_cloud.cli.misc import register as register_misc
    from wds_cloud.cli.shards import register as register_shards

    parser = argparse.ArgumentParser(
        prog="wds-cloud",
        description="Create, inspect, verify, upload and benchmark WebDataset shards "
        "(local, pipe:, http(s)://, s3://, gs://, ais://).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub.add_parser(
        "demo", help="write a small synthetic dataset and stream it back (see demo --help)"
    )
    register_create(sub)
    register_shards(sub)
    register_misc(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "demo":
        from wds_cloud.demo import main as demo_main

        return demo_main(args_list[1:])
    parser = build_parser()
    args = parser.parse_args(args_list)
    try:
        return int(args.func(args) or 0)
    except (WdsCloudError, OSError, ValueError, LookupError) as exc:
        if isinstance(exc, BrokenPipeError):
            return 141
        message = str(exc) or type(exc).__name__
        print(f"wds-cloud {args.command}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"wds-cloud {args.command}: interrupted", file=sys.stderr)
        return 130
