"""Reading gs:// objects through GcsOpener against a real fake-gcs-server."""

from __future__ import annotations

import os
import pickle
import threading
from typing import Any

import pytest

from tests.gcs.shards import upload_shards
from tests.support.ownership import refused_port
from wds_cloud.core.samples import tar_samples
from wds_cloud.errors import ConfigError, ShardNotFoundError, ShardOpenError
from wds_cloud.openers.gcs.opener import GcsOpener
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.gcs


def _samples(opener: GcsOpener, url: str) -> list[dict[str, Any]]:
    with opener.open(url) as stream:
        return [{k: v for k, v in s.items() if k != "__url__"} for s in tar_samples(stream, url)]


def test_reads_every_sample_of_every_shard(opener: GcsOpener, bucket: Any) -> None:
    shards = upload_shards(bucket, count=4, samples=50)
    for url, expected in shards.items():
        assert _samples(opener, url) == expected


def test_samples_carry_the_url(opener: GcsOpener, bucket: Any) -> None:
    (url,) = upload_shards(bucket, count=1, samples=3)
    with opener.open(url) as stream:
        assert {s["__url__"] for s in tar_samples(stream, url)} == {url}


def test_bytes_exact_with_read_and_readinto_and_gcs_scheme(opener: GcsOpener, bucket: Any) -> None:
    data = os.urandom(3 * (1 << 20) + 123)
    bucket.blob("dir/blob with spaces+plus.bin").upload_from_string(data)
    url = f"gs://{bucket.name}/dir/blob with spaces+plus.bin"
    with opener.open(url) as stream:
        got = bytearray()
        while chunk := stream.read(65536 + 7):
            got += chunk
    assert bytes(got) == data
    buf = bytearray(1 << 20)
    got = bytearray()
    with opener.open(url.replace("gs://", "gcs://", 1)) as stream:
        while n := stream.readinto(buf):
            got += buf[:n]
    assert bytes(got) == data


def test_empty_object_reads_as_empty(opener: GcsOpener, bucket: Any) -> None:
    bucket.blob("empty").upload_from_string(b"")
    with opener.open(f"gs://{bucket.name}/empty") as stream:
        assert stream.read() == b""


def test_streams_without_downloading_everything(
    opener: GcsOpener, bucket: Any, fake_gcs: Any, faulty_proxy: Any
) -> None:
    size = 48 << 20
    bucket.blob("big").upload_from_string(os.urandom(size))
    proxy = faulty_proxy(fake_gcs.port)  # never cuts; counts bytes
    streaming = GcsOpener(endpoint=proxy.url)
    stream = streaming.open(f"gs://{bucket.name}/big")
    assert len(stream.read(4096)) == 4096
    stream.close()  # closing early returns at once and drops the connection
    assert proxy.bytes_forwarded < size // 2


def test_registry_routes_gs_and_gcs(fake_gcs: Any, bucket: Any) -> None:
    registry = OpenerRegistry(builtins=False)
    opener = GcsOpener(endpoint=fake_gcs.endpoint)
    registry.register("gs", opener)
    registry.register("gcs", opener)
    bucket.blob("x").upload_from_string(b"hello")
    for scheme in ("gs", "gcs"):
        with registry.open(f"{scheme}://{bucket.name}/x") as stream:
            assert stream.read() == b"hello"


def test_missing_object_names_the_url(opener: GcsOpener, bucket: Any) -> None:
    url = f"gs://{bucket.name}/no/such.tar"
    with pytest.raises(ShardNotFoundError) as info:
        opener.open(url)
    assert info.value.url == url
    assert "object 'no/such.tar' does not exist" in str(info.value)
    assert url in str(info.value)


def test_missing_bucket_says_bucket(opener: GcsOpener) -> None:
    url = "gs://no-such-bucket-anywhere/shard.tar"
    with pytest.raises(ShardNotFoundError) as info:
        opener.open(url)
    assert "bucket 'no-such-bucket-anywhere' does not exist" in str(info.value)
    assert info.value.url == url
    assert isinstance(info.value, FileNotFoundError)


