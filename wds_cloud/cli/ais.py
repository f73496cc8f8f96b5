"""``ais transform`` and ``ais status``: offline ETL on AIStore (bucket to bucket).

``transform SRC DST --etl NAME`` runs the ETL called NAME (already running on the cluster) on
every object of the bucket SRC, or those under ``--prefix``, or those named in
``--objects-file`` (one name per line, ``-`` for standard input), and writes the results into
DST (created when missing). It waits with a progress bar on stderr (objects done / selected)
and exits with 0 when every object was transformed, 1 when objects failed (each named on
stderr with the error) or the job was aborted. ``--no-wait`` prints the job id and returns at
once; ``status JOB --etl NAME`` then shows the job (``--wait`` follows it to the end, with the
same exit codes). ``--dry-run`` prints ``SOURCE -> DESTINATION`` names without starting a job.
The cluster is ``--endpoint`` or ``AIS_ENDPOINT``; the AuthN token comes from
``AIS_AUTHN_TOKEN``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from typing import TYPE_CHECKING, Any

from wds_cloud.cli.common import emit_json
from wds_cloud.cli.text import shown
from wds_cloud.errors import ConfigError

if TYPE_CHECKING:
    from wds_cloud.aistore.transform import TransformResult

__all__ = ["register"]


def _ext(value: str) -> tuple[str, str]:
    old, sep, new = value.partition("=")
    if not sep or not old.strip(".") or not new.strip("."):
        raise argparse.ArgumentTypeError(f"expected OLD=NEW (e.g. tar=out.tar), got {value!r}")
    return old.strip("."), new


def _seconds(value: str) -> float:
    seconds = float(value)
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return seconds


def _read_objects(path: str) -> list[str]:
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except OSError as exc:
        raise ConfigError(f"--objects-file {path}: {exc.strerror or exc}") from exc
    names = [line.strip() for line in text.splitlines() if line.strip()]
    if not names:
        raise ConfigError(f"--objects-file {path}: no object names in it")
    return names


def _report(command: str, result: TransformResult, as_json: bool) -> int:
    """Print the outcome; the exit status (1 when objects failed or the job aborted)."""
    if as_json:
        emit_json(dataclasses.asdict(result) | {"success": result.success})
    for failure in result.failures:
        print(
            f"wds-cloud {command}: failed: {shown(failure.url)} ({failure.code}): "
            f"{shown(failure.brief)}",
            file=sys.stderr,
        )
    unnamed = result.failed - len(result.failures)
    if unnamed > 0:
        print(
            f"wds-cloud {command}: {unnamed} more object(s) failed "
            "(the cluster names at most 128 per job and target)",
            file=sys.stderr,
        )
    took = "" if result.elapsed_s is None else f" in {result.elapsed_s:.1f} s"
    total = "" if result.total is None else f"/{result.total}"
    state = "finished" if result.finished else "running"
    if result.aborted:
        state = f"aborted ({shown(result.error.splitlines()[0] if result.error else 'stopped')})"
    line = (
        f"ETL {shown(result.etl)} {shown(result.src)} -> {shown(result.dst)} {state}{took}: "
        f"{result.done}{total} objects transformed ({result.bytes} bytes), "
        f"{result.failed} failed [job={shown(result.job_id)}]"
    )
    print(line, file=sys.stderr if as_json else sys.stdout)
    failed = result.finished and not result.success
    return 1 if failed or result.aborted else 0


def cmd_transform(args: argparse.Namespace) -> int:
    from wds_cloud.aistore import transform as at

    objects = _read_objects(args.objects_file) if args.objects_file else None
    ext = dict(args.ext) if args.ext else None
    if args.dry_run:
        plan = at.plan_transform(
            args.src,
            prefix=args.prefix,
            objects=objects,
            ext=ext,
            prepend=args.prepend,
            endpoint=args.endpoint,
        )
        if args.json:
            emit_json([{"source": s, "destination": d} for s, d in plan])
        else:
            for src, dst in plan:
                print(f"{shown(src)} -> {shown(dst)}")
            print(f"{len(plan)} object(s) would be transformed (dry run)", file=sys.stderr)
        return 0
    job = at.start_transform(
        args.src,
        args.dst,
        args.etl,
        prefix=args.prefix,
        objects=objects,
        ext=ext,
        prepend=args.prepend,
        continue_on_error=not args.stop_on_error,
        endpoint=args.endpoint,
    )
    if args.no_wait:
        if args.json:
            emit_json(dataclasses.asdict(job))
        else:
            print(job.job_id)
        return 0
    return _wait(args, job)


def _wait(args: argparse.Namespace, job: Any) -> int:
    from wds_cloud.aistore import transform as at

    try:
        result = at.wait_transform(
            job,
            etl=args.etl,
            timeout=math.inf if args.timeout is None else args.timeout,
            progress=not args.quiet and sys.stderr.isatty(),
            poll_interval=args.poll_interval,
            endpoint=args.endpoint,
        )
    except at.TransformError as exc:
        if exc.result is None or not exc.result.finished:
            raise
        result = exc.result
    return _report(args.command, result, args.json)


def cmd_status(args: argparse.Namespace) -> int:
    from wds_cloud.aistore import transform as at

    if args.wait:
        return _wait(args, args.job)
    result = at.transform_status(args.job, etl=args.etl, endpoint=args.endpoint)
    return _report(args.command, result, args.json)


def register(sub: Any) -> None:
    """Add ``ais transform|status`` to ``sub``."""
    p = sub.add_parser(
        "ais",
        help="AIStore jobs: offline ETL (bucket transform)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    q = actions.add_parser(
        "transform", help="transform a bucket, prefix or object list with an ETL"
    )
    q.add_argument("src", metavar="SRC_BUCKET", help="source bucket (NAME or ais://NAME)")
    q.add_argument("dst", metavar="DST_BUCKET", help="destination bucket (created when missing)")
    q.add_argument("--etl", required=True, help="name of an ETL running on the cluster")
    pick = q.add_mutually_exclusive_group()
    pick.add_argument("--prefix", default="", help="only objects whose names start with PREFIX")
    pick.add_argument(
        "--objects-file", metavar="FILE", help="object names, one a line (- for stdin)"
    )
    q.add_argument(
        "--ext",
        type=_ext,
        action="append",
        metavar="OLD=NEW",
        help="rename the last extension OLD to NEW in destination names (repeatable)",
    )
    q.add_argument("--prepend", default="", help="prefix added to every destination name")
    q.add_argument("--dry-run", action="store_true", help="print source -> destination names")
    q.add_argument("--no-wait", action="store_true", help="print the job id and return")
    q.add_argument(
        "--stop-on-error", action="store_true", help="abort the job at the first failed object"
    )
    q.set_defaults(func=cmd_transform)
    s = actions.add_parser("status", help="show (or --wait for) a transform job")
    s.add_argument("job", metavar="JOB", help="job id printed by transform --no-wait")
    s.add_argument("--etl", required=True, help="the job's ETL name (its errors are kept there)")
    s.add_argument("--wait", action="store_true", help="follow the job to its end")
    s.set_defaults(func=cmd_status)
    for name, q in actions.choices.items():
        q.add_argument("--endpoint", help="AIStore URL (default: AIS_ENDPOINT)")
        q.add_argument("--json", action="store_true", help="print the result as JSON")
        q.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
        q.add_argument("--timeout", type=_seconds, help="give up waiting after SECONDS")
        q.add_argument(
            "--poll-interval", type=_seconds, default=1.0, help="seconds between status requests"
        )
        q.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        q.set_defaults(command=f"ais {name}")
