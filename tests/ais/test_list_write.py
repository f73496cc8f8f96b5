"""ais:// listing (all pages) and writing (single PUT, multipart, abort), on the emulator and
the real cluster (where a listing merges the pages of two targets)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

import wds_cloud as wds
from tests.ais.backends import AisBackend
from tests.emulators.ais.server import AisEmulator
from wds_cloud.errors import ConfigError, ShardNotFoundError, UploadError
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.ais


def list_gets(emu: AisEmulator) -> int:
    return sum(1 for m, p, _, _ in emu.requests if m == "GET" and p.startswith("/v1/buckets/"))


def test_list_all_pages(ais_backend: AisBackend) -> None:
    bucket = ais_backend.create_bucket("many")
    names = [f"train/shard-{i:03d}.tar" for i in range(11)]
    for n in reversed(names):
        ais_backend.put_object(bucket, n, b"x")
    ais_backend.put_object(bucket, "val/shard-000.tar", b"x")
    opener = ais_backend.opener(page_size=3, retries=0)
    got = opener.list(f"ais://{bucket}/train/")
    assert got == [f"ais://{bucket}/{n}" for n in names]
    if ais_backend.emulator is not None:
        assert list_gets(ais_backend.emulator) == 4  # 3 + 3 + 3 + 2
    assert len(opener.list(f"ais://{bucket}/")) == 12


@pytest.mark.slow_on_real  # 2,000 PUTs: ~14 s on a busy 2-core machine
def test_list_thousands_across_targets_by_prefix(ais_backend: AisBackend) -> None:
    """2,000 objects under two prefixes, listed 250 a page: on the real cluster each page is
    merged from both targets' listings; names sorted, each once, sizes from the listing."""
    bucket = ais_backend.create_bucket("thousands")
    names = [f"{'a' if i % 4 else 'b'}/obj-{i:05d}.tar" for i in range(2000)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: ais_backend.put_object(bucket, n, n.encode() * 2), names))
    if ais_backend.kind == "real":  # the names are spread over both targets
        ports = {ais_backend.port_for(bucket, n) for n in names[:20]}
        assert len(ports) == 2, ports
    opener = ais_backend.opener(page_size=250)
    for prefix in ("a/", "b/", ""):
        want = sorted(n for n in names if n.startswith(prefix))
        got = opener.list_sizes(f"ais://{bucket}/{prefix}")
        assert got == [(f"ais://{bucket}/{n}", 2 * len(n)) for n in want]
    assert opener.list(f"ais://{bucket}/a/obj-0000") == [
        f"ais://{bucket}/a/obj-{i:05d}.tar" for i in range(1, 10) if i % 4
    ]


def test_list_keeps_query_and_quotes_names(ais_backend: AisBackend, opener: AisOpener) -> None:
    odd = ais_backend.create_bucket("odd")
    ais_backend.put_object(odd, "a b#1.tar", b"data")
    urls = opener.list(f"ais://{odd}/?etl=some-etl")
    assert urls == [f"ais://{odd}/a%20b%231.tar?etl=some-etl"]
    plain = opener.list(f"ais://{odd}/")
    stream = opener.open(plain[0])
    assert stream.read() == b"data"
    stream.close()


def test_list_sizes_and_etl(ais_backend: AisBackend, opener: AisOpener) -> None:
    """Sizes come with the listing; through an inline ETL they are unknown (None): the ETL
    returns other bytes than the stored object's (only listed here, so the real cluster
    without ETL lists it too)."""
    sz = ais_backend.create_bucket("sz")
    for i, n in enumerate((0, 1, 512, 70001)):
        ais_backend.put_object(sz, f"p/{i}.bin", b"q" * n)
    assert opener.list_sizes(f"ais://{sz}/p/") == [
        (f"ais://{sz}/p/{i}.bin", n) for i, n in enumerate((0, 1, 512, 70001))
    ]
    assert opener.list_sizes(f"ais://{sz}/p/?etl=up") == [
        (f"ais://{sz}/p/{i}.bin?etl=up", None) for i in range(4)
    ]


@pytest.mark.emulator_only("a remote bucket needs a cloud backend configured on the cluster")
def test_list_remote_provider(ais_emulator: AisEmulator, opener: AisOpener) -> None:
    ais_emulator.store.create_bucket("gbk", provider="gcp")
    ais_emulator.store.put_object("gbk", "s.tar", b"1", provider="gcp")
    assert opener.list("ais://gbk/?provider=gs") == ["ais://gbk/s.tar?provider=gs"]


