"""Throttling on AIStore, the emulator and the real cluster: a loader reading many shards with
parallel ranged reads through a proxy that answers 503 (AIStore's JSON error) above R requests a
second gets every sample once, no shard fails, and the endpoint's limiter backs off and grows
back (:func:`tests.openers.test_throttle_backends.check_loader_under_throttling`). On the real
cluster the proxy stands in front of the AIStore proxy (the gateway): the 503s come from there,
and the targets a GET is redirected to are reached directly."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from tests.ais.backends import AisBackend
from tests.openers.test_throttle_backends import PART, Store, check_loader_under_throttling
from wds_cloud.openers.ais.opener import AisOpener


def test_a_loader_under_throttling_reads_every_sample_once(ais_backend: AisBackend) -> None:
    bucket = ais_backend.create_bucket("throttle")

    def put(name: str, data: bytes) -> str:
        ais_backend.put_object(bucket, name, data)
        return f"ais://{bucket}/{name}"

    def opener(endpoint: str) -> Any:
        return AisOpener(endpoint=endpoint, backoff=0.01, prefetch=16, prefetch_chunk=PART)

    port = urlsplit(ais_backend.url).port
    assert port is not None
    check_loader_under_throttling(Store("ais", port, put, opener, "ais"))
