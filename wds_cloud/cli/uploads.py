"""``uploads list`` and ``uploads abort``: incomplete multipart uploads left by killed writers.

S3 only: AIStore's SDK has no call that lists multipart uploads in progress, and GCS resumable
upload sessions cannot be listed at all (they expire a week after they start). ``abort`` is a
dry run unless ``--yes`` is given.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from wds_cloud.cli.common import emit_json
from wds_cloud.cli.text import redact_data, shown
from wds_cloud.errors import ConfigError, UploadError

_NOT_LISTABLE = {
    "gs": "GCS resumable upload sessions cannot be listed; an unfinished one expires a week "
    "after it started and never becomes an object",
    "ais": "the aistore SDK offers no call that lists multipart uploads in progress",
}


def _opener(url: str) -> Any:
    from wds_cloud.openers.registry import default_registry, url_scheme

    scheme = url_scheme(url)
    if scheme in _NOT_LISTABLE:
        raise ConfigError(f"cannot list incomplete uploads under {url!r}: {_NOT_LISTABLE[scheme]}")
    if scheme != "s3":
        raise ConfigError(f"incomplete uploads exist only on object stores; use s3://, not {url!r}")
    from wds_cloud.openers.s3.opener import S3Opener

    opener = default_registry().for_url(url)
    if not isinstance(opener, S3Opener):
        raise ConfigError(
            f"the opener registered for s3:// ({type(opener).__name__}) is not S3Opener"
        )
    return opener


def _find(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    from wds_cloud.openers.s3.uploads import list_incomplete_uploads, parse_duration

    older = parse_duration(args.older_than) if args.older_than else None
    opener = _opener(args.prefix)
    return opener, list_incomplete_uploads(args.prefix, opener=opener, older_than=older)


def _line(upload: Any) -> str:
    when = upload.initiated.strftime("%Y-%m-%d %H:%M:%S UTC") if upload.initiated else "?"
    return f"{when}  {shown(upload.url)}  {shown(upload.upload_id)}"


def cmd_list(args: argparse.Namespace) -> int:
    _, uploads = _find(args)
    if args.json:
        emit_json(redact_data({"uploads": [u.to_dict() for u in uploads]}))
        return 0
    for upload in uploads:
        print(_line(upload))
    print(f"{len(uploads)} incomplete upload(s) under {shown(args.prefix)}", file=sys.stderr)
    return 0


def cmd_abort(args: argparse.Namespace) -> int:
    from wds_cloud.openers.s3.uploads import abort_upload

    opener, uploads = _find(args)
    aborted: list[Any] = []
    failed: list[tuple[Any, str]] = []
    if args.yes:
        for upload in uploads:
            try:
                abort_upload(upload, opener=opener)
                aborted.append(upload)
            except UploadError as exc:
                failed.append((upload, str(exc)))
    if args.json:
        report = {
            "dry_run": not args.yes,
            "found": [u.to_dict() for u in uploads],
            "aborted": [u.to_dict() for u in aborted],
            "failed": [{**u.to_dict(), "error": e} for u, e in failed],
        }
        emit_json(redact_data(report))
    else:
        for upload in aborted if args.yes else uploads:
            print(("aborted  " if args.yes else "would abort  ") + _line(upload))
        for upload, error in failed:
            print(f"FAILED  {_line(upload)}  {shown(error)}")
        if args.yes:
            print(f"aborted {len(aborted)} of {len(uploads)} incomplete upload(s)", file=sys.stderr)
        else:
            print(
                f"dry run: {len(uploads)} incomplete upload(s) found; pass --yes to abort them",
                file=sys.stderr,
            )
    return 1 if failed else 0


def register(sub: Any) -> None:
    """Add ``uploads list`` and ``uploads abort`` to ``sub``."""
    p = sub.add_parser(
        "uploads",
        help="list or abort incomplete multipart uploads under an s3:// prefix",
        description=__doc__,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, func, helptext in (
        ("list", cmd_list, "list incomplete uploads under PREFIX"),
        ("abort", cmd_abort, "abort incomplete uploads under PREFIX (dry run without --yes)"),
    ):
        q = actions.add_parser(name, help=helptext)
        q.add_argument("prefix", metavar="PREFIX", help="s3://bucket/prefix")
        q.add_argument(
            "--older-than",
            metavar="DURATION",
            help="only uploads started at least this long ago: 90s, 30m, 12h, 7d, 2w",
        )
        q.add_argument("--json", action="store_true", help="JSON output")
        if name == "abort":
            q.add_argument("--yes", action="store_true", help="really abort (default: dry run)")
        q.set_defaults(func=func)