def test_url_without_object_is_a_config_error(opener: GcsOpener) -> None:
    with pytest.raises(ConfigError, match="no object"):
        opener.open("gs://bucket-only/")


def test_unreachable_endpoint_names_the_endpoint() -> None:
    with refused_port() as port:
        endpoint = f"http://127.0.0.1:{port}"  # nothing listens there
        opener = GcsOpener(endpoint=endpoint, retries=0, connect_timeout=5)
        url = "gs://bkt/shard.tar"
        with pytest.raises(ShardOpenError) as info:
            opener.open(url)
    assert endpoint in str(info.value)
    assert info.value.url == url


def test_invalid_credentials_file_is_an_open_error(tmp_path: Any) -> None:
    creds = tmp_path / "creds.json"
    creds.write_text('{"type": "service_account", "client_email": "x"}')
    opener = GcsOpener(credentials=str(creds), anonymous=False)
    with pytest.raises(ShardOpenError) as info:
        opener.open("gs://bkt/shard.tar")
    assert str(creds) in str(info.value)
    assert info.value.url == "gs://bkt/shard.tar"


def test_missing_credentials_file_is_an_open_error(tmp_path: Any) -> None:
    opener = GcsOpener(credentials=str(tmp_path / "absent.json"))
    with pytest.raises(ShardOpenError, match=r"absent\.json"):
        opener.list("gs://bkt/")


def test_concurrent_readers_share_one_opener(opener: GcsOpener, bucket: Any) -> None:
    shards = upload_shards(bucket, count=8, samples=40, payload=20000)
    results: dict[str, Any] = {}

    def read(url: str) -> None:
        try:
            results[url] = _samples(opener, url)
        except BaseException as exc:  # reported by the assertion below
            results[url] = exc

    threads = [threading.Thread(target=read, args=(u,)) for u in shards]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == shards


def test_pickles_without_a_client(opener: GcsOpener, bucket: Any) -> None:
    bucket.blob("p").upload_from_string(b"abc")
    url = f"gs://{bucket.name}/p"
    with opener.open(url) as stream:  # creates the client
        assert stream.read() == b"abc"
    blob = pickle.dumps(opener)
    assert b"google" not in blob  # neither the storage client nor the authorized session
    clone = pickle.loads(blob)
    assert clone.config == opener.config and clone._client.peek() is None
    with clone.open(url) as stream:
        assert stream.read() == b"abc"


def test_gzip_encoded_object_is_read_as_stored(opener: GcsOpener, bucket: Any) -> None:
    import gzip

    raw = os.urandom(200_000)
    stored = gzip.compress(raw)
    blob = bucket.blob("encoded.tar.gz")
    blob.content_encoding = "gzip"
    blob.upload_from_string(stored, content_type="application/x-tar")
    with opener.open(f"gs://{bucket.name}/encoded.tar.gz") as stream:
        assert stream.read() == stored


def test_connections_are_reused_across_shards(
    bucket: Any, fake_gcs: Any, faulty_proxy: Any
) -> None:
    for i in range(20):
        bucket.blob(f"small-{i}").upload_from_string(os.urandom(50_000))
    proxy = faulty_proxy(fake_gcs.port)  # never cuts; counts connections
    reader = GcsOpener(endpoint=proxy.url)
    for i in range(20):
        with reader.open(f"gs://{bucket.name}/small-{i}") as stream:
            assert len(stream.read()) == 50_000
    # A body read to its end goes back to the pool: not one new connection per shard.
    assert proxy.connections <= 3


def test_generation_option_reads_that_generation(opener: GcsOpener, bucket: Any) -> None:
    bucket.blob("v").upload_from_string(b"first")
    generation = bucket.get_blob("v").generation
    with opener.open(f"gs://{bucket.name}/v", generation=generation) as stream:
        assert stream.read() == b"first"
        assert stream.generation == generation
    with pytest.raises(ShardNotFoundError):
        opener.open(f"gs://{bucket.name}/v", generation=generation + 1)
