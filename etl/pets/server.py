"""``pets-etl``: prepare Oxford-IIIT-pets samples (``image.jpg``, ``trimap.png``, ``cls``).

hpush/hpull ETL on ``aistore.sdk.etl.webserver.HTTPMultiThreadedServer``. Per sample (members
grouped by WebDataset key, one sample in memory at a time):

* ``image.jpg`` resized with ``resample`` (bilinear), ``trimap.png`` resized to the **same**
  size with nearest neighbour (labels stay labels);
* trimap values ``{1, 2, 3}`` (pet, background, border) mapped to ``{0, 1, 2}``; any other
  value is an error naming the member;
* optional centre ``crop`` applied to both after the resize;
* every other member (``cls``, ``json``, ...) kept byte for byte; member order kept.

``etl_args`` (JSON object, all optional)::

    {"size": 128 | [w, h], "crop": null | n | [w, h], "quality": 90, "map_trimap": true}

Run: ``AIS_TARGET_URL=... python -m etl.pets.server [--host H] [--port P]``.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from PIL import Image

from etl.common import images
from etl.common.tarstream import (
    END_OF_ARCHIVE,
    EtlArgsError,
    EtlInputError,
    TarEtlServer,
    iter_members,
    iter_samples,
    member_bytes,
    parse_json_args,
    parse_size,
    sample_key,
    serve,
)

DEFAULT_SIZE = 128
TRIMAP_LUT = [255] * 256
TRIMAP_LUT[1], TRIMAP_LUT[2], TRIMAP_LUT[3] = 0, 1, 2


@dataclass(frozen=True)
class PetsArgs:
    """Parsed ``etl_args``."""

    size: tuple[int, int] = (DEFAULT_SIZE, DEFAULT_SIZE)
    crop: tuple[int, int] | None = None
    quality: int = 90
    map_trimap: bool = True


def parse_args(etl_args: str) -> PetsArgs:
    """``etl_args`` JSON -> :class:`PetsArgs`.

    Raises:
        EtlArgsError: bad JSON, unknown key, bad value, or a crop larger than the size.
    """
    raw = parse_json_args(etl_args, {"size", "crop", "quality", "map_trimap"})
    size = parse_size(raw.get("size", DEFAULT_SIZE))
    crop = None if raw.get("crop") is None else parse_size(raw["crop"], "crop")
    if crop is not None and (crop[0] > size[0] or crop[1] > size[1]):
        raise EtlArgsError(f"crop {list(crop)} is larger than size {list(size)}")
    mapping = raw.get("map_trimap", True)
    if not isinstance(mapping, bool):
        raise EtlArgsError(f"map_trimap must be true or false, got {mapping!r}")
    return PetsArgs(size, crop, images.quality(raw.get("quality", 90)), mapping)


def _center_crop(img: Image.Image, crop: tuple[int, int] | None) -> Image.Image:
    if crop is None:
        return img
    left = (img.width - crop[0]) // 2
    top = (img.height - crop[1]) // 2
    return img.crop((left, top, left + crop[0], top + crop[1]))


def _trimap(img: Image.Image, args: PetsArgs, where: str, member: str) -> bytes:
    if img.mode not in ("L", "P"):
        raise EtlInputError(f"{where}: trimap {member!r} has mode {img.mode}, expected L or P")
    img = img.convert("L") if img.mode == "P" else img
    if args.map_trimap:
        hist = img.histogram()
        bad = [v for v, n in enumerate(hist) if n and v not in (1, 2, 3)]
        if bad:
            raise EtlInputError(f"{where}: trimap {member!r} has values {bad[:5]} not in 1..3")
        img = img.point(TRIMAP_LUT)
    img = _center_crop(img.resize(args.size, Image.Resampling.NEAREST), args.crop)
    return images.encode(img, "png", 100)


def transform_sample(
    sample: list[tuple[tarfile.TarInfo, bytes]], args: PetsArgs, where: str
) -> list[tuple[tarfile.TarInfo, bytes]]:
    """Resize/crop the image and trimap of one sample; other members unchanged."""
    decoded: dict[str, Image.Image] = {}
    for info, data in sample:
        ext = sample_key(info.name)[1].lower()
        if info.isreg() and ext in ("image.jpg", "trimap.png"):
            decoded[ext] = images.decode(data, where, info.name)
    sizes = {img.size for img in decoded.values()}
    if len(sizes) > 1:
        name = sample_key(sample[0][0].name)[0]
        raise EtlInputError(f"{where}: sample {name!r}: image and trimap sizes differ: {sizes}")
    out = []
    for info, data in sample:
        ext = sample_key(info.name)[1].lower()
        if ext == "image.jpg" and info.isreg():
            img = decoded[ext].resize(args.size, Image.Resampling.BILINEAR)
            data = images.encode(_center_crop(img, args.crop), "jpg", args.quality)
        elif ext == "trimap.png" and info.isreg():
            data = _trimap(decoded[ext], args, where, info.name)
        out.append((info, data))
    return out


def pets_tar(reader: BinaryIO, where: str, args: PetsArgs) -> Iterator[bytes]:
    """Output tar bytes, one sample at a time."""
    for sample in iter_samples(iter_members(reader, where)):
        yield b"".join(member_bytes(i, d) for i, d in transform_sample(sample, args, where))
    yield END_OF_ARCHIVE


class PetsEtl(TarEtlServer):
    """Oxford-pets ETL: consistent image/trimap resize and crop, trimap {1,2,3} -> {0,1,2}."""

    etl_name = "pets-etl"

    def check_args(self, etl_args: str) -> PetsArgs:
        return parse_args(etl_args)

    def transform_tar(self, reader: BinaryIO, where: str, args: Any) -> Iterator[bytes]:
        return pets_tar(reader, where, args)


__all__ = ["EtlArgsError", "PetsArgs", "PetsEtl", "parse_args", "pets_tar"]

if __name__ == "__main__":
    serve(PetsEtl)
