"""``python -m wds_cloud.cli``."""

from wds_cloud.cli import main

raise SystemExit(main())
