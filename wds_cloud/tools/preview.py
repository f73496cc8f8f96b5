"""A PNG contact sheet of the first image samples of some shards (PIL only).

Each thumbnail is drawn with the sample's key and its label under it: ``cls`` (the class
number), else a ``label``/``cls``/``class``/``caption`` field of ``json``, else the first line
of ``txt``.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from wds_cloud.errors import ConfigError, SampleError

__all__ = ["IMAGE_EXTENSIONS", "ContactSheet", "contact_sheet", "sample_label"]

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp", "ppm", "pgm", "pbm", "bmp", "gif", "tif", "tiff")
LABEL_HEIGHT = 28  # two lines of PIL's default font


@dataclass
class ContactSheet:
    """What :func:`contact_sheet` wrote."""

    path: str
    images: int
    width: int
    height: int
    keys: list[str]

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible values."""
        return asdict(self)


def sample_label(sample: dict[str, Any]) -> str:
    """The label drawn under a thumbnail (see the module docstring); ``""`` when none."""
    cls = sample.get("cls")
    if isinstance(cls, bytes):
        return cls.decode("utf-8", "replace").strip()
    if isinstance(sample.get("json"), bytes):
        try:
            value = json.loads(sample["json"])
        except ValueError:
            value = None
        if isinstance(value, dict):
            for name in ("label", "cls", "class", "caption"):
                if name in value:
                    return str(value[name])
        elif isinstance(value, str | int | float):
            return str(value)
    if isinstance(sample.get("txt"), bytes):
        lines = sample["txt"].decode("utf-8", "replace").strip().splitlines()
        return lines[0] if lines else ""
    return ""


def _image_field(sample: dict[str, Any]) -> str | None:
    for ext in IMAGE_EXTENSIONS:
        if isinstance(sample.get(ext), bytes):
            return ext
    for key, value in sample.items():  # e.g. "left.jpg"
        if isinstance(value, bytes) and key.rsplit(".", 1)[-1] in IMAGE_EXTENSIONS:
            return key
    return None


def contact_sheet(
    urls: Iterable[str],
    output: str | os.PathLike[str],
    *,
    count: int = 16,
    columns: int = 4,
    thumb: int = 128,
) -> ContactSheet:
    """Draw the first ``count`` image samples of ``urls`` into a PNG grid.

    The sheet is ``columns * thumb`` pixels wide and ``rows * (thumb + 28)`` high, where
    ``rows = ceil(images / columns)``; images keep their aspect ratio inside their cell.

    Args:
        urls: shard URLs (any backend), read in order until ``count`` images are found.
        output: the PNG file to write.
        count: number of images.
        columns: thumbnails per row.
        thumb: cell size in pixels.

    Returns:
        What was written.

    Raises:
        ConfigError: bad sizes, or no image sample in the shards.
        SampleError: an image field that PIL cannot decode (names key and URL).
    """
    from PIL import Image, ImageDraw

    from wds_cloud.core.samples import tar_samples
    from wds_cloud.openers.registry import open_url

    if count < 1 or columns < 1 or thumb < 16:
        raise ConfigError(
            f"preview: need count>=1, columns>=1, thumb>=16 (got {count}, {columns}, {thumb})"
        )
    cells: list[tuple[Any, str, str]] = []
    url_list = list(urls)
    for url in url_list:
        stream = open_url(url)
        try:
            for sample in tar_samples(stream, url):
                field = _image_field(sample)
                if field is None:
                    continue
                image: Any
                try:
                    image = Image.open(io.BytesIO(sample[field]))
                    image.draft("RGB", (thumb, thumb))  # fast JPEG downscale
                    image = image.convert("RGB")
                except Exception as exc:
                    raise SampleError(
                        f"preview: cannot decode {field!r}: {exc}", url=url, key=sample["__key__"]
                    ) from exc
                image.thumbnail((thumb, thumb))
                cells.append((image, sample["__key__"], sample_label(sample)))
                if len(cells) >= count:
                    break
        finally:
            stream.close()
        if len(cells) >= count:
            break
    if not cells:
        raise ConfigError(
            f"preview: no image sample ({', '.join(IMAGE_EXTENSIONS)}) in {len(url_list)} shards"
        )
    rows = -(-len(cells) // columns)
    width, height = columns * thumb, rows * (thumb + LABEL_HEIGHT)
    sheet = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(sheet)
    for i, (image, key, label) in enumerate(cells):
        x, y = (i % columns) * thumb, (i // columns) * (thumb + LABEL_HEIGHT)
        sheet.paste(image, (x + (thumb - image.width) // 2, y + (thumb - image.height) // 2))
        draw.text((x + 2, y + thumb + 1), _fit(draw, key, thumb - 4), fill="black")
        if label:
            draw.text((x + 2, y + thumb + 14), _fit(draw, label, thumb - 4), fill="blue")
    path = os.fspath(output)
    sheet.save(path, format="PNG")
    return ContactSheet(path, len(cells), width, height, [key for _, key, _ in cells])


def _fit(draw: Any, text: str, width: int) -> str:
    """Shorten ``text`` with an ellipsis until it fits ``width`` pixels."""
    if draw.textlength(text) <= width:
        return text
    while text and draw.textlength(text + "...") > width:
        text = text[:-1]
    return text + "..."
