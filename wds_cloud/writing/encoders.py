"""Extension-keyed encoders: turn sample values into the bytes stored in a tar member.

This is ``webdataset.writer`` 1.0.2's encoding side, with its names (:func:`numpy_dumps`,
:func:`torch_dumps`, :func:`tenbin_dumps`, :func:`mp_dumps`, :func:`cbor_dumps`,
:func:`imageencoder`, :func:`bytestr`, :func:`add_handlers`, :func:`make_handlers`,
:data:`default_handlers`, :func:`encode_based_on_extension`, :func:`make_encoder`). For every
extension webdataset encodes, the bytes are webdataset's (``tests/writing/test_encoder_bytes.py``
compares them), except where webdataset's output is not reproducible: ``npz`` is written with
fixed zip timestamps and a trailing ``.gz`` gzips with ``mtime=0`` (webdataset stamps the
current time into both). Beyond webdataset: ``webp``, ``pgm``/``pbm`` (which webdataset cannot
write), CxHxW torch tensors as images, 4-channel images, and every failure is a
:class:`~wds_cloud.errors.SampleError` naming the sample key, the field and the extension.

Dispatch rule for a field such as ``"seg.png.gz"``: bytes-like values are stored as they are and
``str`` values as UTF-8 whatever the extension; otherwise the encoder is chosen by the
lowercased last extension (``png``); a trailing ``.gz`` gzips the result. Torch is imported
only by the ``pth`` encoder; torch tensors are recognised without importing torch.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import operator
import pickle
import zipfile
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from wds_cloud.errors import ConfigError, MissingDependencyError, SampleError

Encoded = bytes | bytearray | memoryview
EncodeHandler = Callable[[Any], Encoded]
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


def bytestr(data: Any) -> bytes:
    """``data`` as bytes: bytes as they are, anything else as its ``str`` in ASCII (webdataset's)."""
    if isinstance(data, bytes):
        return data
    return str(data).encode("ascii")


def numpy_dumps(data: Any) -> bytes:
    """``npy``: the numpy ``.npy`` format (torch tensors are converted first)."""
    stream = io.BytesIO()
    np.lib.format.write_array(stream, _to_numpy(data), allow_pickle=False)
    return stream.getvalue()


def numpy_npz_dumps(data: Any) -> bytes:
    """``npz``: a dict of arrays as a compressed ``.npz`` with fixed timestamps."""
    if not isinstance(data, Mapping):
        raise TypeError(f"npz needs a dict of arrays, not {type(data).__name__}")
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, array in data.items():
            if not isinstance(name, str):
                raise TypeError(f"npz array names must be str, not {type(name).__name__}")
            info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, _to_numpy(array), allow_pickle=False)
    return stream.getvalue()


def torch_dumps(data: Any) -> bytes:
    """``pth``: ``torch.save`` (torch is imported here, and only here).

    Raises:
        MissingDependencyError: torch is not installed.
    """
    try:
        import torch
    except ImportError as exc:
        raise MissingDependencyError("the 'pth' encoder needs torch", extra="torch") from exc
    stream = io.BytesIO()
    torch.save(data, stream)
    return stream.getvalue()


def tenbin_dumps(x: Any) -> memoryview:
    """``ten``/``tenbin``/``tb``: a list (or tuple) of arrays, or one array, in tenbin format."""
    from wds_cloud.core import tenbin

    arrays = x if isinstance(x, list | tuple) else [x]
    return memoryview(tenbin.encode_buffer([_to_numpy(a) for a in arrays]))


def mp_dumps(x: Any) -> bytes:
    """``msgpack``/``mp``/``msg``: ``msgpack.packb``.

    Raises:
        MissingDependencyError: msgpack is not installed.
    """
    try:
        import msgpack
    except ImportError as exc:
        raise MissingDependencyError(
            "the 'msgpack' encoder needs msgpack", extra="encoders"
        ) from exc
    return bytes(msgpack.packb(x))


def cbor_dumps(x: Any) -> bytes:
    """``cbor``: ``cbor2.dumps`` (webdataset uses the older ``cbor`` package; same format).

    Raises:
        MissingDependencyError: cbor2 is not installed.
    """
    try:
        import cbor2
    except ImportError as exc:
        raise MissingDependencyError("the 'cbor' encoder needs cbor2", extra="encoders") from exc
    return bytes(cbor2.dumps(x))


def _image_array(value: Any) -> np.ndarray:
    """An HWC/HW uint8 array from a numpy array or a CHW torch tensor.

    Floats in [0, 1] become ``uint8(x * 255)``, truncated as webdataset does, so both write the
    same bytes.
    """
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
        array = (np.clip(array, 0.0, 1.0) * 255.0).astype(np.uint8)
    elif array.dtype != np.uint8:
        raise TypeError(f"image arrays must be uint8 or float in [0, 1], not {array.dtype}")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)):
        raise ValueError(f"image arrays must be HxW or HxWx{{1,3,4}}, got shape {array.shape}")
    return array


