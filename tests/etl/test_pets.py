"""The pets ETL as a real subprocess: raw hpush contract, reads through ais://, init_class."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.emulators.ais.server import AisEmulator
from tests.etl.conftest import image_bytes, read_tar, tar_bytes
from tests.etl.test_wds_transform import put
from wds_cloud.core.compat import WebDataset
from wds_cloud.errors import ShardOpenError
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.ais
NAME = "pets-etl"


def pets_members(n: int, size: tuple[int, int] = (48, 36)) -> list[tuple[str, bytes]]:
    out = []
    for i in range(n):
        key = f"pets/Abyssinian_{i:03d}"
        out.append((f"{key}.image.jpg", image_bytes(size, "JPEG", i)))
        out.append((f"{key}.trimap.png", image_bytes(size, "PNG", i, mode="L")))
        out.append((f"{key}.cls", str(i % 37).encode()))
    return out


def trimap_array(data: bytes) -> Any:
    img = Image.open(io.BytesIO(data))
    assert img.mode == "L"
    return np.asarray(img)


def test_hpush_resize_map_and_keep(pets_etl_url: str) -> None:
    src = pets_members(4)
    status, body = put(pets_etl_url, "/pets/shard-0.tar", tar_bytes(src), '{"size": [24, 18]}')
    assert status == 200, body
    out = read_tar(body)
    assert [n for n, _ in out] == [n for n, _ in src]
    for (name, data), (_, before) in zip(out, src, strict=True):
        if name.endswith(".cls"):
            assert data == before
        elif name.endswith(".image.jpg"):
            assert Image.open(io.BytesIO(data)).size == (24, 18)
        else:
            arr = trimap_array(data)
            assert arr.shape == (18, 24)
            assert set(np.unique(arr)) == {0, 1, 2}  # 1,2,3 -> 0,1,2
            want = np.asarray(
                Image.open(io.BytesIO(before)).resize((24, 18), Image.Resampling.NEAREST)
            )
            assert (arr == want - 1).all()  # nearest: labels, never blends


def test_hpush_crop_is_consistent(pets_etl_url: str) -> None:
    src = pets_members(1)
    args = '{"size": [40, 30], "crop": [20, 10], "map_trimap": false}'
    status, body = put(pets_etl_url, "/pets/s.tar", tar_bytes(src), args)
    assert status == 200, body
    image, trimap, cls = read_tar(body)
    assert Image.open(io.BytesIO(image[1])).size == (20, 10)
    arr = trimap_array(trimap[1])
    full = np.asarray(Image.open(io.BytesIO(src[1][1])).resize((40, 30), Image.Resampling.NEAREST))
    assert (arr == full[10:20, 10:30]).all()  # centre crop, values unmapped
    assert cls == src[2]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ('{"crop": [500, 10]}', "larger than size"),
        ('{"map_trimap": "yes"}', "map_trimap must be"),
        ('{"size": [1, 2, 3]}', "size must be"),
    ],
)
def test_hpush_bad_args_400(pets_etl_url: str, args: str, needle: str) -> None:
    status, body = put(pets_etl_url, "/pets/s.tar", tar_bytes(pets_members(1)), args)
    assert status == 400 and needle in body.decode() and "pets-etl" in body.decode()


def test_hpush_bad_trimap_values_422(pets_etl_url: str) -> None:
    bad = io.BytesIO()
    Image.new("L", (8, 8), 7).save(bad, format="PNG")
    src = [("k.image.jpg", image_bytes((8, 8), "JPEG", 1)), ("k.trimap.png", bad.getvalue())]
    status, body = put(pets_etl_url, "/pets/s.tar", tar_bytes(src))
    assert status == 422 and b"'k.trimap.png'" in body and b"[7]" in body


def test_hpush_size_mismatch_422(pets_etl_url: str) -> None:
    src = [
        ("k.image.jpg", image_bytes((8, 8), "JPEG", 1)),
        ("k.trimap.png", image_bytes((9, 8), "PNG", 1, mode="L")),
    ]
    status, body = put(pets_etl_url, "/pets/s.tar", tar_bytes(src))
    assert status == 422 and b"sizes differ" in body


def test_read_through_emulator(
    ais_emulator: AisEmulator, registry: OpenerRegistry, pets_etl_url: str
) -> None:
    ais_emulator.register_etl(NAME, pets_etl_url)
    ais_emulator.store.create_bucket("pets")
    urls = []
    for s in range(2):
        ais_emulator.store.put_object("pets", f"p-{s}.tar", tar_bytes(pets_members(5)))
        urls.append(f"ais://pets/p-{s}.tar")
    ds = WebDataset(urls, registry=registry, etl=NAME, etl_args={"size": 32}, shardshuffle=False)
    samples = list(ds)
    assert len(samples) == 10
    for s in samples:
        assert set(s) >= {"__key__", "__url__", "image.jpg", "trimap.png", "cls"}
        assert Image.open(io.BytesIO(s["image.jpg"])).size == (32, 32)
        assert int(trimap_array(s["trimap.png"]).max()) == 2


def test_deploy_with_init_class(
    ais_emulator: AisEmulator, ais_client: Any, registry: OpenerRegistry
) -> None:
    """``init_class`` ships the class by value (cloudpickle); the emulator serves it in-process."""
    from etl.deploy import deploy_class
    from etl.pets.server import PetsEtl

    deploy_class(ais_client, "pets-cls", PetsEtl)
    ais_emulator.store.create_bucket("pets")
    ais_emulator.store.put_object("pets", "p.tar", tar_bytes(pets_members(2)))
    got = list(
        WebDataset(["ais://pets/p.tar"], registry=registry, etl="pets-cls", etl_args={"size": 8})
    )
    assert [Image.open(io.BytesIO(s["image.jpg"])).size for s in got] == [(8, 8), (8, 8)]
    with pytest.raises(ShardOpenError, match="crop"):
        list(
            WebDataset(
                ["ais://pets/p.tar"], registry=registry, etl="pets-cls", etl_args={"crop": 999}
            )
        )
