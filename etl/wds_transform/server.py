"""``wds-transform``: resize (and optionally re-encode) every image of a WebDataset shard.

hpush/hpull ETL on ``aistore.sdk.etl.webserver.HTTPMultiThreadedServer``. Images are the
members whose last extension is ``jpg``, ``jpeg``, ``png`` or ``webp``; each is decoded,
resized and re-encoded (in its own format unless ``format`` is given, which also renames the
member's last extension). Every other member keeps its bytes; the member order is kept. The
tar is streamed one member at a time.

``etl_args`` (JSON object, all optional)::

    {"size": 224 | [w, h],  "format": "jpg"|"png"|"webp"|null,  "quality": 90,
     "resample": "bilinear"}

Run: ``AIS_TARGET_URL=... python -m etl.wds_transform.server [--host H] [--port P]``.
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
    TarEtlServer,
    iter_members,
    member_bytes,
    parse_json_args,
    parse_size,
    serve,
)

IMAGE_EXTS = ("jpg", "jpeg", "png", "webp")
DEFAULT_SIZE = 224


@dataclass(frozen=True)
class ResizeArgs:
    """Parsed ``etl_args``."""

    size: tuple[int, int] = (DEFAULT_SIZE, DEFAULT_SIZE)
    format: str | None = None
    quality: int = 90
    resample: Image.Resampling = Image.Resampling.BILINEAR


def parse_args(etl_args: str) -> ResizeArgs:
    """``etl_args`` JSON -> :class:`ResizeArgs`.

    Raises:
        EtlArgsError: bad JSON, unknown key or bad value.
    """
    raw = parse_json_args(etl_args, {"size", "format", "quality", "resample"})
    return ResizeArgs(
        size=parse_size(raw.get("size", DEFAULT_SIZE)),
        format=images.image_format(raw.get("format")),
        quality=images.quality(raw.get("quality", 90)),
        resample=images.resample(raw.get("resample", "bilinear")),
    )


def transform_member(
    info: tarfile.TarInfo, data: bytes, args: ResizeArgs, where: str
) -> tuple[tarfile.TarInfo, bytes]:
    """Resize one image member (others returned unchanged)."""
    stem, dot, ext = info.name.rpartition(".")
    if not info.isreg() or not dot or "/" in ext or ext.lower() not in IMAGE_EXTS:
        return info, data
    img = images.decode(data, where, info.name)
    if img.size != args.size:
        img = img.resize(args.size, args.resample)
    fmt = args.format or ext.lower()
    out = images.encode(img, fmt, args.quality)
    if args.format and args.format != ext.lower():
        info.name = f"{stem}.{args.format}"
    return info, out


def resize_tar(reader: BinaryIO, where: str, args: ResizeArgs) -> Iterator[bytes]:
    """Output tar bytes, one member at a time."""
    for info, data in iter_members(reader, where):
        info, data = transform_member(info, data, args, where)
        yield member_bytes(info, data)
    yield END_OF_ARCHIVE


class WdsTransform(TarEtlServer):
    """WebDataset shard image resize ETL (``etl_args``: size, format, quality, resample)."""

    etl_name = "wds-transform"

    def check_args(self, etl_args: str) -> ResizeArgs:
        return parse_args(etl_args)

    def transform_tar(self, reader: BinaryIO, where: str, args: Any) -> Iterator[bytes]:
        return resize_tar(reader, where, args)


__all__ = ["EtlArgsError", "ResizeArgs", "WdsTransform", "parse_args", "resize_tar"]

if __name__ == "__main__":
    serve(WdsTransform)
