"""Differential tests over the AIStore opener (see tests/core/test_tar_differential.py).

200 archives from :mod:`tests.support.targen` are stored once in an AIStore emulator for this
module (the session emulator, reset once for the module) and read through ``open_url(url)``
(the real :class:`AisOpener` and ``aistore`` SDK) and ``iter_tar`` with each archive's small
buffer; stdlib ``tarfile`` is the reference. The two original-failure shards are read by
``wds.WebDataset``.
"""

from __future__ import annotations

import pytest

from tests.emulators.ais.server import AisEmulator
from tests.support import targen
from tests.support.targen import Archive
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.ais

SEEDS = range(400_000, 400_200)


@pytest.fixture(scope="module")
def uploaded(emulator: AisEmulator) -> tuple[list[tuple[Archive, str]], list[str]]:
    """(archive, URL) pairs and the original-failure shard URLs."""
    emulator.store.create_bucket("differential")
    return targen.upload_all(
        SEEDS,
        lambda key, data: emulator.store.put_object("differential", key, data),
        "ais://differential/",
    )


def test_ais_reads_like_tarfile(uploaded: tuple, registry: OpenerRegistry) -> None:
    targen.assert_reads_like_tarfile(uploaded[0], registry)


def test_webdataset_over_ais_reads_the_original_failure(
    uploaded: tuple, registry: OpenerRegistry
) -> None:
    targen.assert_pipeline_reads_the_original_failure(uploaded[1], registry)
