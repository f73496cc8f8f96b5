"""``upload``, ``dsort-spec`` and ``bench``."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from wds_cloud.cli.common import emit_json
from wds_cloud.cli.text import redact_data, shown
from wds_cloud.errors import ConfigError


def cmd_upload(args: argparse.Namespace) -> int:
    from wds_cloud.writing.upload import upload_shards

    urls = upload_shards(
        args.files,
        args.dest,
        concurrency=args.concurrency,
        progress=not args.quiet and sys.stderr.isatty(),
    )
    if args.json:
        emit_json(redact_data({"uploaded": urls}))
    else:
        print(f"uploaded {len(urls)} shards to {shown(args.dest)}")
    return 0


_DSORT_FLAGS = (
    ("input_bck", str),
    ("input_template", str),
    ("input_extension", str),
    ("input_provider", str),
    ("output_bck", str),
    ("output_format", str),
    ("output_extension", str),
    ("output_provider", str),
    ("output_shard_size", str),
    ("algorithm", str),
    ("seed", str),
    ("content_extension", str),
    ("content_key_type", str),
    ("description", str),
    ("max_mem_usage", str),
    ("ekm_file", str),
    ("ekm_file_sep", str),
)


def cmd_dsort_spec(args: argparse.Namespace) -> int:
    from wds_cloud.aistore.dsort import DsortSpec

    fields: dict[str, Any] = {
        name: getattr(args, name) for name, _ in _DSORT_FLAGS if getattr(args, name) is not None
    }
    if args.input_objnames:
        fields["input_objnames"] = args.input_objnames
    if args.decreasing:
        fields["decreasing"] = True
    if args.dry_run:
        fields["dry_run"] = True
    spec = DsortSpec(**fields)
    if args.output:
        path = spec.write(args.output)
        print(f"wrote {shown(path)}")
    else:
        sys.stdout.write(spec.to_yaml() if args.format == "yaml" else spec.to_json())
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from wds_cloud.listing import resolve_shards
    from wds_cloud.tools.bench import bench_urls

    fields = args.fields.split() if args.fields else None
    step = None
    if args.step_ms > 0:
        seconds = args.step_ms / 1000.0

        def step(batch: Any) -> None:
            time.sleep(seconds)

    urls = resolve_shards(args.spec)
    workers = args.workers
    if not args.resampled and workers > len(urls):
        # every DataLoader worker reads whole shards: more workers than shards cannot start
        workers = len(urls)
        print(
            f"wds-cloud bench: {len(urls)} shard(s): using {workers} worker(s) instead of "
            f"{args.workers} (or pass --resampled)",
            file=sys.stderr,
        )
    result = bench_urls(
        urls,
        batch_size=args.batch_size,
        num_workers=workers,
        batches=args.batches,
        window=args.window,
        decode=args.decode,
        fields=fields,
        shuffle_buffer=args.shuffle_buffer,
        step=step,
        progress=not args.json and sys.stderr.isatty(),
        resampled=args.resampled,
        profile=args.profile or args.plot is not None,
        trace=args.trace,
    )
    if args.plot is not None:
        from wds_cloud.observe.plot import plot_bench

        plot_bench(result, args.plot)
    if args.json:
        emit_json(redact_data(result.to_dict()))
    else:
        print(f"{len(urls)} shards, {workers} workers, batch size {args.batch_size}")
        print(result.table())
        if args.trace:
            print(f"trace written to {args.trace} (open it in ui.perfetto.dev)")
        if args.plot:
            print(f"plot written to {args.plot}")
    return 0


def positive_int(value: str) -> int:
    """argparse type: an integer >= 1."""
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def _non_negative(value: str) -> int:
    n = int(value)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def register(sub: Any) -> None:
    """Add ``upload``, ``dsort-spec`` and ``bench`` to ``sub``."""
    p = sub.add_parser("upload", help="upload local shards to s3://, gs://, ais:// or a directory")
    p.add_argument("files", nargs="+", help="local shard files")
    p.add_argument("dest", help="destination prefix (s3://bucket/prefix, gs://..., ais://...)")
    p.add_argument("-j", "--concurrency", type=positive_int, default=4, help="uploads in flight")
    p.add_argument("--json", action="store_true", help="JSON output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_upload)

    p = sub.add_parser("dsort-spec", help="build and validate an AIStore dSort spec")
    for name, typ in _DSORT_FLAGS:
        p.add_argument(
            "--" + name.replace("_", "-"), dest=name, type=typ, required=name == "input_bck"
        )
    p.add_argument("--input-objnames", nargs="+", help="explicit input object names")
    p.add_argument("--decreasing", action="store_true", help="sort in decreasing order")
    p.add_argument("--dry-run", action="store_true", help="spec's dry_run flag")
    p.add_argument("-o", "--output", help="write to FILE (.json, .yaml, .yml)")
    p.add_argument("--format", choices=("json", "yaml"), default="json", help="stdout format")
    p.set_defaults(func=cmd_dsort_spec)

    p = sub.add_parser("bench", help="measure loader throughput on shards (samples/s, MB/s)")
    p.add_argument("spec", nargs="+", help="shard URLs, patterns, globs or prefixes")
    p.add_argument(
        "--workers",
        type=_non_negative,
        default=4,
        help="DataLoader workers (at most one per shard)",
    )
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--batches", type=positive_int, help="stop after N batches (default: one pass)")
    p.add_argument("--window", type=positive_int, default=100, help="batches per timed window")
    p.add_argument("--decode", help="decode spec, e.g. rgb8, torchrgb, pil (default: none)")
    p.add_argument("--fields", help="fields to deliver, e.g. 'jpg;png cls' (default: dicts)")
    p.add_argument("--shuffle-buffer", type=int, default=1000)
    p.add_argument("--resampled", action="store_true", help="draw shards with replacement")
    p.add_argument(
        "--step-ms",
        type=float,
        default=0.0,
        help="simulated training step (sleep) per batch; enables the step-only comparison",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="time every stage; print the per-stage table and a one-line verdict",
    )
    p.add_argument("--trace", metavar="PATH", help="write a Chrome/Perfetto trace (JSON)")
    p.add_argument(
        "--plot",
        metavar="PATH",
        help="draw samples/s over time and the per-stage breakdown (PNG; needs [plot])",
    )
    p.add_argument("--json", action="store_true", help="JSON output")
    p.set_defaults(func=cmd_bench)


__all__ = ["ConfigError", "register"]
