"""``python -m wds_cloud.demo`` (deprecated): the same as ``wds-cloud demo`` (the command line runs it)."""

import sys

from wds_cloud.cli import main

raise SystemExit(main(["demo", *sys.argv[1:]]))
