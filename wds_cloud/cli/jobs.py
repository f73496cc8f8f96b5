"""``job``: dataset jobs on an engine (``docs/jobs.md``).

- ``job convert SOURCE -o OUT``: files grouped by key (a directory, an ``s3://b/raw/``
  prefix; ``--maxcount`` and ``--maxsize`` on both), Parquet (a local file or directory, or
  on any backend a ``.parquet`` object, glob or prefix: ``s3://b/t/``, ``gs://b/t/*.parquet``,
  ``https://h/x.parquet``; ``--key`` column), or shards -> shards.
- ``job reshard SPEC... -o OUT``: new ``--maxcount``/``--maxsize``/``--nshards``,
  ``--shuffle --seed N`` for a global shuffle across shards.
- ``job map SPEC... -o OUT --fn MODULE:FUNCTION``: a per-sample function, shard for shard.
- ``job index SPEC...``: ``.idx`` beside every shard and the dataset JSON.
- ``job verify SPEC...``: parse every shard; exit 1 when one is corrupt.

Every job takes ``--engine local|ray`` (``--address`` for an existing Ray cluster, else a local
Ray on 127.0.0.1), prints progress on stderr and a summary (samples in, out, skipped with
reasons, shards, bytes, time). Shard-writing jobs keep a manifest of committed shards beside
the output: running the same command again after an interruption skips them.
``-o`` is a folder or prefix (names from ``--pattern``, default ``shard-%06d.tar``) or the
names themselves (``-o s3://b/out/shard-%06d.tar``). ``--map``/``--select``/``--fn`` name a
function ``package.module:function`` importable on every worker.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from wds_cloud.cli.common import emit_json, spec_input
from wds_cloud.cli.text import redact_data, shown
from wds_cloud.errors import ConfigError

_DEFAULT_PATTERN = "shard-%06d.tar"


def load_function(spec: str | None, flag: str) -> Any:
    """The function ``package.module:function`` names (None for None)."""
    if spec is None:
        return None
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ConfigError(f"{flag} {spec!r}: expected package.module:function")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{flag} {spec!r}: {type(exc).__name__}: {exc}") from exc
    if not callable(fn):
        raise ConfigError(f"{flag} {spec!r} is not callable")
    return fn


def output_pattern(output: str, pattern: str | None) -> str:
    """Shard names from ``-o`` (a folder/prefix, or itself a pattern) and ``--pattern``."""
    from wds_cloud.cli.create import is_shard_pattern

    if is_shard_pattern(output):
        if pattern is not None:
            raise ConfigError(f"-o {output!r} already holds the shard name pattern; no --pattern")
        return output
    pattern = _DEFAULT_PATTERN if pattern is None else pattern
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise ConfigError(f"--pattern {pattern!r} must name shards inside -o")
    return output.rstrip("/").replace("%", "%%") + "/" + pattern


def _engine(args: argparse.Namespace) -> Any:
    from wds_cloud.jobs.engines import make_engine

    if args.engine == "ray":
        return make_engine("ray", address=args.address, max_retries=args.max_retries)
    return make_engine("local", address=args.address, workers=args.workers)


def _common(args: argparse.Namespace) -> dict[str, Any]:
    return {"engine": _engine(args), "progress": not args.quiet}


def _writing(args: argparse.Namespace) -> dict[str, Any]:
    manifest: str | bool | None = False if args.no_manifest else args.manifest
    return {**_common(args), "manifest": manifest}


def _report(args: argparse.Namespace, summary: Any) -> None:
    if args.json:
        emit_json(redact_data(summary.to_json()))
    else:
        print("\n".join(shown(line) for line in summary.text().splitlines()))


def _convert_source(args: argparse.Namespace) -> Any:
    """One argument as it is (``convert`` tells its kind); several Parquet names as a list;
    several others are shard specs, each resolved (as ``reshard``/``map`` take them)."""
    from wds_cloud.jobs.convert import is_parquet_name

    if len(args.source) == 1:
        return args.source[0]
    if args.source_kind == "parquet" or (
        args.source_kind == "auto" and all(is_parquet_name(s) for s in args.source)
    ):
        return list(args.source)
    return spec_input(args.source)


def cmd_convert(args: argparse.Namespace) -> int:
    from wds_cloud.jobs.convert import convert

    summary = convert(
        _convert_source(args),
        output_pattern(args.output, args.pattern),
        maxcount=args.maxcount,
        maxsize=args.maxsize,
        map=load_function(args.map, "--map"),
        select=load_function(args.select, "--select"),
        key=args.key,
        columns=args.columns.split(",") if args.columns else None,
        kind=args.source_kind,
        **_writing(args),
    )
    _report(args, summary)
    return 0


def cmd_reshard(args: argparse.Namespace) -> int:
    from wds_cloud.jobs.reshard import reshard

    if args.nshards is None and args.maxcount is None and args.maxsize is None:
        raise ConfigError("give --maxcount, --maxsize or --nshards")
    summary = reshard(
        spec_input(args.spec),
        output_pattern(args.output, args.pattern),
        maxcount=args.maxcount,
        maxsize=args.maxsize,
        nshards=args.nshards,
        shuffle=args.shuffle,
        seed=args.seed,
        map=load_function(args.map, "--map"),
        select=load_function(args.select, "--select"),
        dsort={"auto": None, "yes": True, "no": False}[args.dsort],
        **_writing(args),
    )
    _report(args, summary)
    return 0


def cmd_map(args: argparse.Namespace) -> int:
    from wds_cloud.jobs.mapjob import map_shards

    summary = map_shards(
        spec_input(args.spec),
        output_pattern(args.output, args.pattern),
        load_function(args.fn, "--fn"),
        select=load_function(args.select, "--select"),
        **_writing(args),
    )
    _report(args, summary)
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from wds_cloud.jobs.indexjob import index_job

    summary = index_job(
        spec_input(args.spec),
        json=False if args.no_json else args.output,
        name=args.name,
        **_common(args),
    )
    _report(args, summary)
    if not args.json:
        for failure in summary.extra["failed"]:
            print(f"FAILED {shown(failure['url'])}  {shown(failure['error'])}")
        if summary.extra["json"]:
            print(f"wrote {shown(summary.extra['json'])}")
    return 1 if summary.extra["failed"] else 0


def cmd_verify(args: argparse.Namespace) -> int:
    from wds_cloud.jobs.indexjob import verify_job

    summary = verify_job(spec_input(args.spec), **_common(args))
    _report(args, summary)
    corrupt = summary.extra["corrupt"]
    if not args.json:
        for r in corrupt:
            where = f" at byte {r['offset']}" if r.get("offset") is not None else ""
            print(f"CORRUPT {shown(r['url'])}{where}: {shown(r.get('error'))}")
        print(f"{len(summary.tasks) - len(corrupt)} of {len(summary.tasks)} shards OK")
    return 1 if corrupt else 0


def _engine_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=("local", "ray"), default="local", help="default local")
    p.add_argument("--address", help="Ray cluster address (default: a local Ray on 127.0.0.1)")
    p.add_argument("-w", "--workers", type=int, default=1, help="local engine: threads")
    p.add_argument(
        "--max-retries", type=int, default=3, help="ray: reruns of a task whose worker died"
    )
    p.add_argument("--json", action="store_true", help="JSON summary")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")


def _output_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", required=True, help="folder/prefix, or out/shard-%%06d.tar")
    p.add_argument("--pattern", help="shard names inside -o (default shard-%%06d.tar)")
    p.add_argument(
        "--manifest", help="manifest URL (default: beside the shards, NAME.manifest.json)"
    )
    p.add_argument("--no-manifest", action="store_true", help="keep no manifest (no resume)")


def register(sub: Any) -> None:
    """Add ``job`` and its subcommands to ``sub``."""
    job = sub.add_parser(
        "job",
        help="convert, reshard, map, index, verify datasets on the local or the Ray engine",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    jobs = job.add_subparsers(dest="job", metavar="JOB", required=True)

    p = jobs.add_parser(
        "convert",
        help="files by key, Parquet (local or any URL) or shards -> shards",
        description="Files grouped by key (a directory or an object prefix ending in /), a "
        "Parquet dataset (a local .parquet file or directory, or a .parquet object, glob or "
        "prefix on s3://, gs://, ais://, http(s)://, read by ranged reads), or shards -> "
        "WebDataset shards. --maxsize cuts files from a directory or a prefix as reshard cuts "
        "(a file larger alone gets a shard); Parquet is cut by --maxcount rows.",
    )
    p.add_argument(
        "source", nargs="+", help="directory, s3://b/prefix/, .parquet (local or URL), shards"
    )
    p.add_argument(
        "--from",
        dest="source_kind",
        default="auto",
        choices=("auto", "files", "parquet", "shards"),
        help="input kind",
    )
    p.add_argument("--maxcount", type=int, default=100000, help="samples per shard at most")
    p.add_argument(
        "--maxsize",
        type=float,
        default=None,
        help="tar bytes per shard at most, from the input sizes (files: local or an object "
        "prefix; shards); not for Parquet",
    )
    p.add_argument("--map", help="per-sample function package.module:function")
    p.add_argument("--select", help="per-sample filter package.module:function")
    p.add_argument("--key", help="Parquet: the key column")
    p.add_argument("--columns", help="Parquet: columns to write, comma-separated")
    _output_flags(p)
    _engine_flags(p)
    p.set_defaults(func=cmd_convert)

    p = jobs.add_parser("reshard", help="new shard size or count, optional global shuffle")
    p.add_argument("spec", nargs="+", help="shard URLs, patterns, prefixes, a dataset JSON")
    p.add_argument("--maxcount", type=int, default=None, help="samples per shard at most")
    p.add_argument("--maxsize", type=float, default=None, help="bytes per shard at most")
    p.add_argument("--nshards", type=int, default=None, help="this many shards instead")
    p.add_argument("--shuffle", action="store_true", help="shuffle samples across shards")
    p.add_argument("--seed", type=int, default=0, help="shuffle seed (default 0)")
    p.add_argument("--map", help="per-sample function package.module:function")
    p.add_argument("--select", help="per-sample filter package.module:function")
    p.add_argument(
        "--dsort",
        choices=("auto", "yes", "no"),
        default="auto",
        help="a shuffled ais:// to ais:// reshard by --maxsize runs as one AIStore dSort job "
        "(auto, the default; yes: refuse otherwise; no: always on --engine)",
    )
    _output_flags(p)
    _engine_flags(p)
    p.set_defaults(func=cmd_reshard)

    p = jobs.add_parser("map", help="a per-sample function, shard for shard")
    p.add_argument("spec", nargs="+", help="shard URLs, patterns, prefixes, a dataset JSON")
    p.add_argument("--fn", required=True, help="package.module:function (None drops a sample)")
    p.add_argument("--select", help="per-sample filter package.module:function")
    _output_flags(p)
    _engine_flags(p)
    p.set_defaults(func=cmd_map)

    p = jobs.add_parser("index", help=".idx beside every shard and the dataset JSON")
    p.add_argument("spec", nargs="+", help="shard URLs, patterns, prefixes")
    p.add_argument("-o", "--output", help="dataset JSON (default index.json beside the shards)")
    p.add_argument("--no-json", action="store_true", help="write the .idx files only")
    p.add_argument("--name", help="dataset name stored in the JSON")
    _engine_flags(p)
    p.set_defaults(func=cmd_index)

    p = jobs.add_parser("verify", help="parse every shard; exit 1 when one is corrupt")
    p.add_argument("spec", nargs="+", help="shard URLs, patterns, prefixes")
    _engine_flags(p)
    p.set_defaults(func=cmd_verify)
    for command in jobs.choices.values():
        command.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )


__all__ = ["load_function", "output_pattern", "register"]
