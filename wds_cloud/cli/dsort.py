"""``dsort start``, ``dsort wait`` and ``dsort abort``: run AIStore dSort jobs.

``start SPEC`` reads a JSON/YAML spec file, or ``-`` for standard input (JSON or YAML), checks
it as :func:`wds_cloud.aistore.dsort.validate` does (old key names such as ``extension`` or ``bck`` are
accepted, each with a warning naming the current key), starts the job and prints its id.
``wait JOB`` polls the job, with a progress bar on stderr (shards created / to create) when
stderr is a terminal, and exits with 0 when the job finished, 1 when it failed or was aborted
(the job's errors in the message) or is still running after ``--timeout``. The cluster is
``--endpoint`` or ``AIS_ENDPOINT``; the AuthN token comes from ``AIS_AUTHN_TOKEN``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import warnings
from typing import Any

import yaml

from wds_cloud.cli.common import emit_json
from wds_cloud.cli.text import shown
from wds_cloud.errors import ConfigError, DsortSpecError
from wds_cloud.openers.ais.config import AIS_SETTINGS
from wds_cloud.settings import env_first

__all__ = ["read_spec", "register"]


def read_spec(source: str) -> dict[str, Any]:
    """The validated spec in the file ``source``, or on standard input for ``-``.

    Raises:
        DsortSpecError: unreadable or invalid spec (``.field`` names the key).
    """
    from wds_cloud.aistore.dsort import load_spec, validate

    if source != "-":
        return load_spec(source)
    text = sys.stdin.read()
    try:
        try:
            data = json.loads(text)
        except ValueError:
            data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DsortSpecError(f"standard input: neither JSON nor YAML: {exc}") from exc
    try:
        return validate(data)
    except DsortSpecError as exc:
        raise DsortSpecError(f"standard input: {exc.reason}", field=exc.field) from exc


def _endpoint(args: argparse.Namespace) -> str:
    """``--endpoint``, else ``WDS_CLOUD_AIS_ENDPOINT`` or ``AIS_ENDPOINT``; never a guess."""
    if args.endpoint:
        return str(args.endpoint)
    found = env_first(AIS_SETTINGS.variables("endpoint"))
    if found is None:
        raise ConfigError(
            "no AIStore endpoint: pass --endpoint URL or set AIS_ENDPOINT (or WDS_CLOUD_AIS_ENDPOINT)"
        )
    return found[1]


def _print_warnings(command: str, caught: list[warnings.WarningMessage]) -> None:
    """Each distinct warning once (the spec is checked again when the job starts)."""
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f"wds-cloud dsort {command}: warning: {shown(message)}", file=sys.stderr)


def cmd_start(args: argparse.Namespace) -> int:
    from wds_cloud.aistore import dsort

    endpoint = _endpoint(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            job = dsort.start(read_spec(args.spec), endpoint=endpoint)
        finally:
            _print_warnings("start", caught)
    if args.json:
        emit_json({"job_id": job})
    else:
        print(job)
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    from wds_cloud.aistore import dsort

    result = dsort.wait(
        args.job,
        timeout=math.inf if args.timeout is None else args.timeout,
        progress=not args.quiet and sys.stderr.isatty(),
        endpoint=_endpoint(args),
        poll_interval=args.poll_interval,
    )
    if args.json:
        emit_json(dataclasses.asdict(result))
        return 0
    took = "" if result.elapsed_s is None else f" in {result.elapsed_s:.1f} s"
    print(
        f"dSort {shown(result.job_id)} finished{took}: {result.shards_created} shards created "
        f"from {result.input_shards} input shards ({result.members} tar members, "
        f"{result.extracted_bytes} bytes)"
    )
    for warning in result.warnings:
        print(f"wds-cloud dsort wait: warning: {shown(warning)}", file=sys.stderr)
    return 0


def cmd_abort(args: argparse.Namespace) -> int:
    from wds_cloud.aistore import dsort

    dsort.abort(args.job, endpoint=_endpoint(args))
    print(f"aborted {shown(args.job)}")
    return 0


def _seconds(value: str) -> float:
    seconds = float(value)
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return seconds


def register(sub: Any) -> None:
    """Add ``dsort start|wait|abort`` to ``sub``."""
    p = sub.add_parser(
        "dsort",
        help="start, wait for or abort an AIStore dSort job",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    q = actions.add_parser("start", help="check a spec and start the job; prints the job id")
    q.add_argument("spec", metavar="SPEC", help="spec file (.json, .yaml, .yml) or - for stdin")
    q.add_argument("--json", action="store_true", help='print {"job_id": ...}')
    q.set_defaults(func=cmd_start)
    q = actions.add_parser("wait", help="wait for a job: exit 0 when it finished, 1 if it failed")
    q.add_argument("job", metavar="JOB", help="job id (srt-...)")
    q.add_argument("--timeout", type=_seconds, help="give up after SECONDS (default: never)")
    q.add_argument(
        "--poll-interval", type=_seconds, default=1.0, help="seconds between status requests"
    )
    q.add_argument("--json", action="store_true", help="print the job summary as JSON")
    q.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    q.set_defaults(func=cmd_wait)
    q = actions.add_parser("abort", help="abort a running job")
    q.add_argument("job", metavar="JOB", help="job id (srt-...)")
    q.set_defaults(func=cmd_abort)
    for name, q in actions.choices.items():
        q.add_argument("--endpoint", help="AIStore URL (default: AIS_ENDPOINT)")
        q.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        q.set_defaults(command=f"dsort {name}")
