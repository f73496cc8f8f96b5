"""Differential tests over the AIStore opener (see tests/core/test_tar_differential.py).

200 archives from :mod:`tests.support.targen` are stored once per backend for this module (the
session emulator, reset once for the module, and a bucket of the real cluster, whose GETs are
redirected to the target owning each archive) and read through ``open_url(url)`` (the real
:class:`AisOpener` and ``aistore`` SDK) and ``iter_tar`` with each archive's small buffer;
stdlib ``tarfile`` is the reference. The two original-failure shards are read by
``wds.WebDataset``.
"""

from __future__ import annotations

import pytest

from tests.ais.backends import AisBackend
from tests.support import targen
from tests.support.targen import Archive
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.ais

SEEDS = range(400_000, 400_200)


@pytest.fixture(scope="module")
def uploaded(ais_module_backend: AisBackend) -> tuple[list[tuple[Archive, str]], list[str]]:
    """(archive, URL) pairs and the original-failure shard URLs."""
    bucket = ais_module_backend.create_bucket("differential")
    return targen.upload_all(
        SEEDS,
        lambda key, data: ais_module_backend.put_object(bucket, key, data),
        f"ais://{bucket}/",
    )


def test_ais_reads_like_tarfile(uploaded: tuple, registry: OpenerRegistry) -> None:
    targen.assert_reads_like_tarfile(uploaded[0], registry)


def test_webdataset_over_ais_reads_the_original_failure(
    uploaded: tuple, registry: OpenerRegistry
) -> None:
    targen.assert_pipeline_reads_the_original_failure(uploaded[1], registry)
