"""Reading s3:// objects through S3Opener against a real SeaweedFS server."""

from __future__ import annotations

import os
import pickle
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.contract.opener_contract import OpenerCase, OpenerContract
from tests.s3.conftest import make_config
from tests.support.ownership import NewThreads, refused_port
from wds_cloud.core.samples import tar_samples
from wds_cloud.errors import (
    ConfigError,
    ShardNotFoundError,
    ShardOpenError,
    ShardReadError,
)
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Config, S3Opener

pytestmark = pytest.mark.s3


class TestS3Contract(OpenerContract):
    """The shared opener contract, streaming mode."""

    @pytest.fixture
    def opener_case(self, opener: S3Opener, raw_client: Any, bucket: str) -> OpenerCase:
        data = os.urandom((1 << 20) + 17)
        raw_client.put_object(Bucket=bucket, Key="x.tar", Body=data)
        return OpenerCase(opener, f"s3://{bucket}/x.tar", f"s3://{bucket}/missing.tar", data)


class TestS3PrefetchContract(OpenerContract):
    """The shared opener contract, parallel ranged prefetch mode (small chunks)."""

    @pytest.fixture
    def opener_case(self, s3_endpoint: str, raw_client: Any, bucket: str) -> OpenerCase:
        data = os.urandom((1 << 20) + 17)
        raw_client.put_object(Bucket=bucket, Key="x.tar", Body=data)
        opener = S3Opener(make_config(s3_endpoint, prefetch=3, prefetch_chunk=100_000))
        return OpenerCase(opener, f"s3://{bucket}/x.tar", f"s3://{bucket}/missing.tar", data)


def _keys(opener: S3Opener, url: str) -> list[str]:
    with opener.open(url) as stream:
        return [s["__key__"] for s in tar_samples(stream, url)]


def test_reads_all_samples_of_a_shard(opener: S3Opener, put_shards: Any) -> None:
    ((url, keys),) = put_shards(1, 300, payload=3000)
    with opener.open(url) as stream:
        samples = list(tar_samples(stream, url))
    assert [s["__key__"] for s in samples] == keys
    assert all(s["__url__"] == url for s in samples)
    assert samples[7]["txt"] == b"0:7"
    assert samples[7]["bin"] == bytes([7]) * 3000


def test_registry_dispatches_s3(s3_config: S3Config, put_shards: Any) -> None:
    ((url, keys),) = put_shards(1, 5)
    registry = OpenerRegistry()
    registry.register("s3", S3Opener(s3_config), override=True)
    with registry.open(url) as stream:
        assert [s["__key__"] for s in tar_samples(stream, url)] == keys


def test_missing_object_and_missing_bucket(opener: S3Opener, bucket: str) -> None:
    with pytest.raises(ShardNotFoundError, match="object does not exist") as info:
        opener.open(f"s3://{bucket}/nope.tar")
    assert info.value.url == f"s3://{bucket}/nope.tar"
    with pytest.raises(ShardNotFoundError, match="bucket does not exist") as info:
        opener.open("s3://no-such-bucket-xyz/a.tar")
    assert "s3://no-such-bucket-xyz/a.tar" in str(info.value)


def test_bucket_only_url_is_a_config_error(opener: S3Opener) -> None:
    with pytest.raises(ConfigError, match="names a bucket"):
        opener.open("s3://bucket-only")
    with pytest.raises(ConfigError, match="unknown options"):
        opener.open("s3://b/k", bogus=1)


@pytest.mark.parametrize(
    ("key_id", "secret", "code"),
    [
        ("wdscloudtest", "wrong-secret", "SignatureDoesNotMatch"),
        ("nobody", "whatever", "InvalidAccessKeyId"),
    ],
)
def test_wrong_credentials(
    s3_endpoint: str, put_shards: Any, key_id: str, secret: str, code: str
) -> None:
    ((url, _),) = put_shards(1, 2)
    bad = S3Opener(make_config(s3_endpoint, access_key_id=key_id, secret_access_key=secret))
    with pytest.raises(ShardOpenError, match=code) as info:
        bad.open(url)
    assert "access denied" in str(info.value)
    assert info.value.url == url
    with pytest.raises(ShardOpenError, match=code):
        bad.list(url.rsplit("/", 1)[0] + "/")


def test_unreachable_endpoint_names_it() -> None:
    with refused_port() as port:
        endpoint = f"http://127.0.0.1:{port}"
        dead = S3Opener(make_config(endpoint, max_attempts=1, connect_timeout=2))
        with pytest.raises(ShardOpenError, match=f"cannot reach S3 endpoint {endpoint}") as info:
            dead.open("s3://bucket/key.tar")
    assert info.value.url == "s3://bucket/key.tar"


def test_cut_connections_resume_every_sample_exactly_once(
    seaweed: Any, put_shards: Any, faulty_proxy: Any
) -> None:
    shards = put_shards(6, 120, payload=4000)  # ~1 MB each
    proxy = faulty_proxy(seaweed.ports["s3.port"], cut_after=300_000)
    opener = S3Opener(make_config(proxy.url, retries=10))
    seen: Counter[tuple[str, str]] = Counter()
    resumes = 0
    for url, _ in shards:
        with opener.open(url) as stream:
            for sample in tar_samples(stream, url):
                seen[(url, sample["__key__"])] += 1
            resumes += stream.resumes  # type: ignore[attr-defined]
    expected = {(url, key) for url, keys in shards for key in keys}
    assert set(seen) == expected
    assert set(seen.values()) == {1}
    assert proxy.cuts >= 6
    assert resumes >= 6


