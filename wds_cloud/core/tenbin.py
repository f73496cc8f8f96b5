"""The ``tenbin`` binary tensor format (``.ten`` / ``.tb``), byte-compatible with webdataset.

A buffer is a sequence of chunks, each: the 8 magic bytes ``~TenBin~``, the payload length as a
native-endian int64, the payload padded with zeros to a multiple of 64 bytes. Each array is two
chunks: a header (int64s: dtype code such as ``"f4"`` packed into 8 bytes, an 8-byte info
string, ndim, then the dimensions) followed by the raw C-order data.

Differences from webdataset 1.0.2: ``uint32`` works here (webdataset's table misspells it), and
truncated or malformed buffers raise :class:`ValueError` naming the byte offset.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

MAGIC = b"~TenBin~"

_SHORT = {
    "float16": "f2",
    "float32": "f4",
    "float64": "f8",
    "int8": "i1",
    "int16": "i2",
    "int32": "i4",
    "int64": "i8",
    "uint8": "u1",
    "uint16": "u2",
    "uint32": "u4",
    "uint64": "u8",
}
_LONG = {v: k for k, v in _SHORT.items()}


def _roundup(n: int, k: int = 64) -> int:
    return k * ((n + k - 1) // k)


def _str64(s: str) -> bytes:
    raw = s.encode("ascii")
    if len(raw) > 8:
        raise ValueError(f"tenbin info string {s!r} is longer than 8 bytes")
    return raw + b"\0" * (8 - len(raw))


def encode_buffer(arrays: Sequence[np.ndarray], infos: Sequence[str] | None = None) -> bytes:
    """Encode a list of arrays into one tenbin buffer.

    Args:
        arrays: numpy arrays of a supported dtype (float16/32/64, (u)int8/16/32/64).
        infos: optional per-array info strings (at most 8 ASCII bytes each).

    Raises:
        ValueError: unsupported dtype, too many dimensions, or infos of the wrong length.
    """
    if infos is not None and len(infos) != len(arrays):
        raise ValueError(f"tenbin: {len(infos)} infos for {len(arrays)} arrays")
    out = bytearray()
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        if not a.flags.c_contiguous:
            a = a.copy(order="C")
        code = _SHORT.get(a.dtype.name)
        if code is None:
            raise ValueError(f"tenbin: unsupported dtype {a.dtype.name}")
        if a.ndim >= 10:
            raise ValueError("tenbin: too many dimensions (at most 9)")
        info = "" if infos is None else infos[i]
        header = _str64(code) + _str64(info) + struct.pack(f"@{1 + a.ndim}q", a.ndim, *a.shape)
        for payload in (header, a.tobytes()):
            out += MAGIC + struct.pack("@q", len(payload)) + payload
            out += b"\0" * (_roundup(len(payload)) - len(payload))
    return bytes(out)


def _chunks(buf: bytes | memoryview) -> list[memoryview]:
    view = memoryview(buf)
    total = len(view)
    chunks = []
    offset = 0
    while offset < total:
        if offset + 16 > total or view[offset : offset + 8] != MAGIC:
            raise ValueError(f"tenbin: bad magic at byte offset {offset}")
        (nbytes,) = struct.unpack_from("@q", view, offset + 8)
        if nbytes < 0 or offset + 16 + nbytes > total:
            raise ValueError(f"tenbin: chunk at byte offset {offset} has bad length {nbytes}")
        chunks.append(view[offset + 16 : offset + 16 + nbytes])
        offset += 16 + _roundup(nbytes)
    return chunks


def decode_buffer(buf: bytes | memoryview) -> list[np.ndarray]:
    """Decode a tenbin buffer into a list of (read-only) numpy arrays.

    Raises:
        ValueError: the buffer is not valid tenbin (the message names the byte offset).
    """
    chunks = _chunks(buf)
    if len(chunks) % 2:
        raise ValueError("tenbin: header chunk without data chunk")
    result = []
    for header, data in zip(chunks[::2], chunks[1::2], strict=True):
        if len(header) < 24:
            raise ValueError("tenbin: array header is too short")
        code = bytes(header[:8]).rstrip(b"\0").decode("ascii", "replace")
        if code not in _LONG:
            raise ValueError(f"tenbin: unsupported dtype code {code!r}")
        (ndim,) = struct.unpack_from("@q", header, 16)
        if not 0 <= ndim < 10 or len(header) < 24 + 8 * ndim:
            raise ValueError(f"tenbin: bad ndim {ndim}")
        shape = struct.unpack_from(f"@{ndim}q", header, 24)
        dtype = np.dtype(_LONG[code])
        count = int(np.prod(shape, dtype=np.int64))
        if count * dtype.itemsize > len(data):
            raise ValueError(f"tenbin: data chunk too short for shape {shape} {dtype}")
        result.append(np.frombuffer(data, dtype=dtype, count=count).reshape(shape))
    return result
