"""``IndexedWebDataset.get_batch`` over ``ais://``, on the emulator and the real cluster: the
index's sample ranges go to the opener's own ``read_batch`` (GetBatch, one request per batch),
and every batch equals the sequential reader's samples."""

from __future__ import annotations

import random

import pytest

from tests.ais.backends import AisBackend
from tests.index.test_batch import _batch
from tests.support import indexcheck
from wds_cloud.index.build import build_index
from wds_cloud.index.indexed import IndexedWebDataset
from wds_cloud.openers.capabilities import BatchReader

pytest.importorskip("aistore.sdk")


def test_get_batch_over_ais_is_getbatch_and_equals_the_reader(ais_backend: AisBackend) -> None:
    bucket = ais_backend.create_bucket("ib")
    urls = []
    for name, blob in indexcheck.indexable_archives(8):
        ais_backend.put_object(bucket, f"s/{name}", blob)
        urls.append(f"ais://{bucket}/s/{name}")
    registry = ais_backend.registry()
    assert registry.capability(urls[0], BatchReader) is not None
    build_index(urls, json=False, registry=registry)
    want = indexcheck.sequential_samples(urls, registry)
    ds = IndexedWebDataset(urls, registry=registry)
    emulator = ais_backend.emulator
    before = len(emulator.requests) if emulator else 0
    for seed in range(30):
        indices = _batch(random.Random(seed), len(want))
        assert ds.get_batch(indices) == [want[i] for i in indices], seed
    if emulator is not None:  # the real cluster's requests are not logged
        sent = [p for _, p, _, _ in emulator.requests[before:]]
        moss = [p for p in sent if p.startswith("/v1/ml/moss")]
        assert len(moss) >= 30 and len(moss) == len(sent), sent[:5]
