"""The wds-transform ETL as a real subprocess: raw hpush contract and reads through ais://."""

from __future__ import annotations

import gzip
import http.client
import io
import json
from urllib.parse import quote, urlsplit

import pytest
from PIL import Image

from tests.emulators.ais.server import AisEmulator
from tests.etl.conftest import image_bytes, read_tar, tar_bytes
from wds_cloud.core.compat import WebDataset
from wds_cloud.core.shardopen import tarfile_samples
from wds_cloud.errors import ShardError, ShardOpenError
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.ais
NAME = "wds-transform"


def members(n: int = 6) -> list[tuple[str, bytes]]:
    out = []
    fmts = [("jpg", "JPEG"), ("png", "PNG"), ("webp", "WEBP")]
    for i in range(n):
        ext, fmt = fmts[i % 3]
        out.append((f"part/s{i:03d}.{ext}", image_bytes((40 + i, 30 + i), fmt, i)))
        out.append((f"part/s{i:03d}.cls", str(i % 4).encode()))
        out.append((f"part/s{i:03d}.json", json.dumps({"i": i}).encode()))
    return out


def put(url: str, path: str, body: bytes, etl_args: str | None = None) -> tuple[int, bytes]:
    """One hpush request, as AIStore sends it: ``PUT /<bck>/<obj>[?etl_args=]`` with the body."""
    u = urlsplit(url)
    target = path + ("" if etl_args is None else "?etl_args=" + quote(etl_args, safe=""))
    conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=30)
    try:
        conn.request("PUT", target, body=body, headers={"Content-Length": str(len(body))})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_health(resize_etl_url: str) -> None:
    u = urlsplit(resize_etl_url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=10)
    conn.request("GET", "/health")
    resp = conn.getresponse()
    assert (resp.status, resp.read()) == (200, b"Running")
    conn.close()


def test_hpush_resizes_images_keeps_other_members_and_order(resize_etl_url: str) -> None:
    src = members()
    status, body = put(resize_etl_url, "/data/shard-0.tar", tar_bytes(src), '{"size": [16, 12]}')
    assert status == 200, body
    out = read_tar(body)
    assert [n for n, _ in out] == [n for n, _ in src]
    for (name, data), (_, before) in zip(out, src, strict=True):
        if name.endswith((".cls", ".json")):
            assert data == before
        else:
            img = Image.open(io.BytesIO(data))
            assert img.size == (16, 12)
            assert (
                img.format == {"jpg": "JPEG", "png": "PNG", "webp": "WEBP"}[name.rsplit(".", 1)[1]]
            )


def test_hpush_format_and_default_size(resize_etl_url: str) -> None:
    src = members(3)
    status, body = put(resize_etl_url, "/data/a%20b.tar", tar_bytes(src), '{"format": "png"}')
    assert status == 200, body
    out = read_tar(body)
    assert [n for n, _ in out][0::3] == ["part/s000.png", "part/s001.png", "part/s002.png"]
    for name, data in out[0::3]:
        img = Image.open(io.BytesIO(data))
        assert (img.format, img.size) == ("PNG", (224, 224)), name


def test_hpush_png_pixels_follow_pil_resize(resize_etl_url: str) -> None:
    png = image_bytes((32, 32), "PNG", 5)
    status, body = put(
        resize_etl_url,
        "/b/o.tar",
        tar_bytes([("k.png", png)]),
        '{"size": 8, "resample": "nearest"}',
    )
    assert status == 200, body
    got = Image.open(io.BytesIO(read_tar(body)[0][1]))
    want = Image.open(io.BytesIO(png)).resize((8, 8), Image.Resampling.NEAREST)
    assert got.tobytes() == want.tobytes()


def test_hpush_gzip_input_gives_plain_tar(resize_etl_url: str) -> None:
    src = members(2)
    status, body = put(resize_etl_url, "/b/o.tar.gz", gzip.compress(tar_bytes(src)), '{"size": 9}')
    assert status == 200, body
    assert [n for n, _ in read_tar(body)] == [n for n, _ in src]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ("{not json", "not JSON"),
        ('{"size": -3}', "size must be"),
        ('{"format": "gif"}', "format must be"),
        ('{"quality": 0}', "quality must be"),
        ('{"colour": 1}', "unknown etl_args key"),
    ],
)
def test_hpush_bad_args_is_400_naming_object(resize_etl_url: str, args: str, needle: str) -> None:
    status, body = put(resize_etl_url, "/data/x.tar", tar_bytes(members(1)), args)
    assert status == 400
    text = body.decode()
    assert needle in text and "wds-transform" in text and "data/x.tar" in text


