"""Fixtures for the S3 backend tests, on the session's auth-enabled SeaweedFS server
(``seaweed`` in ``tests/conftest.py``).

The server runs with one identity (``ACCESS_KEY``/``SECRET_KEY``), so wrong credentials are
refused. Credentials are passed to the opener's config explicitly, never via ``os.environ``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.support import tarbuild
from tests.support.faulty_proxy import faulty_proxy
from tests.support.seaweed import (
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    SeaweedServer,
    boto3_client,
    create_bucket,
)
from wds_cloud.openers.s3.opener import S3Config, S3Opener

__all__ = ["ACCESS_KEY", "REGION", "SECRET_KEY", "faulty_proxy"]


_bucket_counter = itertools.count()


@pytest.fixture(scope="session")
def s3_endpoint(seaweed: SeaweedServer) -> str:
    """``http://127.0.0.1:<port>`` of the S3 server."""
    return seaweed.endpoint_url


def make_config(endpoint: str, **overrides: Any) -> S3Config:
    """An :class:`S3Config` for the test server with the test credentials."""
    values: dict[str, Any] = {
        "endpoint_url": endpoint,
        "region": REGION,
        "access_key_id": ACCESS_KEY,
        "secret_access_key": SECRET_KEY,
        "backoff": 0.01,
    }
    values.update(overrides)
    return S3Config(**values)


@pytest.fixture(scope="session")
def s3_config(s3_endpoint: str) -> S3Config:
    """Opener config pointing at the test server."""
    return make_config(s3_endpoint)


@pytest.fixture(scope="session")
def raw_client(s3_endpoint: str) -> Any:
    """A plain boto3 client for arranging and checking test data."""
    return boto3_client(s3_endpoint)


@pytest.fixture
def bucket(raw_client: Any) -> str:
    """A fresh, empty bucket for one test (retries while the filer finishes starting)."""
    return create_bucket(
        raw_client, f"test-{next(_bucket_counter):04d}-{int(time.time() * 1000) % 100000}"
    )


@pytest.fixture
def opener(s3_config: S3Config) -> S3Opener:
    """An opener for the test server."""
    return S3Opener(s3_config)


def build_shard(index: int, samples: int, *, payload: int = 100) -> tuple[bytes, list[str]]:
    """A WebDataset tar with ``samples`` samples (``.txt`` + ``.bin``); returns (bytes, keys)."""
    keys = [f"shard{index:04d}/sample{i:06d}" for i in range(samples)]
    members = [
        (f"{key}.{ext}", data)
        for i, key in enumerate(keys)
        for ext, data in (
            ("txt", f"{index}:{i}".encode()),
            ("bin", bytes([(index + i) % 256]) * payload),
        )
    ]
    return tarbuild.tar_bytes(members, mtime=0), keys


@pytest.fixture
def put_shards(raw_client: Any, bucket: str) -> Callable[..., list[tuple[str, list[str]]]]:
    """``put_shards(n, samples, payload=...)`` uploads n shards; returns [(url, keys)]."""

    def put(
        n: int, samples: int, *, payload: int = 100, prefix: str = "shards/"
    ) -> list[tuple[str, list[str]]]:
        result = []
        for i in range(n):
            data, keys = build_shard(i, samples, payload=payload)
            key = f"{prefix}shard-{i:04d}.tar"
            raw_client.put_object(Bucket=bucket, Key=key, Body=data)
            result.append((f"s3://{bucket}/{key}", keys))
        return result

    return put
