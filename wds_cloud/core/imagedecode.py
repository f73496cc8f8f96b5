"""Image decoding by spec (``"rgb"``, ``"torchrgb8"``, ``"pil"``, ...), pixel-equal to webdataset.

PIL is imported once, the first time an image is decoded; torch only for ``torch*`` specs.
Numpy results are HWC (``l`` specs 2-D), torch results CHW; float specs are float32 in [0, 1].
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import numpy as np

from wds_cloud.core.decode import KeyedHandler
from wds_cloud.errors import ConfigError

IMAGE_EXTENSIONS = [
    "blp",
    "bmp",
    "dib",
    "bufr",
    "cur",
    "pcx",
    "dcx",
    "dds",
    "ps",
    "eps",
    "fit",
    "fits",
    "fli",
    "flc",
    "ftc",
    "ftu",
    "gbr",
    "gif",
    "grib",
    "h5",
    "hdf",
    "png",
    "apng",
    "jp2",
    "j2k",
    "jpc",
    "jpf",
    "jpx",
    "j2c",
    "icns",
    "ico",
    "im",
    "iim",
    "tif",
    "tiff",
    "jfif",
    "jpe",
    "jpg",
    "jpeg",
    "mpg",
    "mpeg",
    "msp",
    "pcd",
    "pxr",
    "pbm",
    "pgm",
    "ppm",
    "pnm",
    "psd",
    "bw",
    "rgb",
    "rgba",
    "sgi",
    "ras",
    "tga",
    "icb",
    "vda",
    "vst",
    "webp",
    "wmf",
    "emf",
    "xbm",
    "xpm",
]
"""Extensions passed to the image decoder (the same list as webdataset 1.0.2)."""

imagespecs: dict[str, tuple[str, str | None, str]] = {
    "l8": ("numpy", "uint8", "l"),
    "rgb8": ("numpy", "uint8", "rgb"),
    "rgba8": ("numpy", "uint8", "rgba"),
    "l": ("numpy", "float", "l"),
    "rgb": ("numpy", "float", "rgb"),
    "rgba": ("numpy", "float", "rgba"),
    "torchl8": ("torch", "uint8", "l"),
    "torchrgb8": ("torch", "uint8", "rgb"),
    "torchrgba8": ("torch", "uint8", "rgba"),
    "torchl": ("torch", "float", "l"),
    "torchrgb": ("torch", "float", "rgb"),
    "torch": ("torch", "float", "rgb"),
    "torchrgba": ("torch", "float", "rgba"),
    "pill": ("pil", None, "l"),
    "pil": ("pil", None, "rgb"),
    "pilrgb": ("pil", None, "rgb"),
    "pilrgba": ("pil", None, "rgba"),
}
"""Spec -> (array type, element type, mode)."""

_pil_image: ModuleType | None = None


def _pil() -> ModuleType:
    global _pil_image
    if _pil_image is None:
        import PIL.Image

        _pil_image = PIL.Image
    return _pil_image


class _ImageDecode:
    """Decode image bytes to one spec (picklable, no closure)."""

    __slots__ = ("atype", "etype", "mode")

    def __init__(self, spec: str) -> None:
        self.atype, self.etype, self.mode = imagespecs[spec]

    def __reduce__(self) -> tuple[Any, ...]:
        for spec, value in imagespecs.items():
            if value == (self.atype, self.etype, self.mode):
                return (_ImageDecode, (spec,))
        raise AssertionError("unreachable")  # pragma: no cover

    def __call__(self, data: bytes) -> Any:
        image_module = _pil()
        mode = self.mode
        with io.BytesIO(data) as stream:
            img = image_module.open(stream)
            img.load()
            # For arrays, converting to the mode the image already has would only copy it;
            # PIL results are always converted so they are plain, detached Image objects.
            if self.atype == "pil" or img.mode != mode.upper():
                img = img.convert(mode.upper())
        if self.atype == "pil":
            return img
        result = np.asarray(img)
        if self.etype == "float":
            result = result.astype(np.float32)
            result /= 255.0  # in place: same values as webdataset's astype(...) / 255.0
        # convert() above fixed the channel count; these mirror webdataset for odd modes
        if mode == "l" and result.ndim == 3:
            result = np.mean(result[:, :, :3], axis=2)
        elif mode == "rgb" and result.ndim == 2:
            result = np.repeat(result[:, :, np.newaxis], 3, axis=2)
        elif mode == "rgba" and result.ndim == 2:
            result = np.repeat(result[:, :, np.newaxis], 4, axis=2)
            result[:, :, 3] = 255
        if self.atype == "numpy":
            return result
        import torch

        if result.ndim == 3:
            return torch.from_numpy(result.transpose(2, 0, 1).copy())
        return torch.from_numpy(result.copy())


class ImageHandler(KeyedHandler):
    """Decode images whose last extension (case-insensitive) is in ``extensions``.

    Args:
        imagespec: one of :data:`imagespecs` (case-sensitive, as in webdataset).
        extensions: extensions decoded as images; default :data:`IMAGE_EXTENSIONS`.

    Raises:
        ConfigError: unknown image spec (a ``ValueError``).
    """

    def __init__(self, imagespec: str, extensions: Iterable[str] = IMAGE_EXTENSIONS) -> None:
        if imagespec not in imagespecs:
            raise ConfigError(
                f"Unknown imagespec: {imagespec!r}; expected one of {', '.join(imagespecs)}"
            )
        self.imagespec = imagespec
        self.extensions = {e.lower() for e in extensions}
        self._decode = _ImageDecode(imagespec)

    def resolve(self, key: str) -> _ImageDecode | None:
        """Return the image decoder when the key's last extension is an image extension."""
        if key.rpartition(".")[2].lower() in self.extensions:
            return self._decode
        return None


def imagehandler(imagespec: str, extensions: Iterable[str] = IMAGE_EXTENSIONS) -> ImageHandler:
    """Lower-case alias of :class:`ImageHandler`."""
    return ImageHandler(imagespec, extensions)