def test_hpush_not_a_tar_is_422(resize_etl_url: str) -> None:
    status, body = put(resize_etl_url, "/data/x.tar", b"hello, not a tar" * 100)
    assert status == 422
    assert b"data/x.tar" in body and b"not a tar" in body


def test_hpush_corrupt_first_image_is_422_naming_member(resize_etl_url: str) -> None:
    bad = tar_bytes([("k1.jpg", b"\xff\xd8 not really a jpeg"), ("k1.cls", b"1")])
    status, body = put(resize_etl_url, "/data/x.tar", bad)
    assert status == 422
    assert b"'k1.jpg'" in body and b"not a readable image" in body


def test_corrupt_image_mid_shard_cuts_the_reply(resize_etl_url: str) -> None:
    src = [*members(3), ("part/zz.jpg", b"\xff\xd8 broken")]
    u = urlsplit(resize_etl_url)
    body = tar_bytes(src)
    conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=30)
    conn.request("PUT", "/b/o.tar", body=body, headers={"Content-Length": str(len(body))})
    resp = conn.getresponse()
    assert resp.status == 200
    with pytest.raises(http.client.IncompleteRead):
        resp.read()
    conn.close()


def test_read_through_emulator_with_etl_args(
    ais_emulator: AisEmulator, registry: OpenerRegistry, resize_etl_url: str
) -> None:
    ais_emulator.register_etl(NAME, resize_etl_url)
    ais_emulator.store.create_bucket("data")
    src = members(9)
    ais_emulator.store.put_object("data", "train/shard-0.tar", tar_bytes(src))
    url = "ais://data/train/shard-0.tar"
    ds = WebDataset(
        [url], registry=registry, etl=NAME, etl_args={"size": [20, 10]}, shardshuffle=False
    )
    samples = list(ds)
    assert [s["__key__"] for s in samples] == [f"part/s{i:03d}" for i in range(9)]
    for i, s in enumerate(samples):
        assert s["cls"] == str(i % 4).encode() and s["json"] == json.dumps({"i": i}).encode()
        (img_ext,) = set(s) & {"jpg", "png", "webp"}
        assert Image.open(io.BytesIO(s[img_ext])).size == (20, 10)
    # per-URL ?etl= with its own args, through tarfile_samples
    per_url = f"{url}?etl={NAME}&etl_args=" + quote('{"size":7,"format":"webp"}', safe="")
    again = list(tarfile_samples([per_url], registry=registry))
    assert all(Image.open(io.BytesIO(s["webp"])).size == (7, 7) for s in again)
    assert [s["cls"] for s in again] == [s["cls"] for s in samples]


def test_bad_etl_args_surface_as_typed_error_naming_etl_and_url(
    ais_emulator: AisEmulator, registry: OpenerRegistry, resize_etl_url: str
) -> None:
    ais_emulator.register_etl(NAME, resize_etl_url)
    ais_emulator.store.create_bucket("data")
    ais_emulator.store.put_object("data", "s.tar", tar_bytes(members(1)))
    ds = WebDataset(["ais://data/s.tar"], registry=registry, etl=NAME, etl_args={"size": "big"})
    with pytest.raises(ShardOpenError) as info:
        list(ds)
    assert info.value.url is not None and "ais://data/s.tar" in info.value.url
    assert NAME in str(info.value) and "size must be" in str(info.value)


def test_corrupt_image_mid_shard_is_an_error_not_a_short_shard(
    ais_emulator: AisEmulator, registry: OpenerRegistry, resize_etl_url: str
) -> None:
    ais_emulator.register_etl(NAME, resize_etl_url)
    ais_emulator.store.create_bucket("data")
    src = [*members(4), ("part/zz.jpg", b"\xff\xd8 broken")]
    ais_emulator.store.put_object("data", "s.tar", tar_bytes(src))
    with pytest.raises(ShardError):
        list(WebDataset(["ais://data/s.tar"], registry=registry, etl=NAME, shardshuffle=False))
