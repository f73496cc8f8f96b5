"""The writer contract for ``gs://`` (GcsWriter, TarWriter, ShardWriter) on fake-gcs-server."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.contract.writer_contract import WriterCase, WriterContract
from tests.support.fake_gcs import FakeGcsServer
from wds_cloud.openers.gcs.opener import GcsOpener
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.gcs

CHUNK = 256 << 10


class TestGcsWriters(WriterContract):
    @pytest.fixture
    def writer_case(self, fake_gcs: FakeGcsServer, bucket: Any) -> WriterCase:
        registry = OpenerRegistry(builtins=False)
        registry.register("gs", GcsOpener(endpoint=fake_gcs.endpoint, chunk_size=CHUNK))

        def name(url: str) -> str:
            return url.split("/", 3)[3]

        return WriterCase(
            registry=registry,
            url=lambda key: f"gs://{bucket.name}/{key}",
            exists=lambda url: bucket.get_blob(name(url)) is not None,
            read=lambda url: bytes(bucket.blob(name(url)).download_as_bytes()),
            # an unfinished resumable session is not listable; the object check is the test
            leftovers=list,
            data=os.urandom(4 * CHUNK + 777),  # chunks are sent before the end
        )