def test_list_missing_bucket(ais_backend: AisBackend, opener: AisOpener) -> None:
    url = f"ais://{ais_backend.bucket_name('nobucket')}/prefix"
    with pytest.raises(ShardNotFoundError) as info:
        opener.list(url)
    assert info.value.url == url


def test_create_small_object_single_put(ais_backend: AisBackend, opener: AisOpener) -> None:
    out = ais_backend.create_bucket("out")
    with opener.create(f"ais://{out}/small.tar") as w:
        w.write(b"abc")
        w.write(memoryview(b"def"))
        assert not ais_backend.has_object(out, "small.tar")
        assert ais_backend.pending_uploads(out) == []
    assert ais_backend.get_object(out, "small.tar") == b"abcdef"
    if ais_backend.emulator is not None:
        assert not any(q.get("uploadId") for _, _, q, _ in ais_backend.emulator.requests)


def test_create_multipart_visible_only_after_close(ais_backend: AisBackend) -> None:
    out = ais_backend.create_bucket("out")
    opener = ais_backend.opener(part_size=1000, retries=0)
    data = os.urandom(4500)
    w = opener.create(f"ais://{out}/big.tar")
    for i in range(0, len(data), 700):
        w.write(data[i : i + 700])
    assert not ais_backend.has_object(out, "big.tar")
    assert ais_backend.pending_uploads(out) == ["big.tar"]
    w.close()
    assert ais_backend.get_object(out, "big.tar") == data
    assert ais_backend.pending_uploads(out) == []
    if ais_backend.emulator is not None:
        requests = ais_backend.emulator.requests
        parts = [q["partNumber"] for m, _, q, _ in requests if "partNumber" in q]
        assert parts == ["1", "2", "3", "4", "5"]


def test_abort_discards(ais_backend: AisBackend) -> None:
    out = ais_backend.create_bucket("out")
    opener = ais_backend.opener(part_size=100, retries=0)
    w = opener.create(f"ais://{out}/gone.tar")
    w.write(b"z" * 350)
    assert ais_backend.pending_uploads(out) == ["gone.tar"]
    w.abort()
    assert not ais_backend.has_object(out, "gone.tar")
    assert ais_backend.pending_uploads(out) == []
    with pytest.raises(ValueError):
        w.write(b"more")


def test_exception_in_with_block_aborts(ais_backend: AisBackend, opener: AisOpener) -> None:
    out = ais_backend.create_bucket("out")
    with pytest.raises(RuntimeError), opener.create(f"ais://{out}/half.tar") as w:
        w.write(b"partial")
        raise RuntimeError("producer failed")
    assert not ais_backend.has_object(out, "half.tar")


def test_create_failure_is_upload_error(ais_backend: AisBackend, opener: AisOpener) -> None:
    url = f"ais://{ais_backend.bucket_name('no-such-bucket')}/x.tar"
    w = opener.create(url)
    w.write(b"data")
    with pytest.raises(UploadError) as info:
        w.close()
    assert info.value.url == url
    assert "does not exist" in str(info.value)


def test_multipart_failure_aborts(ais_backend: AisBackend) -> None:
    opener = ais_backend.opener(part_size=10, retries=0)
    nope = ais_backend.bucket_name("nope")
    w = opener.create(f"ais://{nope}/x.tar")
    with pytest.raises(UploadError, match="uploading part"):
        w.write(b"0123456789ab")
    assert ais_backend.pending_uploads(nope) == []


def test_create_rejects_etl() -> None:
    opener = AisOpener(endpoint="http://127.0.0.1:9")  # refused before any request
    with pytest.raises(ConfigError, match="ETL"):
        opener.create("ais://out/x.tar?etl=upper-etl")


def test_gopen_round_trip(ais_backend: AisBackend, opener: AisOpener) -> None:
    bucket = ais_backend.create_bucket("gopen")
    registry = OpenerRegistry()
    registry.register("ais", opener, override=True)
    data = os.urandom(300_001)
    with wds.gopen(f"ais://{bucket}/obj.tar", "wb", registry=registry) as stream:
        stream.write(data)
    with wds.gopen(f"ais://{bucket}/obj.tar", registry=registry) as stream:
        assert stream.read() == data
