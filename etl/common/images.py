"""Pillow helpers shared by the image ETLs: decode, resize, encode, with clear errors."""

from __future__ import annotations

import io
from typing import Any

from PIL import Image

from etl.common.tarstream import EtlArgsError, EtlInputError

FORMATS = {"jpg": "JPEG", "jpeg": "JPEG", "png": "PNG", "webp": "WEBP"}
RESAMPLE = {
    "nearest": Image.Resampling.NEAREST,
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
}


def image_format(value: Any) -> str | None:
    """Validate an output format name (``jpg``/``jpeg``/``png``/``webp``) or None (keep).

    Raises:
        EtlArgsError: an unknown name.
    """
    if value is None:
        return None
    if not isinstance(value, str) or value.lower() not in FORMATS:
        raise EtlArgsError(f"format must be one of {sorted(FORMATS)} or null, got {value!r}")
    return value.lower()


def quality(value: Any) -> int:
    """Validate a JPEG/WebP quality 1..100.

    Raises:
        EtlArgsError: out of range or not an int.
    """
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 100:
        return value
    raise EtlArgsError(f"quality must be an int in 1..100, got {value!r}")


def resample(value: Any) -> Image.Resampling:
    """Validate a resampling filter name.

    Raises:
        EtlArgsError: an unknown name.
    """
    if isinstance(value, str) and value in RESAMPLE:
        return RESAMPLE[value]
    raise EtlArgsError(f"resample must be one of {sorted(RESAMPLE)}, got {value!r}")


def decode(data: bytes, where: str, member: str) -> Image.Image:
    """Decode an image fully.

    Raises:
        EtlInputError: Pillow cannot read it (names the member).
    """
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise EtlInputError(f"{where}: member {member!r} is not a readable image: {exc}") from None
    return img


def encode(img: Image.Image, fmt: str, q: int) -> bytes:
    """Encode ``img`` as ``fmt`` (an extension); JPEG drops alpha/palette by converting to RGB."""
    pil = FORMATS[fmt]
    if pil == "JPEG" and img.mode not in ("RGB", "L"):
        img = img.convert("RGB")
    out = io.BytesIO()
    if pil == "PNG":
        img.save(out, format=pil)
    else:
        img.save(out, format=pil, quality=q)
    return out.getvalue()
