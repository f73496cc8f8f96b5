"""The writer contract for ``s3://`` (S3Writer, TarWriter, ShardWriter) against SeaweedFS.

Each discard must also leave no incomplete multipart upload behind (listed with boto3).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.contract.writer_contract import WriterCase, WriterContract
from tests.s3.conftest import make_config
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import MIN_PART_SIZE, S3Opener

pytestmark = pytest.mark.s3


class TestS3Writers(WriterContract):
    @pytest.fixture
    def writer_case(self, s3_endpoint: str, raw_client: Any, bucket: str) -> WriterCase:
        registry = OpenerRegistry(builtins=False)
        registry.register(
            "s3", S3Opener(make_config(s3_endpoint, multipart_chunksize=MIN_PART_SIZE))
        )

        def key(url: str) -> str:
            return url.split("/", 3)[3]

        def exists(url: str) -> bool:
            listing = raw_client.list_objects_v2(Bucket=bucket, Prefix=key(url))
            return any(item["Key"] == key(url) for item in listing.get("Contents", ()))

        def read(url: str) -> bytes:
            return bytes(raw_client.get_object(Bucket=bucket, Key=key(url))["Body"].read())

        def incomplete_uploads() -> list[Any]:
            return list(raw_client.list_multipart_uploads(Bucket=bucket).get("Uploads", ()))

        return WriterCase(
            registry=registry,
            url=lambda name: f"s3://{bucket}/{name}",
            exists=exists,
            read=read,
            leftovers=incomplete_uploads,
            data=os.urandom(MIN_PART_SIZE + 12_345),  # one part is uploaded before the end
        )
