"""Value decoders: the bytes of one tar member -> a Python value, chosen by its extension.

These are webdataset 1.0.2's ``webdataset.autodecode`` functions, with its names
(:func:`unpickle_loads`, :func:`torch_loads`, :func:`npy_loads`, ...); :data:`decoders` maps each
extension to one of them and is the table :data:`wds_cloud.core.decode.basichandlers` reads.
Optional packages (torch, msgpack, cbor2) are imported by the function that needs them, and a
missing one raises :class:`~wds_cloud.errors.MissingDependencyError` naming the extra.

Secure mode (:mod:`wds_cloud.security`) is checked on each call: pickle and ``torch.load`` are
refused with a :class:`~wds_cloud.errors.SampleError` (a ``ValueError``) whose message starts
with webdataset's. Environment, read on each call:

- ``WDS_PYTORCH_WEIGHTS_ONLY=1`` / ``WDS_CLOUD_PYTORCH_WEIGHTS_ONLY=1``: ``torch.load`` with
  ``weights_only=True`` (default ``False``, as in webdataset).
"""

from __future__ import annotations

import io
import json
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np

from wds_cloud.errors import MissingDependencyError, SampleError
from wds_cloud.security import refusal, secure_mode
from wds_cloud.settings import env_bool

Decode = Callable[[bytes], Any]

__all__ = [
    "cbor_loads",
    "decoders",
    "msgpack_loads",
    "npy_loads",
    "npz_loads",
    "tenbin_loads",
    "torch_loads",
    "unpickle_loads",
]


def _flag(*names: str) -> bool:
    """True when any of ``names`` is set to a true boolean (:func:`wds_cloud.settings.env_bool`)."""
    return any(env_bool(name, False) for name in names)


def _text(data: bytes) -> str:
    return data.decode("utf-8")


def _int(data: bytes) -> int:
    return int(data)


def _json(data: bytes) -> Any:
    return json.loads(data)


def unpickle_loads(data: bytes) -> Any:
    """``pkl``/``pickle``/``pyd``: ``pickle.loads``, refused in secure mode.

    Raises:
        SampleError: secure mode is on (a ``ValueError`` with webdataset's message).
    """
    if secure_mode():
        raise SampleError(
            refusal(
                "Unpickling is not allowed for security reasons when enforce_security is set",
                "refusing to unpickle a value (pickle runs code)",
            )
        )
    return pickle.loads(data)


def torch_loads(data: bytes) -> Any:
    """``pth``: ``torch.load`` on the CPU, refused in secure mode.

    ``weights_only`` is ``WDS_PYTORCH_WEIGHTS_ONLY``/``WDS_CLOUD_PYTORCH_WEIGHTS_ONLY`` (read
    on each call; default False, as in webdataset).

    Raises:
        SampleError: secure mode is on (a ``ValueError`` with webdataset's message).
        MissingDependencyError: torch is not installed.
    """
    if secure_mode():
        raise SampleError(
            refusal(
                "torch.loads is not allowed for security reasons when enforce_security is set",
                "refusing torch.load of a value (it unpickles, which runs code)",
            )
        )
    try:
        import torch  # lazily: only .pth values need it
    except ImportError as exc:
        raise MissingDependencyError("decoding 'pth' values needs torch", extra="torch") from exc

    weights_only = _flag("WDS_PYTORCH_WEIGHTS_ONLY", "WDS_CLOUD_PYTORCH_WEIGHTS_ONLY")
    return torch.load(io.BytesIO(data), weights_only=weights_only, map_location="cpu")


def tenbin_loads(data: bytes) -> list[np.ndarray]:
    """``ten``/``tb``: a list of arrays in webdataset's tenbin format."""
    from wds_cloud.core import tenbin

    return tenbin.decode_buffer(data)


def msgpack_loads(data: bytes) -> Any:
    """``mp``/``msg``/``msgpack``: ``msgpack.unpackb``.

    Raises:
        MissingDependencyError: msgpack is not installed.
    """
    try:
        import msgpack
    except ImportError as exc:
        raise MissingDependencyError("decoding msgpack needs msgpack", extra="encoders") from exc
    return msgpack.unpackb(data)


def npy_loads(data: bytes) -> np.ndarray:
    """``npy``: one numpy array (object arrays are refused: no pickle)."""
    return np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)


def npz_loads(data: bytes) -> dict[str, np.ndarray]:
    """``npz``: a dict of numpy arrays (object arrays are refused: no pickle)."""
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return dict(archive)


def cbor_loads(data: bytes) -> Any:
    """``cbor``: ``cbor2.loads`` (webdataset uses the older ``cbor`` package; same format).

    Raises:
        MissingDependencyError: cbor2 is not installed.
    """
    try:
        import cbor2
    except ImportError as exc:
        raise MissingDependencyError("decoding cbor needs cbor2", extra="encoders") from exc
    return cbor2.loads(data)


decoders: dict[str, Decode] = {
    "txt": _text,
    "text": _text,
    "transcript": _text,
    "cls": _int,
    "cls2": _int,
    "index": _int,
    "inx": _int,
    "id": _int,
    "json": _json,
    "jsn": _json,
    "pkl": unpickle_loads,
    "pickle": unpickle_loads,
    "pyd": unpickle_loads,
    "pth": torch_loads,
    "ten": tenbin_loads,
    "tb": tenbin_loads,
    "mp": msgpack_loads,
    "msg": msgpack_loads,
    "msgpack": msgpack_loads,
    "npy": npy_loads,
    "npz": npz_loads,
    "cbor": cbor_loads,
}
"""Extension (last dot-component of the key) -> decoding function used by basichandlers."""
