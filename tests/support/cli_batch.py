"""Run many ``wds-cloud`` command lines in one process: ``python -m tests.support.cli_batch``
reads a JSON list of argument lists on stdin and writes a JSON list of ``{"rc", "stdout",
"stderr"}`` on stdout, one per command line, in order.

Each command line goes through :func:`wds_cloud.cli.main`, the function ``python -m
wds_cloud.cli`` runs, with its standard output and error captured; the process (its
environment, its working folder) is the one the caller started, so a table of commands costs
one interpreter start instead of one each.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import Any


def run(argvs: list[list[str]]) -> list[dict[str, Any]]:
    """``main(argv)`` for every ``argv``; its exit status and what it printed."""
    from wds_cloud.cli import main

    results = []
    for argv in argvs:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:  # argparse's usage errors
                rc = exc.code if isinstance(exc.code, int) else 2
        results.append({"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()})
    return results


if __name__ == "__main__":
    json.dump(run(json.load(sys.stdin)), sys.stdout)
