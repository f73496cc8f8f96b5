"""Extension-keyed encoders: turn sample values into the bytes stored in a tar member.

The default table mirrors ``webdataset.writer`` 1.0.2 (the same extensions give bytes that the
webdataset decoders read back), with three differences that make output reproducible and errors
clear: ``npz`` is written with fixed zip timestamps, a trailing ``.gz`` gzips with ``mtime=0``,
and every failure is a :class:`~wds_cloud.errors.SampleError` naming the sample key, the field
and the extension.

Dispatch rule for a field such as ``"seg.png.gz"``: bytes-like values are stored as they are and
``str`` values as UTF-8 whatever the extension; otherwise the encoder is chosen by the
lowercased last extension (``png``); a trailing ``.gz`` gzips the result. Torch is imported
only by the ``pth`` encoder; torch tensors are recognised without importing torch.
"""

from __future__ import annotations

import gzip
import io
import json
import operator
import pickle
import zipfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from wds_cloud.errors import ConfigError, MissingDependencyError, SampleError

Handler = Callable[[Any], bytes]
SampleEncoder = Callable[[dict[str, Any]], dict[str, Any]]

BYTES_TYPES = (bytes, bytearray, memoryview)

# Fixed zip timestamp (the earliest zip can hold) so that npz output is byte-identical.
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def _is_tensor(value: Any) -> bool:
    """True for torch tensors, checked without importing torch."""
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def _to_numpy(value: Any) -> np.ndarray:
    if _is_tensor(value):
        return np.asarray(value.detach().cpu().numpy())
    return np.asarray(value)


def encode_cls(value: Any) -> bytes:
    """Class labels (``cls``, ``id``, ...): an integer (or numeric string) as ASCII digits."""
    if isinstance(value, str):
        return value.encode("ascii")
    if isinstance(value, bool):
        raise TypeError("a class label must be an int, not bool")
    try:
        return str(operator.index(value)).encode("ascii")
    except TypeError:
        raise TypeError(f"a class label must be an int or str, not {type(value).__name__}")


def encode_text(value: Any) -> bytes:
    """``txt``/``text``/``transcript``/``html``: text as UTF-8 (``str`` only)."""
    if not isinstance(value, str):
        raise TypeError(f"text must be str, not {type(value).__name__}")
    return value.encode("utf-8")


def encode_json(value: Any) -> bytes:
    """``json``/``jsn``: ``json.dumps`` as UTF-8 (numpy scalars and arrays become lists)."""

    def default(obj: Any) -> Any:
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
        raise TypeError(f"{type(obj).__name__} is not JSON serializable")

    return json.dumps(value, default=default).encode("utf-8")


def encode_pickle(value: Any) -> bytes:
    """``pyd``/``pickle``: ``pickle.dumps`` with the default protocol."""
    return pickle.dumps(value)


def encode_npy(value: Any) -> bytes:
    """``npy``: the numpy ``.npy`` format (torch tensors are converted first)."""
    stream = io.BytesIO()
    np.lib.format.write_array(stream, _to_numpy(value), allow_pickle=False)
    return stream.getvalue()


def encode_npz(value: Any) -> bytes:
    """``npz``: a dict of arrays as a compressed ``.npz`` with fixed timestamps."""
    if not isinstance(value, Mapping):
        raise TypeError(f"npz needs a dict of arrays, not {type(value).__name__}")
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, array in value.items():
            if not isinstance(name, str):
                raise TypeError(f"npz array names must be str, not {type(name).__name__}")
            info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, _to_numpy(array), allow_pickle=False)
    return stream.getvalue()


def encode_pth(value: Any) -> bytes:
    """``pth``: ``torch.save`` (torch is imported here, and only here)."""
    try:
        import torch
    except ImportError as exc:
        raise MissingDependencyError("the 'pth' encoder needs torch", extra="torch") from exc
    stream = io.BytesIO()
    torch.save(value, stream)
    return stream.getvalue()


def encode_msgpack(value: Any) -> bytes:
    """``msgpack``/``mp``/``msg``: ``msgpack.packb``."""
    try:
        import msgpack
    except ImportError as exc:
        raise MissingDependencyError(
            "the 'msgpack' encoder needs msgpack", extra="encoders"
        ) from exc
    return bytes(msgpack.packb(value))


def encode_cbor(value: Any) -> bytes:
    """``cbor``: ``cbor2.dumps``."""
    try:
        import cbor2
    except ImportError as exc:
        raise MissingDependencyError("the 'cbor' encoder needs cbor2", extra="encoders") from exc
    return bytes(cbor2.dumps(value))


def _image_array(value: Any) -> np.ndarray:
    """An HWC/HW uint8 array from a numpy array or a CHW torch tensor."""
    tensor = _is_tensor(value)
    array = _to_numpy(value)
    if tensor and array.ndim == 3:
        array = array.transpose(1, 2, 0)  # torch images are CHW
    if array.dtype.kind == "f":
        if array.size and (np.nanmin(array) < -0.001 or np.nanmax(array) > 1.001):
            raise ValueError(
                f"float image values must lie in [0, 1], got [{np.nanmin(array)}, "
                f"{np.nanmax(array)}]"
            )
        array = np.round(np.clip(array, 0.0, 1.0) * 255.0).astype(np.uint8)
    elif array.dtype != np.uint8:
        raise TypeError(f"image arrays must be uint8 or float in [0, 1], not {array.dtype}")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)):
        raise ValueError(f"image arrays must be HxW or HxWx{{1,3,4}}, got shape {array.shape}")
    return array


