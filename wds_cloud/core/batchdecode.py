"""Decoding a batch's JPEGs straight into one array: the decode step of ``make_loader``'s readers.

``make_loader(..., decode="rgb8")`` (or ``"rgba8"``, ``"l8"``) without ``map`` builds its
readers' pipelines with :func:`batch_decode` instead of ``.decode(spec)``: every field is
decoded as ``.decode(spec)`` decodes it, except that a JPEG image is left as a
:class:`PendingImage` (its bytes and where it came from), and the reader's batch collation
(:func:`decode_columns`) decodes a column of them into one ``(n, h, w, c)`` uint8 array, each
image straight into its row (simplejpeg's ``buffer=``). Decoding into an array of each
image's own and then stacking them costs a fresh allocation (page faults) and a copy per
image; measured on 256x256 photos: 320 us of CPU per image against 260 us.

Nothing else changes: the same decoder with the same settings gives the same pixels; what
the fast path leaves to PIL (CMYK, colour to ``l``, corrupt or truncated data) is decoded by
PIL as before and copied into its row; a column whose images differ in size (or mixes
images with other values) is decoded image by image and left a list, as the collation leaves
arrays of different shapes; a failure is the :class:`~wds_cloud.core.decodehandlers.DecodingError`
``.decode()`` raises, naming the field, the sample key and the shard URL. Only the moment
changes (the collation of the reader's batch, on the same reader), so this is used only
where nothing runs between decode and that collation but field selection (``to_tuple``):
``make_loader`` without ``map``, whose decode stage reraises errors.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from wds_cloud.core.curry import FilterFunction
from wds_cloud.core.decode import Decoder, decode_stage, field_error
from wds_cloud.core.imagedecode import ImageDecode, ImageHandler
from wds_cloud.core.jpegdecode import decode_jpeg, jpeg_header

__all__ = [
    "BATCH_SPECS",
    "Buffers",
    "PendingImage",
    "batch_decode",
    "can_batch_decode",
    "decode_columns",
]

#: Image specs decoded into batches: numpy uint8 arrays, the only results rows of one array hold.
BATCH_SPECS = frozenset({"rgb8", "rgba8", "l8"})
_CHANNELS = {"rgb": 3, "rgba": 4}


class PendingImage:
    """A JPEG image left for the batch collation to decode (see the module docstring)."""

    __slots__ = ("colorspace", "data", "decode", "field", "key", "url")

    def __init__(self, data: bytes, decode: ImageDecode) -> None:
        self.data = data
        self.decode = decode
        self.field = ""
        self.key: Any = None
        self.url: Any = None
        self.colorspace: str | None = None

    def shape(self) -> tuple[int, ...] | None:
        """The decoded array's shape from the JPEG header; None when it cannot be read."""
        header = jpeg_header(self.data)
        if header is None:
            return None
        height, width, self.colorspace = header
        channels = _CHANNELS.get(self.decode.mode)
        return (height, width) if channels is None else (height, width, channels)

    def decoded(self) -> Any:
        """The image decoded as ``.decode(spec)`` would (PIL where the fast path cannot).

        Raises:
            DecodingError: naming the field, the sample key and the shard URL.
        """
        try:
            return self.decode(self.data)
        except Exception as exn:
            raise field_error(exn, self.url, self.key, self.field) from exn

    def decode_into(self, row: np.ndarray) -> None:
        """Decode into ``row`` (the image's shape, C-contiguous uint8).

        Raises:
            DecodingError: as :meth:`decoded`.
        """
        if decode_jpeg(self.data, self.decode.mode, out=row, colorspace=self.colorspace) is None:
            row[...] = self.decoded()  # what simplejpeg leaves to PIL

    def __repr__(self) -> str:
        return f"PendingImage({len(self.data)} bytes, {self.decode.spec}, key={self.key!r})"


class _Deferred:
    """The image step of a batch decoder: JPEGs become :class:`PendingImage`, the rest is
    decoded now."""

    __slots__ = ("decode",)

    def __init__(self, decode: ImageDecode) -> None:
        self.decode = decode

    def __call__(self, data: bytes) -> Any:
        if data[:2] == b"\xff\xd8":
            return PendingImage(data, self.decode)
        return self.decode(data)


class _DeferringHandler(ImageHandler):
    def resolve(self, key: str) -> Any:
        found = super().resolve(key)
        return None if found is None else _Deferred(found)


