"""Optional fast JPEG path for the image decoder: ``simplejpeg`` (libjpeg-turbo) without PIL.

``pip install 'wds_cloud[jpeg]'`` installs ``simplejpeg``. The fast path decodes straight to a
numpy array with the same libjpeg-turbo settings PIL uses (accurate integer DCT, fancy
upsampling), so its pixels equal PIL's; it takes only the cases where that has been verified
and returns ``None`` for everything else, which the caller then decodes with PIL:

* the data starts with the JPEG SOI marker ``FF D8``;
* the colour space is YCbCr or grayscale (CMYK and YCCK go to PIL, which converts them to RGB
  with its own formula);
* for the ``l`` modes, the JPEG is grayscale (PIL turns colour into L with its own weights;
  libjpeg's gray output is the Y channel, which differs);
* simplejpeg decodes it in strict mode, without a libjpeg warning (corrupt or truncated data
  goes to PIL, which then decodes it or raises the error it always raised).

Which decoder is used: ``jpeg_decoder=`` of :class:`~wds_cloud.core.imagedecode.ImageHandler`,
else ``WDS_CLOUD_JPEG_DECODER``, else ``"auto"`` (simplejpeg when it is installed).
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

import numpy as np

from wds_cloud.errors import ConfigError, MissingDependencyError
from wds_cloud.settings import env_str

JPEG_DECODERS = ("auto", "simplejpeg", "pil")
"""Values of ``jpeg_decoder=`` / ``WDS_CLOUD_JPEG_DECODER``."""

ENV_VAR = "WDS_CLOUD_JPEG_DECODER"

_FAST_COLORSPACES = frozenset({"YCbCr", "Gray"})
_OUTPUT = {"rgb": "RGB", "rgba": "RGBA", "l": "GRAY"}

_simplejpeg: ModuleType | None = None


def resolve_jpeg_decoder(jpeg_decoder: str | None = None) -> str:
    """Return ``"simplejpeg"`` or ``"pil"``: the argument, else the environment, else auto.

    Args:
        jpeg_decoder: one of :data:`JPEG_DECODERS`, or ``None`` to read ``WDS_CLOUD_JPEG_DECODER``.

    Raises:
        ConfigError: an unknown value (argument or environment).
        MissingDependencyError: ``"simplejpeg"`` was asked for and is not installed.
    """
    source = "jpeg_decoder"
    if jpeg_decoder is None:
        jpeg_decoder, source = env_str(ENV_VAR, "auto"), ENV_VAR
    choice = jpeg_decoder.strip().lower()
    if choice not in JPEG_DECODERS:
        raise ConfigError(
            f"{source}={jpeg_decoder!r} is not a JPEG decoder; expected one of "
            f"{', '.join(JPEG_DECODERS)}"
        )
    available = importlib.util.find_spec("simplejpeg") is not None
    if choice == "simplejpeg" and not available:
        raise MissingDependencyError(
            f"{source}='simplejpeg' needs the simplejpeg package", extra="jpeg"
        )
    if choice == "auto":
        return "simplejpeg" if available else "pil"
    return choice


def _module() -> ModuleType:
    global _simplejpeg
    if _simplejpeg is None:
        import simplejpeg

        _simplejpeg = simplejpeg
    return _simplejpeg


def decode_jpeg(
    data: bytes, mode: str, out: np.ndarray | None = None, colorspace: str | None = None
) -> np.ndarray | None:
    """Decode JPEG ``data`` to uint8 pixels equal to PIL's, or ``None`` when PIL must do it.

    Args:
        data: the encoded image (any bytes; non-JPEG data returns ``None``).
        mode: ``"rgb"`` (HxWx3), ``"rgba"`` (HxWx4, alpha 255) or ``"l"`` (HxW).
        out: decode into this C-contiguous uint8 array of exactly the image's size (its
            rows are overwritten, also when ``None`` is returned); the result is then a view
            of it.
        colorspace: the JPEG's colour space from :func:`jpeg_header`, when already read.

    Returns:
        A C-contiguous writable uint8 array, or ``None`` (see the module docstring for when).
    """
    if data[:2] != b"\xff\xd8":
        return None
    if colorspace is None:
        header = jpeg_header(data)
        if header is None:
            return None
        colorspace = header[2]
    sj = _module()
    try:
        if colorspace not in _FAST_COLORSPACES or (mode == "l" and colorspace != "Gray"):
            return None
        pixels: np.ndarray = sj.decode_jpeg(data, colorspace=_OUTPUT[mode], buffer=out)
    except ValueError:  # simplejpeg's error for bad data and (strict) libjpeg warnings
        return None
    if mode == "l":
        return pixels.reshape(pixels.shape[:2])
    return pixels


def jpeg_header(data: bytes) -> tuple[int, int, str] | None:
    """``(height, width, colour space)`` of JPEG ``data`` (simplejpeg), None when unreadable."""
    try:
        height, width, colorspace, _ = _module().decode_jpeg_header(data)
    except ValueError:
        return None
    return height, width, colorspace
