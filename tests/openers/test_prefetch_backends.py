"""Parallel ranged reads (:mod:`wds_cloud.openers.streams.prefetch`) through every backend, on the real
local servers: SeaweedFS (S3), fake-gcs-server (GCS), Azurite (Azure), the HTTP file server and
the AIStore emulator.

Differential: many object sizes around the part size x parts in flight x tiny and large reads,
compared with the bytes written and with the backend's plain single-stream read. Then an object
replaced mid-read (every backend pins a version), close() mid-read (no thread left) and the
memory bound, read from the reader's count of buffered bytes.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.http_server import HttpFileServer
from tests.support.ownership import NewThreads
from wds_cloud.errors import ShardReadError
from wds_cloud.openers.streams.prefetch import PrefetchReader

PART = 4096
SIZES = [0, 1, PART - 1, PART, PART + 1, 2 * PART - 1, 2 * PART, 3 * PART + 7, 8 * PART + 1]
SIZES += random.Random(13).sample(range(1, 12 * PART), 3)


@dataclass
class Backend:
    """One backend under test: how to store an object and how to open it."""

    name: str
    put: Callable[[str, bytes], str]  # (name, data) -> URL; overwrites
    opener: Callable[..., Any]  # (**config overrides) -> opener


@pytest.fixture(scope="module")
def s3_backend(seaweed: Any) -> Backend:
    from tests.support.seaweed import ACCESS_KEY, REGION, SECRET_KEY, boto3_client, create_bucket
    from wds_cloud.openers.s3.opener import S3Opener

    client = boto3_client(seaweed.endpoint_url)
    bucket = create_bucket(client, f"prefetch-{int(time.time() * 1000) % 10**6}")

    def put(name: str, data: bytes) -> str:
        client.put_object(Bucket=bucket, Key=name, Body=data)
        return f"s3://{bucket}/{name}"

    def opener(**kw: Any) -> Any:
        return S3Opener(
            endpoint_url=seaweed.endpoint_url,
            region=REGION,
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
            backoff=0.01,
            **kw,
        )

    return Backend("s3", put, opener)


@pytest.fixture(scope="module")
def gcs_backend(fake_gcs: Any) -> Backend:
    from wds_cloud.openers.gcs.opener import GcsOpener

    client = fake_gcs.client()
    bucket = client.create_bucket(f"prefetch-{int(time.time() * 1000) % 10**6}")

    def put(name: str, data: bytes) -> str:
        bucket.blob(name).upload_from_string(data)
        return f"gs://{bucket.name}/{name}"

    return Backend(
        "gcs", put, lambda **kw: GcsOpener(endpoint=fake_gcs.endpoint, backoff=0.01, **kw)
    )


@pytest.fixture(scope="module")
def azure_backend(azurite: Any) -> Backend:
    from wds_cloud.openers.azure.opener import AzureOpener

    container = azurite.container(f"prefetch-{int(time.time() * 1000) % 10**6}")

    def put(name: str, data: bytes) -> str:
        container.upload_blob(name, data, overwrite=True)
        return f"az://{container.container_name}/{name}"

    def opener(**kw: Any) -> Any:
        return AzureOpener(connection_string=azurite.connection_string, backoff=0.01, **kw)

    return Backend("azure", put, opener)


@pytest.fixture(scope="module")
def http_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    from wds_cloud.openers.http.opener import HttpOpener

    root = tmp_path_factory.mktemp("prefetch-www")
    with HttpFileServer(root) as server:

        def put(name: str, data: bytes) -> str:
            path = Path(root, name)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
            return server.url(name)

        backend = Backend("http", put, lambda **kw: HttpOpener(backoff=0.01, **kw))
        backend.server = server  # type: ignore[attr-defined]
        yield backend


@pytest.fixture(scope="module")
def ais_backend(ais_server: Any) -> Backend:
    from wds_cloud.openers.ais.opener import AisOpener

    ais_server.reset()
    ais_server.store.create_bucket("pf")

    def put(name: str, data: bytes) -> str:
        ais_server.store.put_object("pf", name, data)
        return f"ais://pf/{name}"

    return Backend("ais", put, lambda **kw: AisOpener(endpoint=ais_server.url, backoff=0.01, **kw))


@pytest.fixture(params=["s3", "gcs", "azure", "http", "ais"])
def backend(request: pytest.FixtureRequest) -> Backend:
    b: Backend = request.getfixturevalue(f"{request.param}_backend")
    return b


def payload(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


def tiny_reads(stream: Any, rng: random.Random) -> bytes:
    out = bytearray()
    while True:
        if rng.random() < 0.5:
            piece = stream.read(rng.randint(1, 7))
        else:
            buf = bytearray(rng.randint(1, 7))
            n = stream.readinto(buf)
            piece = bytes(buf[:n])
        if not piece:
            return bytes(out)
        out += piece


def prefetch_threads(new_threads: NewThreads, name: str) -> list[threading.Thread]:
    """This test's prefetch threads of backend ``name`` still alive."""
    return new_threads(f"wds-{name}-prefetch")


