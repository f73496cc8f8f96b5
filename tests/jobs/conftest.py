"""Fixtures for the job tests: one local Ray (2 CPUs, 127.0.0.1, no dashboard) per session,
and the S3 fixtures of ``tests/s3`` (on the session SeaweedFS of ``tests/conftest.py``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.s3.conftest import bucket, raw_client, s3_config, s3_endpoint

__all__ = ["bucket", "raw_client", "s3_config", "s3_endpoint"]

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """A local Ray for the session; workers find ``tests`` (the per-sample functions) and this
    checkout's ``wds_cloud`` through the job's code search path."""
    from wds_cloud.jobs.engines import LOOPBACK_ENV, loopback_only

    before = os.environ.get(LOOPBACK_ENV)
    assert loopback_only() or before == "0", "ray was imported before this fixture"
    import ray
    from ray.job_config import JobConfig

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        job_config=JobConfig(code_search_path=[_ROOT]),
    )
    try:
        yield ray
    finally:
        ray.shutdown()
        if before is None:
            os.environ.pop(LOOPBACK_ENV, None)
