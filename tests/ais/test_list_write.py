"""ais:// listing (all pages) and writing (single PUT, multipart, abort) against the emulator."""

from __future__ import annotations

import os

import pytest

import wds_cloud as wds
from tests.emulators.ais.server import AisEmulator
from wds_cloud.errors import ConfigError, ShardNotFoundError, UploadError
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.ais


def list_gets(emu: AisEmulator) -> int:
    return sum(1 for m, p, _, _ in emu.requests if m == "GET" and p.startswith("/v1/buckets/"))


def test_list_all_pages(ais_emulator: AisEmulator) -> None:
    store = ais_emulator.store
    store.create_bucket("many")
    names = [f"train/shard-{i:03d}.tar" for i in range(11)]
    for n in reversed(names):
        store.put_object("many", n, b"x")
    store.put_object("many", "val/shard-000.tar", b"x")
    opener = AisOpener(endpoint=ais_emulator.url, page_size=3, retries=0)
    got = opener.list("ais://many/train/")
    assert got == [f"ais://many/{n}" for n in names]
    assert list_gets(ais_emulator) == 4  # 3 + 3 + 3 + 2
    assert len(opener.list("ais://many/")) == 12


def test_list_keeps_query_and_quotes_names(ais_emulator: AisEmulator, opener: AisOpener) -> None:
    ais_emulator.store.create_bucket("odd")
    ais_emulator.store.put_object("odd", "a b#1.tar", b"data")
    urls = opener.list("ais://odd/?etl=some-etl")
    assert urls == ["ais://odd/a%20b%231.tar?etl=some-etl"]
    plain = opener.list("ais://odd/")
    stream = opener.open(plain[0])
    assert stream.read() == b"data"
    stream.close()


def test_list_sizes_and_etl(ais_emulator: AisEmulator, opener: AisOpener) -> None:
    """Sizes come with the listing; through an inline ETL they are unknown (None): the ETL
    returns other bytes than the stored object's."""
    ais_emulator.store.create_bucket("sz")
    for i, n in enumerate((0, 1, 512, 70001)):
        ais_emulator.store.put_object("sz", f"p/{i}.bin", b"q" * n)
    assert opener.list_sizes("ais://sz/p/") == [
        (f"ais://sz/p/{i}.bin", n) for i, n in enumerate((0, 1, 512, 70001))
    ]
    assert opener.list_sizes("ais://sz/p/?etl=up") == [
        (f"ais://sz/p/{i}.bin?etl=up", None) for i in range(4)
    ]


def test_list_remote_provider(ais_emulator: AisEmulator, opener: AisOpener) -> None:
    ais_emulator.store.create_bucket("gbk", provider="gcp")
    ais_emulator.store.put_object("gbk", "s.tar", b"1", provider="gcp")
    assert opener.list("ais://gbk/?provider=gs") == ["ais://gbk/s.tar?provider=gs"]


def test_list_missing_bucket(opener: AisOpener) -> None:
    with pytest.raises(ShardNotFoundError) as info:
        opener.list("ais://nobucket/prefix")
    assert info.value.url == "ais://nobucket/prefix"


def test_create_small_object_single_put(ais_emulator: AisEmulator, opener: AisOpener) -> None:
    ais_emulator.store.create_bucket("out")
    with opener.create("ais://out/small.tar") as w:
        w.write(b"abc")
        w.write(memoryview(b"def"))
        assert not ais_emulator.store.has_object("out", "small.tar")
    assert ais_emulator.store.get_object("out", "small.tar").data == b"abcdef"
    assert not any(q.get("uploadId") for _, _, q, _ in ais_emulator.requests)


def test_create_multipart_visible_only_after_close(ais_emulator: AisEmulator) -> None:
    ais_emulator.store.create_bucket("out")
    opener = AisOpener(endpoint=ais_emulator.url, part_size=1000, retries=0)
    data = os.urandom(4500)
    w = opener.create("ais://out/big.tar")
    for i in range(0, len(data), 700):
        w.write(data[i : i + 700])
    assert not ais_emulator.store.has_object("out", "big.tar")
    assert ais_emulator.store.pending_uploads() == [("ais", "out", "big.tar")]
    w.close()
    assert ais_emulator.store.get_object("out", "big.tar").data == data
    assert ais_emulator.store.pending_uploads() == []
    parts = [q["partNumber"] for m, _, q, _ in ais_emulator.requests if "partNumber" in q]
    assert parts == ["1", "2", "3", "4", "5"]


def test_abort_discards(ais_emulator: AisEmulator) -> None:
    ais_emulator.store.create_bucket("out")
    opener = AisOpener(endpoint=ais_emulator.url, part_size=100, retries=0)
    w = opener.create("ais://out/gone.tar")
    w.write(b"z" * 350)
    assert ais_emulator.store.pending_uploads()
    w.abort()
    assert not ais_emulator.store.has_object("out", "gone.tar")
    assert ais_emulator.store.pending_uploads() == []
    with pytest.raises(ValueError):
        w.write(b"more")


def test_exception_in_with_block_aborts(ais_emulator: AisEmulator, opener: AisOpener) -> None:
    ais_emulator.store.create_bucket("out")
    with pytest.raises(RuntimeError), opener.create("ais://out/half.tar") as w:
        w.write(b"partial")
        raise RuntimeError("producer failed")
    assert not ais_emulator.store.has_object("out", "half.tar")


def test_create_failure_is_upload_error(ais_emulator: AisEmulator, opener: AisOpener) -> None:
    w = opener.create("ais://no-such-bucket/x.tar")
    w.write(b"data")
    with pytest.raises(UploadError) as info:
        w.close()
    assert info.value.url == "ais://no-such-bucket/x.tar"
    assert "does not exist" in str(info.value)


def test_multipart_failure_aborts(ais_emulator: AisEmulator) -> None:
    opener = AisOpener(endpoint=ais_emulator.url, part_size=10, retries=0)
    w = opener.create("ais://nope/x.tar")
    with pytest.raises(UploadError, match="uploading part"):
        w.write(b"0123456789ab")
    assert ais_emulator.store.pending_uploads() == []


def test_create_rejects_etl(opener: AisOpener) -> None:
    with pytest.raises(ConfigError, match="ETL"):
        opener.create("ais://out/x.tar?etl=upper-etl")


def test_gopen_round_trip(ais_emulator: AisEmulator, opener: AisOpener) -> None:
    ais_emulator.store.create_bucket("gopen")
    registry = OpenerRegistry()
    registry.register("ais", opener, override=True)
    data = os.urandom(300_001)
    with wds.gopen("ais://gopen/obj.tar", "wb", registry=registry) as stream:
        stream.write(data)
    with wds.gopen("ais://gopen/obj.tar", registry=registry) as stream:
        assert stream.read() == data