def image_encoder(pil_format: str) -> Handler:
    """Build the encoder for one PIL format (``"PNG"``, ``"JPEG"``, ...).

    Accepts PIL images, numpy arrays (uint8, or float in [0, 1]; HxW or HxWxC) and torch
    tensors (CxHxW, as the webdataset torch decoders produce). JPEG uses quality 100.
    """

    def encode(value: Any) -> bytes:
        from PIL import Image

        image = value if isinstance(value, Image.Image) else Image.fromarray(_image_array(value))
        options: dict[str, Any] = {"quality": 100} if pil_format == "JPEG" else {}
        stream = io.BytesIO()
        image.save(stream, format=pil_format, **options)
        return stream.getvalue()

    encode.__name__ = f"encode_{pil_format.lower()}"
    return encode


def default_handlers() -> dict[str, Handler]:
    """A fresh copy of the default extension -> encoder table (extend it and pass it on)."""
    table: dict[str, Handler] = {}
    groups: list[tuple[str, Handler]] = [
        ("cls cls2 class count index inx id", encode_cls),
        ("txt text transcript html htm", encode_text),
        ("json jsn", encode_json),
        ("pyd pickle", encode_pickle),
        ("pth", encode_pth),
        ("npy", encode_npy),
        ("npz", encode_npz),
        ("msgpack mp msg", encode_msgpack),
        ("cbor", encode_cbor),
        ("jpg jpeg img image", image_encoder("JPEG")),
        ("png", image_encoder("PNG")),
        ("ppm", image_encoder("PPM")),
        ("pgm", image_encoder("PPM")),
        ("pbm", image_encoder("PPM")),
        ("webp", image_encoder("WEBP")),
        ("tiff tif", image_encoder("TIFF")),
    ]
    for names, handler in groups:
        for name in names.split():
            table[name] = handler
    return table


def dispatch_extension(field: str) -> tuple[str, bool]:
    """Return (lowercased last extension, gzip?) for a field name like ``"seg.PNG.gz"``."""
    gz = field.lower().endswith(".gz")
    name = field[:-3] if gz else field
    return name.rpartition(".")[2].lower(), gz


def encode_value(
    value: Any, field: str, handlers: Mapping[str, Handler] | None, *, key: Any = None
) -> bytes | bytearray | memoryview:
    """Encode one field of a sample.

    Args:
        value: the field's value.
        field: the field name (the extension of the tar member, e.g. ``"json.gz"``).
        handlers: extension -> encoder table; None allows only bytes and str.
        key: the sample's ``__key__``, named in errors.

    Raises:
        SampleError: no encoder for a non-bytes value, or the encoder failed.
        MissingDependencyError: the encoder's optional package is missing.
    """
    ext, gz = dispatch_extension(field)
    if isinstance(value, BYTES_TYPES):
        data: bytes | bytearray | memoryview = value
    elif isinstance(value, str):
        data = value.encode("utf-8")
    else:
        if handlers is None:
            raise SampleError(
                f"field {field!r}: encoder=False accepts only bytes or str values, "
                f"got {type(value).__name__}",
                key=key,
            )
        handler = handlers.get(ext)
        if handler is None:
            raise SampleError(
                f"field {field!r}: no encoder for extension {ext!r} and the value is "
                f"{type(value).__name__}, not bytes or str",
                key=key,
            )
        try:
            data = handler(value)
        except (SampleError, MissingDependencyError):
            raise
        except Exception as exc:
            raise SampleError(
                f"field {field!r}: the {ext!r} encoder failed for a {type(value).__name__}: {exc}",
                key=key,
            ) from exc
        if not isinstance(data, BYTES_TYPES):
            raise SampleError(
                f"field {field!r}: the {ext!r} encoder returned {type(data).__name__}, not bytes",
                key=key,
            )
    if gz:
        data = gzip.compress(data, mtime=0)
    return data


def make_encoder(spec: bool | Mapping[str, Handler] | SampleEncoder | None) -> SampleEncoder:
    """Turn ``TarWriter``'s ``encoder=`` argument into a whole-sample encoder.

    Args:
        spec: True for the default table, False/None for bytes-and-str only, a dict for a
            custom extension table (it replaces the default one), or a callable that takes
            and returns a whole sample.

    Raises:
        ConfigError: ``spec`` is none of these.
    """
    if callable(spec):
        return spec
    if spec is True:
        handlers: Mapping[str, Handler] | None = default_handlers()
    elif spec is False or spec is None:
        handlers = None
    elif isinstance(spec, Mapping):
        handlers = {str(k).lower(): v for k, v in spec.items()}
    else:
        raise ConfigError(
            f"encoder must be True, False, a dict or a callable, not {type(spec).__name__}"
        )

    def encode_sample(sample: dict[str, Any]) -> dict[str, Any]:
        key = sample.get("__key__")
        return {
            field: value if field.startswith("_") else encode_value(value, field, handlers, key=key)
            for field, value in sample.items()
        }

    return encode_sample
