"""The AIStore emulator driven only through the real aistore 2.0.0 SDK (research §7 table)."""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

import pytest
import requests
import xxhash
from aistore.sdk.archive_config import ArchiveConfig, ArchiveMode
from aistore.sdk.errors import (
    AISError,
    ErrBckAlreadyExists,
    ErrBckNotFound,
    ErrETLAlreadyExists,
    ErrETLNotFound,
    ErrObjNotFound,
)
from aistore.sdk.list_object_flag import ListObjectFlag

from tests.ais.conftest import make_shard
from tests.ais.etl_upper import UpperEtl, transform_tar
from tests.emulators.ais.server import AisEmulator

pytestmark = pytest.mark.ais


def test_buckets(ais_client: Any, ais_emulator: AisEmulator) -> None:
    bck = ais_client.bucket("bk1")
    bck.create()
    with pytest.raises(ErrBckAlreadyExists):
        bck.create()
    bck.create(exist_ok=True)
    props = json.loads(bck.head()["Ais-Bucket-Props"])
    assert props["name"] == "bk1"
    assert [b.name for b in ais_client.cluster().list_buckets()] == ["bk1"]
    bck.delete()
    with pytest.raises(ErrBckNotFound):
        bck.delete()
    with pytest.raises(AISError) as info:
        bck.head()
    assert info.value.status_code == 404


def test_put_get_range_head_delete(ais_client: Any) -> None:
    bck = ais_client.bucket("b")
    bck.create()
    obj = bck.object("dir/a b.txt")
    data = bytes(range(200))
    obj.get_writer().put_content(data)
    reader = obj.get_reader()
    assert reader.read_all() == data
    assert reader.attributes.checksum_type == "xxhash2"
    assert reader.attributes.checksum_value == xxhash.xxh64(data).hexdigest()
    assert obj.get_reader(byte_range="bytes=10-19").read_all() == data[10:20]
    assert obj.get_reader(byte_range="bytes=190-").read_all() == data[190:]
    assert obj.get_reader(byte_range="bytes=-5").read_all() == data[-5:]
    with pytest.raises(AISError) as info:
        obj.get_reader(byte_range="bytes=500-").read_all()
    assert info.value.status_code == 416
    assert obj.head().size == 200
    assert obj.props.checksum_value == xxhash.xxh64(data).hexdigest()
    obj.delete()
    with pytest.raises(ErrObjNotFound):
        obj.get_reader().read_all()
    with pytest.raises(ErrObjNotFound):
        obj.delete()
    with pytest.raises(ErrBckNotFound):
        ais_client.bucket("nob").object("x").get_writer().put_content(b"1")


def test_head_missing_puts_error_in_header(ais_emulator: AisEmulator) -> None:
    ais_emulator.store.create_bucket("b")
    r = requests.head(f"{ais_emulator.url}/v1/objects/b/missing?provider=ais", timeout=5)
    assert r.status_code == 404 and r.content == b""
    assert json.loads(r.headers["Hdr-Error"])["message"] == "t[emu]: ais://b/missing does not exist"


def test_archive_reads(ais_client: Any) -> None:
    bck = ais_client.bucket("arch")
    bck.create()
    data, expected = make_shard(1, 3)
    obj = bck.object("s.tar")
    obj.get_writer().put_content(data)
    member = obj.get_reader(archive_config=ArchiveConfig(archpath="dir1/s01_00001.txt"))
    assert member.read_all() == expected[1]["txt"]
    with pytest.raises(ErrObjNotFound, match=r"nope\.txt in ais://arch/s\.tar does not exist"):
        obj.get_reader(archive_config=ArchiveConfig(archpath="nope.txt")).read_all()
    sel = obj.get_reader(
        archive_config=ArchiveConfig(regex="dir1/s01_00002", mode=ArchiveMode.WDSKEY)
    )
    with tarfile.open(fileobj=io.BytesIO(sel.read_all())) as tar:
        assert sorted(tar.getnames()) == [f"dir1/s01_00002.{e}" for e in ("bin", "cls", "txt")]
    prefix = obj.get_reader(
        archive_config=ArchiveConfig(regex="dir1/s01_0000", mode=ArchiveMode.PREFIX)
    )
    with tarfile.open(fileobj=io.BytesIO(prefix.read_all())) as tar:
        assert len(tar.getnames()) == 9


def test_listing_pages_and_arch_dir(ais_client: Any, ais_emulator: AisEmulator) -> None:
    bck = ais_client.bucket("lst")
    bck.create()
    for i in range(5):
        bck.object(f"o{i}").get_writer().put_content(b"x" * i)
    page = bck.list_objects(page_size=2)
    assert [e.name for e in page.entries] == ["o0", "o1"]
    assert page.continuation_token == "o1" and page.uuid
    assert [e.name for e in bck.list_objects_iter(page_size=2)] == [f"o{i}" for i in range(5)]
    assert [e.size for e in bck.list_all_objects(prefix="o3")] == [3]
    data, _ = make_shard(0, 2)
    bck.object("z.tar").get_writer().put_content(data)
    members = bck.list_archive("z.tar")
    assert [m.name for m in members][:3] == [
        "z.tar/dir0/s00_00000.bin",
        "z.tar/dir0/s00_00000.cls",
        "z.tar/dir0/s00_00000.txt",
    ]
    assert len(members) == 6
    assert bck.list_objects(prefix="z", flags=[ListObjectFlag.ARCH_DIR]).entries[0].is_cached()


