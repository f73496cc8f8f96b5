"""``ls``, ``cat``, ``stats``, ``verify`` and ``preview``: read-only shard inspection."""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from typing import Any

from wds_cloud.cli.common import emit_json, percentile, progress
from wds_cloud.cli.text import printable, redact_data, shown
from wds_cloud.errors import ConfigError, ShardNotFoundError
from wds_cloud.listing import resolve_shards
from wds_cloud.tools.inspect import sample_sizes, verify_shard


def _bar_enabled(args: argparse.Namespace) -> bool:
    return not args.quiet and sys.stderr.isatty()


def cmd_ls(args: argparse.Namespace) -> int:
    urls = resolve_shards(args.spec, prefixes=True)
    if not args.samples:
        if args.json:
            emit_json(redact_data({"shards": urls}))
        else:
            for url in urls:
                print(shown(url))
        return 0
    listing = []
    for url in urls:
        samples = [{"key": key, "files": sizes} for key, sizes in sample_sizes(url)]
        listing.append({"url": url, "samples": samples})
        if not args.json:
            print(f"{shown(url)}  ({len(samples)} samples)")
            for s in samples:
                files = "  ".join(f"{printable(ext)}:{size}" for ext, size in s["files"].items())
                print(f"  {printable(s['key'])}  {files}")
    if args.json:
        emit_json(redact_data({"shards": listing}))
    return 0


def cmd_cat(args: argparse.Namespace) -> int:
    from wds_cloud.core.samples import base_plus_ext
    from wds_cloud.core.tar import iter_tar
    from wds_cloud.openers.registry import open_url

    want_key, want_ext = base_plus_ext(args.member)
    urls = resolve_shards(args.url)
    if len(urls) != 1:
        raise ConfigError(f"cat reads one shard; {args.url!r} names {len(urls)}")
    url = urls[0]
    stream = open_url(url)
    try:
        for name, data in iter_tar(stream, url=url):
            if name == args.member or (
                want_key is not None
                and base_plus_ext(name) == (want_key, want_ext.lower() if want_ext else None)
            ):
                out = sys.stdout.buffer
                out.write(data)
                out.flush()
                return 0
    finally:
        stream.close()
    raise ShardNotFoundError(f"no member {args.member!r} in the shard", url=args.url)


def cmd_stats(args: argparse.Namespace) -> int:
    urls = resolve_shards(args.spec)
    ext_counts: Counter[str] = Counter()
    sizes: list[int] = []
    for url in progress(urls, total=len(urls), desc="stats", enabled=_bar_enabled(args)):
        for _key, files in sample_sizes(url):
            ext_counts.update(files.keys())
            sizes.append(sum(files.values()))
    sizes.sort()
    result: dict[str, Any] = {
        "shards": len(urls),
        "samples": len(sizes),
        "bytes": sum(sizes),
        "extensions": dict(sorted(ext_counts.items())),
        "sample_size": {
            "min": sizes[0] if sizes else 0,
            "median": int(statistics.median(sizes)) if sizes else 0,
            "p95": percentile(sizes, 0.95),
            "max": sizes[-1] if sizes else 0,
        },
    }
    if args.json:
        emit_json(result)
        return 0
    print(f"shards   {result['shards']}")
    print(f"samples  {result['samples']}")
    print(f"bytes    {result['bytes']}")
    print("extensions")
    for ext, n in result["extensions"].items():
        print(f"  {printable(ext):<12} {n}")
    dist = result["sample_size"]
    print(
        f"sample size (bytes)  min {dist['min']}  median {dist['median']}  "
        f"p95 {dist['p95']}  max {dist['max']}"
    )
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    urls = resolve_shards(args.spec)
    reports = [
        verify_shard(url)
        for url in progress(urls, total=len(urls), desc="verify", enabled=_bar_enabled(args))
    ]
    bad = [r for r in reports if not r["ok"]]
    if args.json:
        emit_json(redact_data({"shards": len(reports), "corrupt": len(bad), "reports": reports}))
    else:
        for r in reports:
            for w in r["warnings"]:
                print(f"WARNING {shown(r['url'])}  offset={w['offset']}  {shown(w['warning'])}")
        for r in bad:
            print(
                f"CORRUPT {shown(r['url'])}  offset={r['offset']}  member={shown(r['member'])}  "
                f"{r['type']}: {shown(r['error'])}"
            )
        good = sum(r["samples"] for r in reports if r["ok"])
        print(f"{len(reports) - len(bad)} of {len(reports)} shards OK ({good} samples)")
    return 1 if bad else 0


def cmd_preview(args: argparse.Namespace) -> int:
    from wds_cloud.tools.preview import contact_sheet

    sheet = contact_sheet(
        resolve_shards(args.spec),
        args.output,
        count=args.count,
        columns=args.columns,
        thumb=args.thumb,
    )
    if args.json:
        emit_json(redact_data(sheet.to_dict()))
    else:
        print(f"wrote {shown(sheet.path)}: {sheet.images} images, {sheet.width}x{sheet.height} px")
    return 0


def register(sub: Any) -> None:
    """Add the inspection subcommands to ``sub``."""
    p = sub.add_parser(
        "ls",
        help="list shards under a URL/prefix/glob (or a shard's samples)",
        description="List shards. A plain URL is a name prefix, as in 'aws s3 ls' and 'ais "
        "bucket ls --prefix': 'ls ais://images/shuffled' lists shuffled-000.tar, "
        "shuffled/a.tar... (the object named exactly is listed whatever its extension, "
        "other names only when they end in .tar, .tgz or .tar.gz). A path, prefix, bucket "
        "or shard that does not exist is an error (exit 1).",
    )
    p.add_argument(
        "spec", nargs="+", help="shard URL or name prefix, brace pattern, glob, prefix ending in /"
    )
    p.add_argument("--samples", action="store_true", help="list each shard's samples and files")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("cat", help="write one member of a shard to stdout")
    p.add_argument("url", help="the shard")
    p.add_argument("member", help="KEY.EXT (the member name; the extension is case-insensitive)")
    p.set_defaults(func=cmd_cat)

    for name, func, helptext in (
        ("stats", cmd_stats, "samples, extensions and sample sizes over shards"),
        ("verify", cmd_verify, "parse every shard fully; list corrupt ones, exit 1 if any"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("spec", nargs="+", help="shard URLs, patterns, globs or prefixes")
        p.add_argument("--json", action="store_true", help="JSON output")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
        p.set_defaults(func=func)

    p = sub.add_parser("preview", help="PNG contact sheet of the first N image samples")
    p.add_argument("spec", nargs="+", help="shard URLs, patterns, globs or prefixes")
    p.add_argument("-o", "--output", default="preview.png", help="PNG file (default %(default)s)")
    p.add_argument("-n", "--count", type=int, default=16, help="images (default %(default)s)")
    p.add_argument("--columns", type=int, default=4, help="thumbnails per row")
    p.add_argument("--thumb", type=int, default=128, help="thumbnail size in pixels")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(func=cmd_preview)