@pytest.mark.parametrize("parts", [1, 2, 4, 8])
def test_same_bytes_as_written_and_as_one_stream(backend: Backend, parts: int) -> None:
    opener = backend.opener(prefetch=parts, prefetch_chunk=PART)
    plain = backend.opener()
    for i, size in enumerate(SIZES):
        data = payload(size * 10 + parts, size)
        url = backend.put(f"d{parts}-{i}.bin", data)
        with plain.open(url) as stream:
            assert not isinstance(stream, PrefetchReader)
            single = stream.read()
        assert single == data
        for mode in ("tiny", "large", "all"):
            with opener.open(url) as stream:
                if size > PART:  # smaller objects may be one plain GET (S3)
                    assert isinstance(stream, PrefetchReader), (backend.name, size)
                if mode == "tiny":
                    got = tiny_reads(stream, random.Random(size))
                elif mode == "large":
                    got = b"".join(iter(lambda: stream.read(3 * PART + 5), b""))
                else:
                    got = stream.read()
                if isinstance(stream, PrefetchReader):
                    assert stream.peak_buffered <= (parts + 1) * PART
                    assert stream.position == size
            assert got == data, (backend.name, size, parts, mode)


def test_replaced_mid_read_raises_naming_the_url(backend: Backend) -> None:
    data = payload(1, 8 * PART)
    url = backend.put("replaced.bin", data)
    opener = backend.opener(prefetch=1, prefetch_chunk=PART, retries=0)
    with opener.open(url) as stream:
        assert isinstance(stream, PrefetchReader)
        assert stream.read(PART) == data[:PART]  # part 1 may already be on its way
        time.sleep(0.05 if backend.name == "http" else 0)  # a new mtime for the ETag
        backend.put("replaced.bin", payload(2, 8 * PART))
        with pytest.raises(ShardReadError) as info:
            while stream.read(PART):
                pass
    assert info.value.url == url
    assert url in str(info.value)
    assert "changed" in str(info.value)


def test_close_mid_read_leaves_no_thread(backend: Backend, new_threads: NewThreads) -> None:
    data = payload(3, 20 * PART)
    url = backend.put("closed.bin", data)
    stream = backend.opener(prefetch=4, prefetch_chunk=PART).open(url)
    assert isinstance(stream, PrefetchReader)
    assert stream.read(PART + 3) == data[: PART + 3]
    assert prefetch_threads(new_threads, backend.name)
    stream.close()
    assert not prefetch_threads(new_threads, backend.name)
    assert stream.buffered == 0
    with pytest.raises(ValueError):
        stream.read(1)


@pytest.mark.parametrize("parts", [1, 3])
def test_memory_bounded_by_parts_plus_one(backend: Backend, parts: int) -> None:
    data = payload(4, 12 * PART)
    url = backend.put(f"bound{parts}.bin", data)
    with backend.opener(prefetch=parts, prefetch_chunk=PART).open(url) as stream:
        assert isinstance(stream, PrefetchReader)
        got = [stream.read(1)]
        for future in list(stream._pending):  # let every part in flight arrive
            future.result()
        # the part being consumed (held until read) + ``parts`` waiting: the read-ahead is real
        assert stream.buffered == (parts + 1) * PART
        got.append(stream.read())
        # and never more than that
        assert stream.peak_buffered <= (parts + 1) * PART
    assert b"".join(got) == data


def test_http_server_ignoring_range_streams_one_get(http_backend: Backend) -> None:
    server: HttpFileServer = http_backend.server  # type: ignore[attr-defined]
    data = payload(5, 5 * PART)
    url = http_backend.put("norange.bin", data)
    server.ignore_range = True
    try:
        with http_backend.opener(prefetch=4, prefetch_chunk=PART).open(url) as stream:
            assert not isinstance(stream, PrefetchReader)
            assert stream.read() == data
    finally:
        server.ignore_range = False


def test_missing_object_is_not_found(backend: Backend) -> None:
    from wds_cloud.errors import ShardNotFoundError

    backend.put("present.bin", b"x")
    url = backend.put("present.bin", b"x").replace("present.bin", "absent.bin")
    with pytest.raises(ShardNotFoundError):
        backend.opener(prefetch=4, prefetch_chunk=PART).open(url)


def test_http_parts_resume_after_cut_connections(http_backend: Backend) -> None:
    server: HttpFileServer = http_backend.server  # type: ignore[attr-defined]
    data = payload(6, 10 * PART + 3)
    url = http_backend.put("cut.bin", data)
    server.cut_after, server.cut_every = 1500, 1
    try:
        with http_backend.opener(prefetch=3, prefetch_chunk=PART, retries=5).open(url) as stream:
            assert isinstance(stream, PrefetchReader)
            assert stream.read() == data
            assert stream.resumes >= 10  # every part was cut at least once
    finally:
        server.cut_after = None


def test_gcs_stream_says_its_generation(gcs_backend: Backend, fake_gcs: Any) -> None:
    data = payload(7, 3 * PART)
    url = gcs_backend.put("gen.bin", data)
    bucket, _, name = url[len("gs://") :].partition("/")
    generation = fake_gcs.client().bucket(bucket).get_blob(name).generation
    with gcs_backend.opener(prefetch=2, prefetch_chunk=PART).open(url) as stream:
        assert isinstance(stream, PrefetchReader)
        assert stream.generation == generation  # type: ignore[attr-defined]
        assert stream.read() == data
