"""Image decoding by spec (``"rgb"``, ``"torchrgb8"``, ``"pil"``, ...), pixel-equal to webdataset.

PIL is imported once, the first time an image is decoded; torch only for ``torch*`` specs.
JPEGs take the optional simplejpeg path (:mod:`wds_cloud.core.jpegdecode`) when it is installed.
Numpy results are HWC (``l`` specs 2-D), torch results CHW; float specs are float32 in [0, 1].
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import numpy as np

from wds_cloud.core.decodehandlers import KeyedHandler
from wds_cloud.core.jpegdecode import resolve_jpeg_decoder
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


_SCALE = np.float32(255.0)


def _finish(pixels: np.ndarray, atype: str, etype: str | None) -> Any:
    """uint8 HW/HWC pixels to the spec's result: numpy HW/HWC or torch HW/CHW, uint8 or float32.

    One pass each: float conversion writes straight into the (transposed, for torch) output,
    and its values are webdataset's ``astype(np.float32) / 255.0`` exactly (float32 division).
    """
    chw = pixels.ndim == 3 and atype == "torch"
    if etype == "float":
        shape = (pixels.shape[2], *pixels.shape[:2]) if chw else pixels.shape
        source = pixels.transpose(2, 0, 1) if chw else pixels
        result = np.empty(shape, dtype=np.float32)
        np.divide(source, _SCALE, out=result, dtype=np.float32)
    elif chw:
        result = np.ascontiguousarray(pixels.transpose(2, 0, 1))
    else:
        result = pixels
    if atype == "numpy":
        return result
    import torch

    if not result.flags.writeable:
        result = result.copy()  # PIL's buffer is read-only; torch wants its own, writable one
    return torch.from_numpy(result)


class ImageDecode:
    """Decode image bytes to one spec (picklable, no closure)."""

    __slots__ = ("atype", "etype", "fast", "mode", "spec")

    def __init__(self, spec: str, fast: bool = False) -> None:
        self.spec = spec
        self.atype, self.etype, self.mode = imagespecs[spec]
        # the fast JPEG path gives arrays; PIL results stay PIL's (they carry info, exif, ...)
        self.fast = fast and self.atype != "pil"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ImageDecode, (self.spec, self.fast))

    def __call__(self, data: bytes) -> Any:
        if self.fast:
            from wds_cloud.core.jpegdecode import decode_jpeg

            pixels = decode_jpeg(data, self.mode)
            if pixels is not None:
                return _finish(pixels, self.atype, self.etype)
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
        # convert() above made the mode L, RGB or RGBA: HW, HWx3 or HWx4 uint8, so
        # webdataset's reshaping of other channel counts never applies
        return _finish(np.asarray(img), self.atype, self.etype)


class ImageHandler(KeyedHandler):
    """Decode images whose last extension (case-insensitive) is in ``extensions``.

    JPEGs go through ``simplejpeg`` when it is installed (``pip install 'wds_cloud[jpeg]'``) and
    the spec gives an array: same libjpeg-turbo, same pixels as PIL, about twice as fast. What it
    cannot decode exactly like PIL (CMYK, colour to ``l``, corrupt data, other formats) goes to
    PIL; ``pil*`` specs always use PIL. See :mod:`wds_cloud.core.jpegdecode`.

    Args:
        imagespec: one of :data:`imagespecs` (case-sensitive, as in webdataset).
        extensions: extensions decoded as images; default :data:`IMAGE_EXTENSIONS`.
        jpeg_decoder: ``"auto"`` (simplejpeg when installed), ``"simplejpeg"`` or ``"pil"``;
            default ``WDS_CLOUD_JPEG_DECODER``, else ``"auto"``. Read when the handler is made.

    Raises:
        ConfigError: unknown image spec or JPEG decoder (a ``ValueError``).
        MissingDependencyError: ``jpeg_decoder="simplejpeg"`` without simplejpeg installed.
    """

    def __init__(
        self,
        imagespec: str,
        extensions: Iterable[str] = IMAGE_EXTENSIONS,
        *,
        jpeg_decoder: str | None = None,
    ) -> None:
        if imagespec not in imagespecs:
            raise ConfigError(
                f"Unknown imagespec: {imagespec!r}; expected one of {', '.join(imagespecs)}"
            )
        self.imagespec = imagespec
        self.extensions = {e.lower() for e in extensions}
        self.jpeg_decoder = resolve_jpeg_decoder(jpeg_decoder)
        self._decode = ImageDecode(imagespec, fast=self.jpeg_decoder == "simplejpeg")

    def resolve(self, key: str) -> ImageDecode | None:
        """Return the image decoder when the key's last extension is an image extension."""
        if key.rpartition(".")[2].lower() in self.extensions:
            return self._decode
        return None


def imagehandler(
    imagespec: str,
    extensions: Iterable[str] = IMAGE_EXTENSIONS,
    *,
    jpeg_decoder: str | None = None,
) -> ImageHandler:
    """Lower-case alias of :class:`ImageHandler`."""
    return ImageHandler(imagespec, extensions, jpeg_decoder=jpeg_decoder)
