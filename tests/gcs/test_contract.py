"""The shared opener contract for gs:// and gcs:// against fake-gcs-server."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.contract.opener_contract import OpenerCase, OpenerContract
from wds_cloud.openers.gcs.opener import GcsOpener

pytestmark = pytest.mark.gcs

DATA = os.urandom(300_000) + bytes(range(256)) * 100


def _case(opener: GcsOpener, bucket: Any, scheme: str = "gs") -> OpenerCase:
    bucket.blob("contract/shard.tar").upload_from_string(DATA)
    return OpenerCase(
        opener,
        f"{scheme}://{bucket.name}/contract/shard.tar",
        f"{scheme}://{bucket.name}/contract/missing.tar",
        DATA,
    )


class TestGcsContract(OpenerContract):
    @pytest.fixture
    def opener_case(self, fake_gcs: Any, bucket: Any) -> OpenerCase:
        return _case(GcsOpener(endpoint=fake_gcs.endpoint), bucket)


class TestGcsSchemeContract(OpenerContract):
    @pytest.fixture
    def opener_case(self, fake_gcs: Any, bucket: Any) -> OpenerCase:
        return _case(GcsOpener(endpoint=fake_gcs.endpoint), bucket, scheme="gcs")


class TestGcsCutConnectionsContract(OpenerContract):
    """The same contract while every connection is cut after 50 000 response bytes."""

    @pytest.fixture
    def opener_case(self, fake_gcs: Any, bucket: Any, faulty_proxy: Any) -> OpenerCase:
        proxy = faulty_proxy(fake_gcs.port, cut_after=50_000)
        return _case(GcsOpener(endpoint=proxy.url, backoff=0.0, retries=3), bucket)
