"""``wds-cloud``: the command line (``python -m wds_cloud.cli`` works too).

Subcommands:

- ``demo``: a small synthetic dataset, written and streamed back.
- ``create DIR|--recipe FILE -o OUT``: write shards; ``-o`` is a folder or prefix (names from
  ``--pattern``) or the shard names themselves (``-o out/shard-%06d.tar``). An input with no
  sample is an error; a failed run removes the shards and folders it made.
- ``ls SPEC``: list shards; a plain URL is a name prefix (``ls ais://images/shuffled``, as
  ``aws s3 ls``); nothing there, a missing bucket or path, is an error.
- ``cat``, ``stats``, ``verify``, ``preview``: inspect shards.
- ``upload``, ``uploads list|abort``: upload shards; incomplete S3 multipart uploads.
- ``dsort-spec``: build an AIStore dSort spec from flags.
- ``dsort start SPEC|-``, ``dsort wait JOB``, ``dsort abort JOB``: run dSort jobs (old spec
  key names accepted with a warning naming the current key).
- ``index SPEC...``: build shard indexes (``.idx`` beside each shard, the dataset JSON);
  ``--check`` verifies existing ones.
- ``job convert|reshard|map|index|verify``: dataset jobs on ``--engine local|ray``
  (``docs/jobs.md``).
- ``bench SPEC``: loader throughput by timed windows (mean and variance of the window time);
  a run too short for a window after the first gives the wall-clock rate only, and says so.
- ``tune SPEC``: search ``make_loader``'s workers, queues, batch sizes and read settings under
  a memory budget; print the trials and the call to paste.

Each has ``--help``; those that report take ``--json``. Every failure, expected or not, prints
one line ``wds-cloud <command>: error: <message>`` on stderr (credentials in URLs redacted,
control characters escaped) and exits with 1; usage errors exit with 2, Ctrl-C with 130, a
closed output pipe with 141. ``verify`` exits with 1 when it finds a corrupt shard, ``dsort
wait`` when the job failed, was aborted or outlived ``--timeout``. The global ``--debug`` flag
(before or after the subcommand) also prints the traceback and DEBUG log lines.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    from wds_cloud.cli.ais import register as register_ais
    from wds_cloud.cli.create import register as register_create
    from wds_cloud.cli.demo import register as register_demo
    from wds_cloud.cli.dsort import register as register_dsort
    from wds_cloud.cli.index import register as register_index
    from wds_cloud.cli.jobs import register as register_jobs
    from wds_cloud.cli.misc import register as register_misc
    from wds_cloud.cli.shards import register as register_shards
    from wds_cloud.cli.tune import register as register_tune
    from wds_cloud.cli.uploads import register as register_uploads

    parser = argparse.ArgumentParser(
        prog="wds-cloud",
        description="Create, inspect, verify, upload and benchmark WebDataset shards "
        "(local, pipe:, http(s)://, s3://, gs://, ais://).",
    )
    parser.add_argument(
        "--debug", action="store_true", help="on errors, also print the traceback; log DEBUG"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    register_demo(sub)
    register_create(sub)
    register_shards(sub)
    register_misc(sub)
    register_tune(sub)
    register_uploads(sub)
    register_dsort(sub)
    register_index(sub)
    register_ais(sub)
    register_jobs(sub)
    for command in sub.choices.values():
        command.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    from wds_cloud.cli.text import cli_logging, one_line

    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    debug = bool(args.debug)
    with cli_logging(debug):
        try:
            return int(args.func(args) or 0)
        except KeyboardInterrupt:
            print(f"wds-cloud {args.command}: interrupted", file=sys.stderr)
            return 130
        except BrokenPipeError:
            return 141
        except Exception as exc:
            if debug:
                print(shown_traceback(exc), file=sys.stderr, end="")
            print(f"wds-cloud {args.command}: error: {one_line(exc)}", file=sys.stderr)
            return 1


def shown_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` (its causes included) with URLs redacted."""
    from wds_cloud.redact import redact_text

    return redact_text("".join(traceback.format_exception(exc)))
