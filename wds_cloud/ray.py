"""Ray Data interop (``pip install 'wds_cloud[ray]'``): :func:`read_dataset` and
:func:`write_dataset`. Importing this module does not import Ray; calling them does."""

from __future__ import annotations

from wds_cloud.jobs.raydata import read_dataset, write_dataset

__all__ = ["read_dataset", "write_dataset"]
