"""The writer contract for ``ais://`` (AisWriter, TarWriter, ShardWriter) on the emulator.

Each discard must also leave no multipart upload pending in the emulator's store.
"""

from __future__ import annotations

import os

import pytest

from tests.contract.writer_contract import WriterCase, WriterContract
from tests.emulators.ais.server import AisEmulator
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.ais

PART = 1 << 20


class TestAisWriters(WriterContract):
    @pytest.fixture
    def writer_case(self, ais_emulator: AisEmulator) -> WriterCase:
        store = ais_emulator.store
        store.create_bucket("wbucket")
        registry = OpenerRegistry(builtins=False)
        registry.register("ais", AisOpener(endpoint=ais_emulator.url, part_size=PART, retries=0))

        def name(url: str) -> str:
            return url.split("/", 3)[3]

        return WriterCase(
            registry=registry,
            url=lambda key: f"ais://wbucket/{key}",
            exists=lambda url: store.has_object("wbucket", name(url)),
            read=lambda url: store.get_object("wbucket", name(url)).data,
            leftovers=store.pending_uploads,
            data=os.urandom(2 * PART + 999),  # two parts are uploaded before the end
        )