def test_stream_gives_up_with_offset_when_every_connection_drops(
    seaweed: Any, raw_client: Any, bucket: str, faulty_proxy: Any
) -> None:
    raw_client.put_object(Bucket=bucket, Key="big.bin", Body=os.urandom(1 << 20))
    proxy = faulty_proxy(seaweed.ports["s3.port"], cut_after=200_000, first=1)
    opener = S3Opener(make_config(proxy.url, retries=2, max_attempts=1))
    url = f"s3://{bucket}/big.bin"
    with opener.open(url) as stream:
        stream.read(1000)
        proxy.set_fault(cut_after=1)  # every later connection dies at its first byte
        with pytest.raises(ShardReadError, match="giving up after 2 retries") as info:
            stream.read()
    assert info.value.url == url
    assert info.value.offset is not None and info.value.offset >= 1000


def test_object_replaced_mid_read_raises(
    seaweed: Any, raw_client: Any, bucket: str, faulty_proxy: Any
) -> None:
    raw_client.put_object(Bucket=bucket, Key="obj.bin", Body=os.urandom(2 << 20))
    proxy = faulty_proxy(seaweed.ports["s3.port"], cut_after=200_000, first=1)
    opener = S3Opener(make_config(proxy.url))
    url = f"s3://{bucket}/obj.bin"
    with opener.open(url) as stream:
        raw_client.put_object(Bucket=bucket, Key="obj.bin", Body=os.urandom(2 << 20))
        with pytest.raises(ShardReadError, match="changed while it was being read") as info:
            stream.read()
    assert info.value.url == url
    assert info.value.offset is not None and info.value.offset > 0


def test_prefetch_replaced_mid_read_raises(opener: S3Opener, raw_client: Any, bucket: str) -> None:
    raw_client.put_object(Bucket=bucket, Key="obj.bin", Body=os.urandom(2 << 20))
    url = f"s3://{bucket}/obj.bin"
    with opener.open(url, prefetch=1, prefetch_chunk=1 << 18) as stream:
        stream.read(1000)
        raw_client.put_object(Bucket=bucket, Key="obj.bin", Body=os.urandom(2 << 20))
        with pytest.raises(ShardReadError, match="changed while it was being read"):
            stream.read()


def test_prefetch_through_cut_connections(
    seaweed: Any, raw_client: Any, bucket: str, faulty_proxy: Any
) -> None:
    data = os.urandom(3 << 20)
    raw_client.put_object(Bucket=bucket, Key="p.bin", Body=data)
    proxy = faulty_proxy(seaweed.ports["s3.port"], cut_after=150_000, first=5)
    opener = S3Opener(make_config(proxy.url, prefetch=4, prefetch_chunk=1 << 18, retries=5))
    with opener.open(f"s3://{bucket}/p.bin") as stream:
        assert stream.read() == data
        assert stream.resumes >= 1  # type: ignore[attr-defined]
    assert proxy.cuts == 5


def test_prefetch_close_early_leaves_no_threads(
    opener: S3Opener, raw_client: Any, bucket: str, new_threads: NewThreads
) -> None:
    data = os.urandom(4 << 20)
    raw_client.put_object(Bucket=bucket, Key="p.bin", Body=data)
    stream = opener.open(f"s3://{bucket}/p.bin", prefetch=4, prefetch_chunk=1 << 18)
    assert stream.read(5000) == data[:5000]
    assert new_threads("wds-s3-prefetch")
    stream.close()
    assert not new_threads("wds-s3-prefetch")


def test_prefetch_samples_match_streaming(s3_endpoint: str, put_shards: Any) -> None:
    shards = put_shards(2, 150, payload=5000)
    plain = S3Opener(make_config(s3_endpoint))
    fast = S3Opener(make_config(s3_endpoint, prefetch=3, prefetch_chunk=100_000))
    for url, keys in shards:
        assert _keys(fast, url) == keys == _keys(plain, url)


def test_concurrent_threads_share_one_opener(opener: S3Opener, put_shards: Any) -> None:
    shards = put_shards(8, 60, payload=2000)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda item: _keys(opener, item[0]), shards))
    assert results == [keys for _, keys in shards]


def _keys_in_child(args: tuple[bytes, str]) -> list[str]:
    opener = pickle.loads(args[0])
    return _keys(opener, args[1])


def test_concurrent_processes_with_pickled_opener(opener: S3Opener, put_shards: Any) -> None:
    import multiprocessing

    shards = put_shards(4, 40)
    opener.client()  # a live client must not travel in the pickle
    blob = pickle.dumps(opener)
    assert b"botocore" not in blob
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.map(_keys_in_child, [(blob, url) for url, _ in shards])
    assert results == [keys for _, keys in shards]
