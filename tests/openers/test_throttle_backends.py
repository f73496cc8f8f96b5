"""Throttling through every backend, on the real local servers behind a proxy that answers
"slow down" above R requests a second (:mod:`tests.support.throttle_proxy`): SeaweedFS (S3,
``SlowDown`` 503), fake-gcs-server (GCS, 429), Azurite (Azure, ``ServerBusy`` 503) and the HTTP
file server (503 with ``Retry-After``); AIStore (the emulator and the real cluster) in
``tests/ais/test_throttle.py``, with :func:`check_loader_under_throttling`.

A loader reads many shards with parallel ranged reads (``prefetch=16``) and read-ahead: every
sample arrives exactly once with the bytes of a direct read, no shard fails, the endpoint's
limiter was cut by the 503s (its slots, or its rate: pacing), and once the proxy stops
throttling it grows again.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import tarbuild
from tests.support.http_server import HttpFileServer
from tests.support.throttle_proxy import ThrottleProxy
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.streams.throttle import limiter_for

SHARDS = 6
SAMPLES = 24
PART = 16 << 10
RATE = 150.0  # requests a second the proxy lets through
THROTTLE_START = 64  # WDS_CLOUD_THROTTLE_INITIAL's default


@dataclass
class Store:
    """One backend: where its server listens, how to store a shard, how to open through a
    given endpoint."""

    scheme: str
    port: int
    put: Callable[[str, bytes], str]  # (name, data) -> URL
    opener: Callable[[str], Any]  # (endpoint URL) -> opener with prefetch on
    style: str


def shard_bytes(index: int) -> bytes:
    rng = random.Random(index)
    members = []
    for i in range(SAMPLES):
        key = f"s{index:02d}_{i:03d}"
        members.append((f"{key}.txt", key.encode()))
        members.append((f"{key}.bin", rng.randbytes(rng.randint(2000, 12000))))
    return tarbuild.tar_bytes(members, mtime=0)


@pytest.fixture(scope="module")
def s3_store(seaweed: Any) -> Store:
    from tests.support.seaweed import ACCESS_KEY, REGION, SECRET_KEY, boto3_client, create_bucket
    from wds_cloud.openers.s3.opener import S3Opener

    client = boto3_client(seaweed.endpoint_url)
    bucket = create_bucket(client, f"throttle-{int(time.time() * 1000) % 10**6}")

    def put(name: str, data: bytes) -> str:
        client.put_object(Bucket=bucket, Key=name, Body=data)
        return f"s3://{bucket}/{name}"

    def opener(endpoint: str) -> Any:
        return S3Opener(
            endpoint_url=endpoint,
            region=REGION,
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
            backoff=0.01,
            prefetch=16,
            prefetch_chunk=PART,
        )

    port = int(seaweed.endpoint_url.rsplit(":", 1)[1])
    return Store("s3", port, put, opener, "s3")


@pytest.fixture(scope="module")
def gcs_store(fake_gcs: Any) -> Store:
    from wds_cloud.openers.gcs.opener import GcsOpener

    bucket = fake_gcs.client().create_bucket(f"throttle-{int(time.time() * 1000) % 10**6}")

    def put(name: str, data: bytes) -> str:
        bucket.blob(name).upload_from_string(data)
        return f"gs://{bucket.name}/{name}"

    def opener(endpoint: str) -> Any:
        return GcsOpener(endpoint=endpoint, backoff=0.01, prefetch=16, prefetch_chunk=PART)

    port = int(fake_gcs.endpoint.rstrip("/").rsplit(":", 1)[1])
    return Store("gs", port, put, opener, "gcs")


@pytest.fixture(scope="module")
def azure_store(azurite: Any) -> Store:
    from wds_cloud.openers.azure.opener import AzureOpener

    container = azurite.container(f"throttle-{int(time.time() * 1000) % 10**6}")

    def put(name: str, data: bytes) -> str:
        container.upload_blob(name, data, overwrite=True)
        return f"az://{container.container_name}/{name}"

    def opener(endpoint: str) -> Any:
        blob_endpoint = f"{endpoint}/{azurite.account}"
        connection = azurite.connection_string.replace(azurite.endpoint, blob_endpoint)
        return AzureOpener(
            connection_string=connection, backoff=0.01, prefetch=16, prefetch_chunk=PART
        )

    return Store("az", azurite.port, put, opener, "azure")


@pytest.fixture(scope="module")
def http_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    from wds_cloud.openers.http.opener import HttpOpener

    root = tmp_path_factory.mktemp("throttle-www")
    with HttpFileServer(root) as server:

        def put(name: str, data: bytes) -> str:
            Path(root, name).write_bytes(data)
            return name  # made absolute against the endpoint in use

        def opener(endpoint: str) -> Any:
            return HttpOpener(backoff=0.01, prefetch=16, prefetch_chunk=PART)

        yield Store("http", server.port, put, opener, "http")


@pytest.fixture(params=["s3", "gcs", "azure", "http"])
def store(request: pytest.FixtureRequest) -> Store:
    found: Store = request.getfixturevalue(f"{request.param}_store")
    return found


def samples(store: Store, endpoint: str, urls: list[str]) -> list[tuple[str, str, bytes]]:
    """Every sample of ``urls`` read by a loader through ``endpoint``: (shard, key, .bin)."""
    from wds_cloud import WebDataset

    registry = OpenerRegistry()
    registry.register(store.scheme, store.opener(endpoint), override=True)
    if store.scheme == "http":
        urls = [f"{endpoint}/{u}" for u in urls]
    dataset = WebDataset(urls, registry=registry, shardshuffle=False)
    return [(s["__url__"].rsplit("/", 1)[1], s["__key__"], s["bin"]) for s in dataset]


def test_a_loader_under_throttling_reads_every_sample_once(store: Store) -> None:
    check_loader_under_throttling(store)


def check_loader_under_throttling(store: Store) -> None:
    """Every sample once, with the bytes of a direct read; no failed shard; the limiter cut by
    the 503s and grown again once they stop; never cut without them."""
    urls = [store.put(f"thr-{i:02d}.tar", shard_bytes(i)) for i in range(SHARDS)]
    direct_endpoint = f"http://127.0.0.1:{store.port}"
    direct = samples(store, direct_endpoint, urls)
    assert len(direct) == SHARDS * SAMPLES
    assert len(set((u, k) for u, k, _ in direct)) == len(direct)
    untouched = limiter_for(direct_endpoint)
    assert untouched is not None  # no 503s: the limit never went below its start
    assert untouched.cuts == 0 and untouched.lowest == THROTTLE_START

    retry_after = 0.02 if store.style == "http" else None
    with ThrottleProxy(
        store.port, rate=RATE, style=store.style, burst=4, retry_after=retry_after
    ) as proxy:
        throttled = samples(store, proxy.url, urls)
        assert throttled == direct  # every sample, once, in order, the same bytes
        assert proxy.throttled > 0  # the proxy did say "slow down"
        limiter = limiter_for(proxy.url)
        assert limiter is not None
        # cut: the slots, or (few requests in flight) the rate, paced
        assert limiter.cuts > 0
        assert limiter.lowest < limiter.highest or limiter.lowest_rate is not None
        low, low_rate = limiter.limit, limiter.rate
        assert limiter.in_flight == 0

        proxy.set_rate(None)  # no more 503s: the limit grows back, or the rate, or pacing ends
        assert samples(store, proxy.url, urls) == direct
        if low_rate is None:
            assert limiter.limit > low
        else:
            assert limiter.rate is None or limiter.rate > low_rate
        assert limiter.in_flight == 0


def test_throttling_off_makes_503s_plain_failures(
    http_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``WDS_CLOUD_THROTTLE=0``: no limiter, and a shard answered 503 more often than
    ``retries`` allows fails (what the limiter prevents above)."""
    from wds_cloud.errors import ShardOpenError
    from wds_cloud.openers.http.opener import HttpOpener

    monkeypatch.setenv("WDS_CLOUD_THROTTLE", "0")
    name = http_store.put("off.tar", shard_bytes(99))
    with ThrottleProxy(http_store.port, rate=0.0, style="http", burst=0) as proxy:
        assert limiter_for(proxy.url) is None
        opener = HttpOpener(backoff=0.001, retries=2)
        with pytest.raises(ShardOpenError, match=r"giving up after 2 retries.*503"):
            opener.open(f"{proxy.url}/{name}")
        assert proxy.throttled == 3
