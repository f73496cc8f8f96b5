"""Fixtures for the GCS backend tests: a fresh bucket per test on the session's fake-gcs-server
(``fake_gcs`` in ``tests/conftest.py``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.fake_gcs import FakeGcsServer
from tests.support.faulty_proxy import faulty_proxy  # noqa: F401 - fixture re-export
from wds_cloud.openers.gcs.opener import GcsOpener

_bucket_ids = itertools.count()


@pytest.fixture(scope="session")
def gcs_client(fake_gcs: FakeGcsServer) -> Any:
    """A google-cloud-storage client on the fake server (for test setup and checks)."""
    return fake_gcs.client()


@pytest.fixture
def bucket(gcs_client: Any) -> Iterator[Any]:
    """A new empty bucket; its blobs are deleted afterwards (fake-gcs keeps them in RAM)."""
    b = gcs_client.create_bucket(f"test-bucket-{next(_bucket_ids)}")
    yield b
    for blob in gcs_client.list_blobs(b.name):
        blob.delete()


@pytest.fixture
def opener(fake_gcs: FakeGcsServer) -> GcsOpener:
    """A GcsOpener on the fake server (endpoint passed explicitly, fast retries)."""
    return GcsOpener(endpoint=fake_gcs.endpoint, backoff=0.01)
