"""``tune SPEC``: search the loader's workers, queues, batch sizes and read settings for the
fastest within a memory budget; print the trials and the ``make_loader(...)`` call."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from wds_cloud.cli.common import emit_json, spec_input
from wds_cloud.cli.misc import positive_int
from wds_cloud.cli.text import redact_data
from wds_cloud.errors import ConfigError
from wds_cloud.redact import redact_text
from wds_cloud.settings import parse_bytes, parse_seconds


def byte_size(value: str) -> int:
    """argparse type: a positive byte size (``8GB``, ``512MiB``, ``1.5G``, ``1048576``)."""
    try:
        n = parse_bytes(value, "--memory-budget")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive byte size, got {value!r}")
    return n


def positive_seconds(value: str) -> float:
    """argparse type: a duration > 0 (``60``, ``90s``, ``2m``)."""
    try:
        seconds = parse_seconds(value, "seconds")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 < seconds < math.inf:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value!r}")
    return seconds


def cmd_tune(args: argparse.Namespace) -> int:
    from wds_cloud.tools.tune import tune

    kw: dict[str, Any] = {"shuffle_buffer": args.shuffle_buffer}
    if args.decode:
        kw["decode"] = args.decode
    if args.fields:
        kw["to_tuple"] = args.fields
    if args.workers is not None:
        kw["num_workers"] = args.workers
    show = not args.json and not args.quiet

    def progress(line: str) -> None:
        print(line, file=sys.stderr)

    result = tune(
        spec_input(args.spec),
        batch_size=args.batch_size,
        seconds=args.seconds,
        memory_budget=args.memory_budget,
        trial_seconds=args.trial_seconds,
        progress=progress if show else None,
        **kw,
    )
    if args.json:
        emit_json(redact_data(result.to_dict()))
    else:
        print(result.table())
        print()
        print(redact_text(result.as_code()), end="")  # credentials in URLs are not shown
    return 0


def register(sub: Any) -> None:
    """Add ``tune`` to ``sub``."""
    p = sub.add_parser(
        "tune",
        help="find the fastest make_loader settings for these shards within a memory budget",
    )
    p.add_argument("spec", nargs="+", help="shard URLs, patterns, globs or prefixes")
    p.add_argument(
        "--batch-size", type=positive_int, default=64, help="samples per batch (default 64)"
    )
    p.add_argument("--decode", help="decode spec, e.g. rgb8, torchrgb, pil (default: none)")
    p.add_argument("--fields", help="fields to deliver, e.g. 'jpg;png cls' (default: dicts)")
    p.add_argument("--shuffle-buffer", type=int, default=1000)
    p.add_argument(
        "--memory-budget",
        type=byte_size,
        help="bytes this process and its workers may hold (PSS): 8GB, 512MiB... "
        "(default: half the memory available)",
    )
    p.add_argument(
        "--seconds", type=positive_seconds, default=60.0, help="time for the whole search"
    )
    p.add_argument(
        "--trial-seconds",
        type=positive_seconds,
        help="measured seconds per trial (default: seconds / 12, at least 1)",
    )
    p.add_argument("--workers", type=int, help="keep num_workers at N (not searched)")
    p.add_argument("--json", action="store_true", help="JSON output (the code as a field)")
    p.add_argument("-q", "--quiet", action="store_true", help="no line per trial on stderr")
    p.set_defaults(func=cmd_tune)


__all__ = ["register"]
