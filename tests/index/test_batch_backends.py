"""``get_batch`` over the real servers: SeaweedFS (``s3://``), fake-gcs-server (``gs://``) and the
threaded HTTP server (``http://``), through their openers' shared ``read_batch``.

On each: 200 generated batches (random, runs across shard boundaries, duplicates, reversed)
equal ``[ds[i] ...]`` and the sequential reader's samples; the openers are ``BatchReader``s;
requests counted at a proxy (or the server): 64 adjacent samples of one shard are one ranged
request, and 64 without coalescing; a shard rewritten after indexing raises ``ShardReadError``
naming the URL and offset through ``get_batch``, or is skipped and counted with a handler.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.index.test_batch import _batch
from tests.support import indexcheck
from tests.support.faulty_proxy import faulty_proxy  # noqa: F401 - fixture
from tests.support.http_server import HttpFileServer
from wds_cloud.core.handlers import ContinueHandler
from wds_cloud.errors import ShardReadError
from wds_cloud.index.build import build_index
from wds_cloud.index.indexed import IndexedWebDataset
from wds_cloud.openers.capabilities import BatchReader
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.writing.tarwriter import TarWriter

BUCKET = "batch-tests"
DENSE = "dense.tar"  # 80 samples of ~16 KiB in one shard


def _dense() -> bytes:
    out = io.BytesIO()
    rng = random.Random(7)
    with TarWriter(out) as sink:
        for i in range(80):
            sink.write({"__key__": f"d{i:04d}", "bin": rng.randbytes(16000), "cls": b"%d" % i})
    return out.getvalue()


def _files() -> list[tuple[str, bytes]]:
    return [*indexcheck.indexable_archives(24), (DENSE, _dense())]


class Backend:
    """What a test needs of one server: shard URLs, a registry on it (or on a counting
    proxy in front of it), a way to rewrite an object, and the request counter."""

    def __init__(
        self,
        urls: list[str],
        registry: Callable[[str | None], OpenerRegistry],
        put: Callable[[str, bytes], None],
        proxy_endpoint: str,
    ) -> None:
        self.urls = urls
        self.registry = registry
        self.put = put
        self.proxy_endpoint = proxy_endpoint


def _s3(seaweed: Any) -> Backend:
    from tests.support.seaweed import ACCESS_KEY, REGION, SECRET_KEY, boto3_client, create_bucket
    from wds_cloud.openers.s3.opener import S3Config, S3Opener

    client = boto3_client(seaweed.endpoint_url)
    create_bucket(client, BUCKET)

    def registry(endpoint: str | None) -> OpenerRegistry:
        config = S3Config(
            endpoint_url=endpoint or seaweed.endpoint_url,
            region=REGION,
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
            backoff=0.01,
        )
        reg = OpenerRegistry()
        reg.register("s3", S3Opener(config), override=True)
        return reg

    def put(url: str, blob: bytes) -> None:
        client.put_object(Bucket=BUCKET, Key=url.split("/", 3)[3], Body=blob)

    urls = []
    for name, blob in _files():
        urls.append(f"s3://{BUCKET}/b/{name}")
        put(urls[-1], blob)
    return Backend(urls, registry, put, seaweed.endpoint_url)


def _gcs(fake_gcs: Any) -> Backend:
    from wds_cloud.openers.gcs.opener import GcsOpener

    bucket = fake_gcs.client().create_bucket(BUCKET)

    def registry(endpoint: str | None) -> OpenerRegistry:
        reg = OpenerRegistry()
        reg.register(
            "gs", GcsOpener(endpoint=endpoint or fake_gcs.endpoint, backoff=0.01), override=True
        )
        return reg

    def put(url: str, blob: bytes) -> None:
        bucket.blob(url.split("/", 3)[3]).upload_from_string(blob)

    urls = []
    for name, blob in _files():
        urls.append(f"gs://{BUCKET}/b/{name}")
        put(urls[-1], blob)
    return Backend(urls, registry, put, fake_gcs.endpoint)


@pytest.fixture(scope="module", params=["s3", "gs", "http"])
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    if request.param == "s3":
        made = _s3(request.getfixturevalue("seaweed"))
    elif request.param == "gs":
        made = _gcs(request.getfixturevalue("fake_gcs"))
    else:
        root = tmp_path_factory.mktemp("batch-http")
        for name, blob in _files():
            (root / name).write_bytes(blob)
        with HttpFileServer(root) as server:
            from wds_cloud.openers.http.opener import HttpOpener

            def registry(endpoint: str | None) -> OpenerRegistry:
                reg = OpenerRegistry()
                reg.register("http", HttpOpener(backoff=0.01), override=True)
                return reg

            def put(url: str, blob: bytes) -> None:
                (root / url.rsplit("/", 1)[1]).write_bytes(blob)

            names = [name for name, _ in _files()]
            build_index([str(root / n) for n in names], json=False)  # HTTP cannot be written
            yield Backend([server.url(n) for n in names], registry, put, server.url("")[:-1])
        return
    build_index(made.urls, json=False, registry=made.registry(None))
    yield made


def _via(backend: Backend, proxy_url: str, url: str) -> str:
    return url.replace(backend.proxy_endpoint, proxy_url) if url.startswith("http") else url


def test_batches_equal_ds_i_and_the_reader(backend: Backend) -> None:
    registry = backend.registry(None)
    assert registry.capability(backend.urls[0], BatchReader) is not None
    want = indexcheck.sequential_samples(backend.urls, registry)
    ds = IndexedWebDataset(backend.urls, registry=registry)
    assert len(ds) == len(want)
    for seed in range(200):
        indices = _batch(random.Random(seed), len(want))
        assert ds.get_batch(indices) == [want[i] for i in indices], seed
        if seed % 40 == 0:
            assert ds.get_batch(indices) == [ds[i] for i in indices]


def test_adjacent_samples_are_one_request(
    backend: Backend,
    faulty_proxy: Callable[..., Any],  # noqa: F811 - the fixture
) -> None:
    port = int(backend.proxy_endpoint.rsplit(":", 1)[1])
    proxy = faulty_proxy(port)
    urls = [_via(backend, proxy.url, u) for u in backend.urls]
    registry = backend.registry(proxy.url)
    ds = IndexedWebDataset(urls, registry=registry)
    dense = next(k for k, u in enumerate(urls) if u.endswith(DENSE))
    batch = list(range(ds.starts[dense] + 8, ds.starts[dense] + 72))
    before = proxy.ranged_requests
    got = ds.get_batch(batch)
    assert proxy.ranged_requests - before == 1
    assert [s["__key__"] for s in got] == [f"d{i:04d}" for i in range(8, 72)]
    never = IndexedWebDataset(urls, registry=registry, batch={"coalesce_gap": -1})
    before = proxy.ranged_requests
    assert never.get_batch(batch) == got
    assert proxy.ranged_requests - before == 64


def test_a_rewritten_shard_raises_through_get_batch(backend: Backend, tmp_path: Path) -> None:
    registry = backend.registry(None)
    dense = next(u for u in backend.urls if u.endswith(DENSE))
    ds = IndexedWebDataset([backend.urls[0], dense], registry=registry)
    blob = _dense()
    try:
        backend.put(dense, b"\0" * len(blob))  # same size, no tar headers
        batch = [0, ds.starts[1] + 3, ds.starts[1] + 4]
        with pytest.raises(ShardReadError, match="does not match the shard") as info:
            ds.get_batch(batch)
        assert info.value.url == dense and info.value.offset is not None
        skip = ContinueHandler()
        assert ds.get_batch(batch, handler=skip) == [ds[0]] and skip.count == 2
    finally:
        backend.put(dense, blob)


def test_batches_keep_their_connections_alive(
    backend: Backend,
    faulty_proxy: Callable[..., Any],  # noqa: F811 - the fixture
) -> None:
    """Each backend's pool keeps as many connections as a batch has reads in flight (32):
    ten batches of 64 scattered samples never open more than that many (a pool of 10 closes
    and reopens the rest every batch)."""
    proxy = faulty_proxy(int(backend.proxy_endpoint.rsplit(":", 1)[1]))
    urls = [_via(backend, proxy.url, u) for u in backend.urls]
    ds = IndexedWebDataset(urls, registry=backend.registry(proxy.url), batch={"coalesce_gap": -1})
    rng = random.Random(3)
    before = proxy.connections
    for _ in range(10):
        ds.get_batch([rng.randrange(len(ds)) for _ in range(64)])
    assert proxy.connections - before <= 32
