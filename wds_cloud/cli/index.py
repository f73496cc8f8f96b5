"""``index``: build (or ``--check``) shard indexes and the dataset JSON on any backend."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from wds_cloud.cli.common import emit_json, spec_input
from wds_cloud.cli.text import redact_data, shown


def _bar(args: argparse.Namespace) -> bool:
    return not args.quiet and sys.stderr.isatty()


def cmd_check(args: argparse.Namespace) -> int:
    from wds_cloud.index.check import check_index

    checks = check_index(spec_input(args.spec), workers=args.workers, progress=_bar(args))
    bad = [c for c in checks if not c.ok]
    if args.json:
        emit_json(
            redact_data(
                {
                    "shards": len(checks),
                    "ok": len(checks) - len(bad),
                    "checks": [
                        {
                            "url": c.url,
                            "status": c.status,
                            "detail": c.detail,
                            "samples": c.nsamples,
                        }
                        for c in checks
                    ],
                }
            )
        )
    else:
        for c in bad:
            print(f"{c.status.upper():<11} {shown(c.url)}  {shown(c.detail)}")
        samples = sum(c.nsamples or 0 for c in checks if c.ok)
        print(f"{len(checks) - len(bad)} of {len(checks)} indexes OK ({samples} samples)")
    return 1 if bad else 0


def cmd_index(args: argparse.Namespace) -> int:
    if args.check:
        return cmd_check(args)
    from wds_cloud.index.build import build_index

    json_target: str | bool | None = False if args.no_json else args.output
    build = build_index(
        spec_input(args.spec),
        json=json_target,
        workers=args.workers,
        progress=_bar(args),
        name=args.name,
        description=args.description,
        strict=False,
    )
    seconds = max(build.seconds, 1e-9)
    if args.json:
        emit_json(
            redact_data(
                {
                    "shards": len(build.dataset.shards),
                    "samples": build.nsamples,
                    "bytes": build.bytes,
                    "seconds": round(build.seconds, 3),
                    "json": build.json_url,
                    "indexes": build.idx_urls,
                    "failed": [{"url": u, "error": str(e)} for u, e in build.failed],
                }
            )
        )
    else:
        for url, exc in build.failed:
            print(f"FAILED {shown(url)}  {type(exc).__name__}: {shown(exc)}")
        print(
            f"indexed {len(build.idx_urls)} of {len(build.dataset.shards) + _unread(build)} "
            f"shards: {build.nsamples} samples, {build.bytes / 1e6:.1f} MB in {build.seconds:.2f} s "
            f"({build.bytes / 1e6 / seconds:.1f} MB/s, {build.nsamples / seconds:.0f} samples/s)"
        )
        if build.json_url:
            print(f"wrote {shown(build.json_url)}")
    return 1 if build.failed else 0


def _unread(build: Any) -> int:
    listed = {s.url for s in build.dataset.shards}
    return sum(1 for url, _ in build.failed if url not in listed)


def register(sub: Any) -> None:
    """Add the ``index`` subcommand to ``sub``."""
    p = sub.add_parser(
        "index",
        help="write <shard>.idx beside each shard and the dataset JSON (or --check them)",
        description="Index shards on any backend (streamed, several at once): a DALI .idx v1.2 "
        "beside each shard and a wids dataset JSON with every shard's sample count. A single "
        "dataset JSON argument re-indexes its shards and updates it.",
    )
    p.add_argument("spec", nargs="+", help="shard URLs, patterns, globs, prefixes, or a JSON")
    p.add_argument(
        "-o",
        "--output",
        default=None,
        help="dataset JSON to write (default: the JSON given, else index.json beside the first "
        "shard; an existing one is updated)",
    )
    p.add_argument("--no-json", action="store_true", help="write the .idx files only")
    p.add_argument("--check", action="store_true", help="verify existing indexes; write nothing")
    p.add_argument("-w", "--workers", type=int, default=8, help="shards at once (default 8)")
    p.add_argument("--name", default=None, help="dataset name stored in the JSON")
    p.add_argument("--description", default=None, help="description stored in the JSON")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_index)
