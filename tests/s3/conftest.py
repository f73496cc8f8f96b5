"""Fixtures for the S3 backend tests: one auth-enabled SeaweedFS server per session.

The server runs with one identity (``ACCESS_KEY``/``SECRET_KEY``), so wrong credentials are
refused. Credentials are passed to the opener's config explicitly, never via ``os.environ``.
"""

from __future__ import annotations

import io
import itertools
import tarfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.config
import pytest

from tests.support.faulty_proxy import faulty_proxy
from tests.support.seaweed import SeaweedServer
from wds_cloud.openers.s3 import S3Config, S3Opener

__all__ = ["faulty_proxy"]

ACCESS_KEY = "wdscloudtest"
SECRET_KEY = "wdscloudtestsecret"
REGION = "us-east-1"

_bucket_counter = itertools.count()


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """The session's SeaweedFS S3 server (auth on). Fails loudly if ``weed`` is missing."""
    data_dir = tmp_path_factory.mktemp("seaweed")
    server = SeaweedServer(data_dir, access_key=ACCESS_KEY, secret_key=SECRET_KEY)
    server.start()
    try:
        yield server
    finally:
        server.stop()


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
    return boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=botocore.config.Config(s3={"addressing_style": "path"}),
    )


@pytest.fixture
def bucket(raw_client: Any) -> str:
    """A fresh, empty bucket for one test (retries while the filer finishes starting)."""
    name = f"test-{next(_bucket_counter):04d}-{int(time.time() * 1000) % 100000}"
    for attempt in range(100):
        try:
            raw_client.create_bucket(Bucket=name)
            return name
        except Exception:
            if attempt == 99:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


@pytest.fixture
def opener(s3_config: S3Config) -> S3Opener:
    """An opener for the test server."""
    return S3Opener(s3_config)


def build_shard(index: int, samples: int, *, payload: int = 100) -> tuple[bytes, list[str]]:
    """A WebDataset tar with ``samples`` samples (``.txt`` + ``.bin``); returns (bytes, keys)."""
    out = io.BytesIO()
    keys = []
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(samples):
            key = f"shard{index:04d}/sample{i:06d}"
            keys.append(key)
            for ext, data in (
                ("txt", f"{index}:{i}".encode()),
                ("bin", bytes([(index + i) % 256]) * payload),
            ):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                info.mtime = 0
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue(), keys


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
