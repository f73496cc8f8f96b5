"""Fixtures for the decoder tests: small images in several formats and modes."""

from __future__ import annotations

import io

import numpy as np
import PIL.Image
import pytest


def encode_image(array: np.ndarray, fmt: str, mode: str | None = None) -> bytes:
    """Encode ``array`` (HW or HWC uint8) with PIL as ``fmt``."""
    stream = io.BytesIO()
    PIL.Image.fromarray(array, mode=mode).save(stream, format=fmt)
    return stream.getvalue()


@pytest.fixture(scope="session")
def images() -> dict[str, bytes]:
    """Images keyed by extension: an RGB png and jpg, a grayscale png, an RGBA png."""
    rng = np.random.default_rng(7)
    rgb = rng.integers(0, 256, size=(12, 9, 3), dtype=np.uint8)
    gray = rng.integers(0, 256, size=(12, 9), dtype=np.uint8)
    rgba = rng.integers(0, 256, size=(12, 9, 4), dtype=np.uint8)
    return {
        "png": encode_image(rgb, "PNG"),
        "jpg": encode_image(rgb, "JPEG"),
        "gray.png": encode_image(gray, "PNG"),
        "rgba.png": encode_image(rgba, "PNG"),
        "ppm": encode_image(rgb, "PPM"),
    }