# webdataset's format names -> PIL's (PIL writes the whole netpbm family as "PPM")
_PIL_FORMATS = {
    "JPG": "JPEG",
    "IMG": "PPM",
    "IMAGE": "PPM",
    "PGM": "PPM",
    "PBM": "PPM",
    "TIF": "TIFF",
}


def imageencoder(image: Any, format: str = "PNG") -> bytes:
    """Encode an image with PIL as ``format`` (``"PNG"``, ``"JPEG"``/``"jpg"``, ``"PPM"``, ...).

    Accepts PIL images, numpy arrays (uint8, or float in [0, 1]; HxW or HxWxC) and torch
    tensors (CxHxW, as the webdataset torch decoders produce). JPEG uses quality 100. Same
    bytes as webdataset's ``imageencoder`` for the inputs both accept.

    Raises:
        ValueError: float values outside [0, 1], or a shape that is not an image.
        TypeError: an array that is neither uint8 nor float.
    """
    from PIL import Image

    pil_format = format.upper()
    pil_format = _PIL_FORMATS.get(pil_format, pil_format)
    picture = image if isinstance(image, Image.Image) else Image.fromarray(_image_array(image))
    options: dict[str, Any] = {"quality": 100} if pil_format == "JPEG" else {}
    stream = io.BytesIO()
    picture.save(stream, format=pil_format, **options)
    return stream.getvalue()


def add_handlers(
    d: dict[str, EncodeHandler], keys: str | Iterable[str], value: EncodeHandler
) -> None:
    """Set ``d[k] = value`` for each of ``keys`` (a list, or a space-separated string)."""
    if isinstance(keys, str):
        keys = keys.split()
    for k in keys:
        d[k] = value


def make_handlers() -> dict[str, EncodeHandler]:
    """A fresh extension -> encoder table with every default (extend it and pass it on)."""
    handlers: dict[str, EncodeHandler] = {}
    add_handlers(handlers, "cls cls2 class count index inx id", encode_cls)
    add_handlers(handlers, "txt text transcript html htm", encode_text)
    add_handlers(handlers, "pyd pickle", encode_pickle)
    add_handlers(handlers, "pth", torch_dumps)
    add_handlers(handlers, "npy", numpy_dumps)
    add_handlers(handlers, "npz", numpy_npz_dumps)
    add_handlers(handlers, "ten tenbin tb", tenbin_dumps)
    add_handlers(handlers, "json jsn", encode_json)
    add_handlers(handlers, "msgpack mp msg", mp_dumps)
    add_handlers(handlers, "cbor", cbor_dumps)
    for keys, pil_format in [
        ("jpg jpeg img image", "JPEG"),
        ("png", "PNG"),
        ("ppm pgm pbm", "PPM"),
        ("webp", "WEBP"),
        ("tiff tif", "TIFF"),
    ]:
        add_handlers(handlers, keys, functools.partial(imageencoder, format=pil_format))
    return handlers


default_handlers: dict[str, EncodeHandler] = make_handlers()
"""The table ``encoder=True`` uses, as in webdataset: entries added here apply to every
``TarWriter`` built with the default encoder afterwards. Prefer passing your own table
(``{**make_handlers(), "ext": fn}``) to changing this one."""


def dispatch_extension(field: str) -> tuple[str, bool]:
    """Return (lowercased last extension, gzip?) for a field name like ``"seg.PNG.gz"``."""
    gz = field.lower().endswith(".gz")
    name = field[:-3] if gz else field
    return name.rpartition(".")[2].lower(), gz


def encode_value(
    value: Any, field: str, handlers: Mapping[str, EncodeHandler] | None, *, key: Any = None
) -> Encoded:
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
        data: Encoded = value
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


def encode_based_on_extension(
    sample: dict[str, Any], handlers: Mapping[str, EncodeHandler] | None
) -> dict[str, Any]:
    """Encode every field of ``sample`` with :func:`encode_value` (webdataset's function).

    Fields starting with ``_`` (``__key__``, ...) are kept as they are.

    Raises:
        SampleError: a field cannot be encoded (names the key, the field and the extension).
        MissingDependencyError: an encoder's optional package is missing.
    """
    key = sample.get("__key__")
    return {
        field: value if field.startswith("_") else encode_value(value, field, handlers, key=key)
        for field, value in sample.items()
    }


def make_encoder(spec: bool | Mapping[str, EncodeHandler] | SampleEncoder | None) -> SampleEncoder:
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
        handlers: Mapping[str, EncodeHandler] | None = default_handlers
    elif spec is False or spec is None:
        handlers = None
    elif isinstance(spec, Mapping):
        handlers = {str(k).lower(): v for k, v in spec.items()}
    else:
        raise ConfigError(
            f"encoder must be True, False, a dict or a callable, not {type(spec).__name__}"
        )

    return functools.partial(encode_based_on_extension, handlers=handlers)