class _BatchDecoder(Decoder):
    """A :class:`~wds_cloud.core.decode.Decoder` whose JPEGs stay :class:`PendingImage`,
    each told where it came from."""

    def decode(self, sample: dict[str, Any]) -> dict[str, Any]:
        result = super().decode(sample)
        for k, v in result.items():
            if type(v) is PendingImage:
                v.field, v.key, v.url = k, sample.get("__key__"), sample.get("__url__")
        return result


def can_batch_decode(decode: Any, map: Any = None, shuffle_buffer: int = 0) -> bool:
    """Whether ``make_loader``'s readers decode into batches: ``decode`` is one spec of
    :data:`BATCH_SPECS`, the fast JPEG path (simplejpeg) is installed and chosen, no ``map``
    runs between decode and batching, and no main-process shuffle (``shuffle_buffer``)
    takes the batches apart (its buffer would keep every batch one of its rows is in alive)."""
    if map is not None or shuffle_buffer > 0:
        return False
    if not isinstance(decode, str) or decode not in BATCH_SPECS:
        return False
    return ImageHandler(decode).jpeg_decoder == "simplejpeg"


def batch_decode(spec: str) -> FilterFunction:
    """The decode stage of ``.decode(spec)``, leaving JPEGs to :func:`decode_columns`."""
    return decode_stage(_BatchDecoder([_DeferringHandler(spec)]))


def decode_columns(collate: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``collate`` with the columns of :class:`PendingImage` decoded first: each column into
    one array (same-sized images) or a list of arrays (see the module docstring)."""
    return _DecodingCollate(collate)


class _DecodingCollate:
    __slots__ = ("buffers", "collate")

    def __init__(self, collate: Callable[[Any], Any]) -> None:
        self.collate = collate
        self.buffers = Buffers()

    def __deepcopy__(self, memo: dict[int, Any]) -> _DecodingCollate:
        return _DecodingCollate(copy.deepcopy(self.collate, memo))  # a reader's: its own buffers

    def __reduce__(self) -> tuple[Any, ...]:
        return (_DecodingCollate, (self.collate,))

    def __call__(self, samples: list[Any]) -> Any:
        batch = self.collate(samples)
        if isinstance(batch, dict):
            for k, column in batch.items():
                if _pending(column):
                    batch[k] = self._decode_column(column)
            return batch
        if isinstance(batch, tuple | list):
            return type(batch)(self._decode_column(c) if _pending(c) else c for c in batch)
        return batch

    def _decode_column(self, values: list[Any]) -> Any:
        first = values[0]
        shape = first.shape() if type(first) is PendingImage else None
        if shape is None or any(
            type(v) is not PendingImage or v.decode is not first.decode or v.shape() != shape
            for v in values[1:]
        ):  # images of different sizes, or some decoded already (not JPEG): one by one
            return [v.decoded() if type(v) is PendingImage else v for v in values]
        out = self.buffers.take((len(values), *shape))
        for row, v in zip(out, values, strict=True):
            v.decode_into(row)
        return out


class Buffers:
    """The batch arrays of one reader, each reused once nothing references it any more.

    A fresh array of a batch's size (12.5 MB for 64 256x256 RGB images) is fresh memory that
    the kernel zeroes page by page when the decoder first writes it (measured: ~5 % of the
    reader's CPU); an array whose batch has been consumed and dropped everywhere (its only
    reference is this pool's) is written again instead. Anything that still holds the batch,
    a view of it or a tensor made from it (``torch.from_numpy``) holds a reference, so an
    array in use is never reused. At most :attr:`keep` arrays are kept.
    """

    keep = 8

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []

    def take(self, shape: tuple[int, ...]) -> np.ndarray:
        """A uint8 array of ``shape`` that nothing else references (contents undefined)."""
        arrays = self.arrays
        for i in range(len(arrays)):
            # 2: the list's reference and getrefcount's argument: nothing else holds it
            if arrays[i].shape == shape and sys.getrefcount(arrays[i]) == 2:
                return arrays[i]
        out = np.empty(shape, dtype=np.uint8)
        if len(arrays) < self.keep:
            arrays.append(out)
        return out


def _pending(column: Any) -> bool:
    return type(column) is list and any(type(v) is PendingImage for v in column)
