"""Throttling on AIStore, the emulator and the real cluster: a loader reading many shards with
parallel ranged reads through a proxy that answers 503 (AIStore's JSON error) above R requests a
second gets every sample once, no shard fails, and the endpoint's limiter backs off and grows
back (:func:`tests.openers.test_throttle_backends.check_loader_under_throttling`). On the real
cluster the proxy stands in front of the AIStore proxy (the gateway): the 503s come from there,
and the targets a GET is redirected to are reached directly. GetBatch (``read_batch``) goes
through the same limiter: :func:`test_getbatch_under_throttling_takes_the_limiter_and_loses_no_entry`."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from tests.ais.backends import AisBackend
from tests.openers.test_throttle_backends import PART, Store, check_loader_under_throttling
from tests.support.throttle_proxy import ThrottleProxy
from wds_cloud.openers.ais.batch import BatchStats
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.capabilities import RangeRequest
from wds_cloud.openers.streams.throttle import limiter_for


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


def test_getbatch_under_throttling_takes_the_limiter_and_loses_no_entry(
    ais_backend: AisBackend,
) -> None:
    """GetBatch requests (``read_batch``, cut into many pieces) from several threads through a
    proxy answering 503 above R requests a second: every entry's bytes, in order, none lost or
    repeated, no ranged GET for a throttled entry; the answers were throttled and the
    cluster's limiter (shared with the ranged reads) was cut and paced, every slot given back."""
    rng = random.Random(26)
    bucket = ais_backend.create_bucket("throttle-gb")
    objects: dict[str, bytes] = {}
    for i, size in enumerate((700, 5000, 70_000)):
        name = f"o/{i}.bin"
        objects[f"ais://{bucket}/{name}"] = payload = rng.randbytes(size)
        ais_backend.put_object(bucket, name, payload)
    batches = []
    for seed in range(4):
        pick = random.Random(seed)
        batch = []
        for _ in range(120):
            url = pick.choice(sorted(objects))
            offset = pick.randrange(len(objects[url]))
            batch.append(RangeRequest(url, offset, pick.randint(1, len(objects[url]) - offset)))
        batches.append(batch)
    port = urlsplit(ais_backend.url).port
    assert port is not None
    with ThrottleProxy(port, rate=40.0, style="ais", burst=2) as proxy:
        opener = AisOpener(endpoint=proxy.url, backoff=0.01, batch_entries=8)
        stats = [BatchStats() for _ in batches]
        with ThreadPoolExecutor(len(batches)) as pool:
            got = list(pool.map(lambda b, s: opener.read_batch(b, stats=s), batches, stats))
        limiter = limiter_for(proxy.url)
    for batch, answer, stat in zip(batches, got, stats, strict=True):
        assert answer == [objects[r.url][r.offset : r.offset + r.length] for r in batch]
        assert stat.entries == len(batch) and stat.rereads == 0 and stat.skipped == 0
    assert proxy.throttled > 0 and sum(s.throttled for s in stats) > 0
    assert limiter is not None and limiter.cuts > 0 and limiter.in_flight == 0
    assert limiter.lowest < limiter.highest or limiter.lowest_rate is not None
