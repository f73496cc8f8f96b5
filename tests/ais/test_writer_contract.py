"""The writer contract for ``ais://`` (AisWriter, TarWriter, ShardWriter), on the emulator and the
real cluster (two parts of a multipart upload are sent before the end).

Each discard must also leave no multipart upload pending: in the emulator's store, or on the
real cluster in the targets' mountpaths (:meth:`~tests.ais.backends.AisBackend.pending_uploads`).
"""

from __future__ import annotations

import os

import pytest

from tests.ais.backends import AisBackend
from tests.contract.writer_contract import WriterCase, WriterContract
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.ais

PART = 1 << 20


class TestAisWriters(WriterContract):
    @pytest.fixture
    def writer_case(self, ais_backend: AisBackend) -> WriterCase:
        bucket = ais_backend.create_bucket("wbucket")
        registry = OpenerRegistry(builtins=False)
        registry.register("ais", AisOpener(endpoint=ais_backend.url, part_size=PART, retries=0))

        def name(url: str) -> str:
            return url.split("/", 3)[3]

        def read(url: str) -> bytes:
            data = ais_backend.get_object(bucket, name(url))
            assert data is not None, f"{url} is not stored"
            return data

        return WriterCase(
            registry=registry,
            url=lambda key: f"ais://{bucket}/{key}",
            exists=lambda url: ais_backend.has_object(bucket, name(url)),
            read=read,
            leftovers=lambda: ais_backend.pending_uploads(bucket),
            data=os.urandom(2 * PART + 999),  # two parts are uploaded before the end
        )