def test_multipart_upload(ais_client: Any, ais_emulator: AisEmulator) -> None:
    bck = ais_client.bucket("mp")
    bck.create()
    mpu = bck.object("o").multipart_upload().create()
    mpu.add_part(1).put_content(b"hello ")
    mpu.add_part(2).put_content(b"world")
    assert not ais_emulator.store.has_object("mp", "o")
    mpu.complete()
    assert bck.object("o").get_reader().read_all() == b"hello world"
    gone = bck.object("p").multipart_upload().create()
    gone.add_part(1).put_content(b"x")
    gone.abort()
    assert not ais_emulator.store.has_object("mp", "p")
    assert ais_emulator.store.pending_uploads() == []


def test_etl_registered_by_url(ais_client: Any, ais_emulator: AisEmulator, etl_url: str) -> None:
    from aistore.sdk.etl import ETLConfig

    bck = ais_client.bucket("e")
    bck.create()
    data, _ = make_shard(0, 3)
    obj = bck.object("s.tar")
    obj.get_writer().put_content(data)
    ais_emulator.register_etl("upper-etl", etl_url)
    # archpath and Range are ignored with an ETL, as real AIStore does
    got = obj.get_reader(
        etl=ETLConfig("upper-etl", {"suffix": "!"}), archive_config=ArchiveConfig(archpath="x")
    ).read_all()
    assert got == transform_tar(data, '{"suffix":"!"}')
    with pytest.raises(AISError) as info:
        obj.get_reader(etl=ETLConfig("missing-etl")).read_all()
    assert info.value.status_code == 404 and "missing-etl does not exist" in info.value.message


def test_etl_init_class_served_in_process(ais_client: Any) -> None:
    from aistore.sdk.etl import ETLConfig

    bck = ais_client.bucket("ec")
    bck.create()
    data, _ = make_shard(2, 2)
    obj = bck.object("s.tar")
    obj.get_writer().put_content(data)
    etl = ais_client.etl("class-etl")

    @etl.init_class()
    class LocalUpper(UpperEtl):
        pass

    assert obj.get_reader(etl=ETLConfig("class-etl")).read_all() == transform_tar(data, "")
    with pytest.raises(ErrETLAlreadyExists):
        ais_client.etl("class-etl").init(image="whatever")
    assert etl.view().init_msg.name == "class-etl"
    assert [e.id for e in ais_client.cluster().list_etls()] == ["class-etl"]
    etl.stop()
    with pytest.raises(AISError):
        obj.get_reader(etl=ETLConfig("class-etl")).read_all()
    etl.delete()
    with pytest.raises(ErrETLNotFound):
        etl.view()


def test_etl_init_by_registered_image(
    ais_client: Any, ais_emulator: AisEmulator, etl_url: str
) -> None:
    from aistore.sdk.etl import ETLConfig

    ais_emulator.register_etl_image("repo/upper:1", etl_url)
    ais_client.etl("image-etl").init(image="repo/upper:1")
    bck = ais_client.bucket("ei")
    bck.create()
    data, _ = make_shard(3, 1)
    bck.object("s.tar").get_writer().put_content(data)
    got = bck.object("s.tar").get_reader(etl=ETLConfig("image-etl")).read_all()
    assert got == transform_tar(data, "")
    with pytest.raises(AISError) as info:
        ais_client.etl("other-etl").init(image="unknown/image:2")
    assert info.value.status_code == 400


def test_cut_after_breaks_the_stream(ais_client: Any, ais_emulator: AisEmulator) -> None:
    bck = ais_client.bucket("cut")
    bck.create()
    bck.object("o").get_writer().put_content(b"y" * 100_000)
    ais_emulator.cut_after(1000, match="/cut/o")
    raw = bck.object("o").get_reader().raw()
    got = b""
    with pytest.raises(Exception) as info:
        while chunk := raw.read(4096):
            got += chunk
    assert "IncompleteRead" in repr(info.value) or "Connection broken" in repr(info.value)
    assert len(got) <= 1000
    assert bck.object("o").get_reader().read_all() == b"y" * 100_000  # one-shot fault


def test_dsort_routes_are_delegated(ais_emulator: AisEmulator) -> None:
    r = requests.get(f"{ais_emulator.url}/v1/sort?uuid=srt-none", timeout=5)
    assert r.status_code in (404, 501)
    assert "srt-none" in r.text or "not available" in r.text
