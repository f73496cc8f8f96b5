"""``xdecode``: decode sample members by file-name pattern with stream decoders (webdataset 1.0.2).

Unlike :func:`~wds_cloud.decode`, whose handlers take ``(key, bytes)``, the decoders here take a
binary stream: ``xdecode(png=imageio.imread, cls=lambda s: int(s.read()))``. Patterns are
``fnmatch`` patterns on the member's file name (``"*.txt"``); ``name=f`` keywords stand for
``"*.name"``; the last matching pattern wins. Defaults: ``*.bin`` (bytes), ``*.txt`` (UTF-8
text), ``*.pyd`` (pickle, refused in secure mode, see :mod:`wds_cloud.security`).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from fnmatch import fnmatch
from typing import IO, Any

from wds_cloud.core.curry import pipelinefilter
from wds_cloud.core.stagekind import stage_kind
from wds_cloud.errors import SampleError

__all__ = [
    "decode_bin",
    "decode_pickle",
    "decode_text",
    "default_decoders",
    "find_decoder",
    "xdecode",
]

StreamDecoder = Callable[[IO[bytes]], Any]


def decode_bin(stream: IO[bytes]) -> bytes:
    """The bytes, unchanged."""
    return stream.read()


def decode_text(stream: IO[bytes]) -> str:
    """UTF-8 text."""
    return stream.read().decode("utf-8")


def decode_pickle(stream: IO[bytes]) -> Any:
    """Unpickle the stream's bytes (:func:`~wds_cloud.core.loads.unpickle_loads`: refused in
    secure mode)."""
    from wds_cloud.core.loads import unpickle_loads

    return unpickle_loads(stream.read())


default_decoders: list[tuple[str, StreamDecoder]] = [
    ("*.bin", decode_bin),
    ("*.txt", decode_text),
    ("*.pyd", decode_pickle),
]


def find_decoder(
    decoders: Sequence[tuple[str, StreamDecoder | bool]], path: str
) -> StreamDecoder | bool | None:
    """The decoder of the last pattern matching ``path``'s file name (lower-cased); None if none.

    Metadata (``__key__`` and the like) gets the identity.
    """
    name = path.rsplit("/", 1)[-1]
    if name.startswith("__"):
        return lambda x: x
    lowered = name.lower()
    for pattern, fun in reversed(decoders):
        if fnmatch(lowered, pattern) or fnmatch("." + lowered, pattern):
            return fun
    return None


@stage_kind("stream")
def _xdecode(
    data: Iterable[dict[str, Any]],
    *args: tuple[str, StreamDecoder | bool],
    must_decode: bool = True,
    defaults: Sequence[tuple[str, StreamDecoder | bool]] = tuple(default_decoders),
    **kw: StreamDecoder | bool,
) -> Iterator[dict[str, Any]]:
    """Decode each member with the decoder its name matches (see the module docstring).

    A decoder given as ``False`` keeps the value as it is.

    Raises:
        SampleError: a member matches no decoder and ``must_decode`` (a ``ValueError``, as in
            webdataset); names the member and the sample.
    """
    decoders = [*defaults, *args, *(("*." + k, v) for k, v in kw.items())]
    for sample in data:
        out: dict[str, Any] = {}
        for path, value in sample.items():
            if path.startswith("__"):
                out[path] = value
                continue
            decoder = find_decoder(decoders, path)
            if decoder is False:
                out[path] = value
            elif decoder is None or decoder is True:
                if must_decode:
                    raise SampleError(
                        f"xdecode: no decoder for {path!r}",
                        key=sample.get("__key__"),
                        url=sample.get("__url__"),
                    )
                out[path] = value
            else:
                stream = io.BytesIO(value) if isinstance(value, bytes | bytearray) else value
                out[path] = decoder(stream)
        yield out


xdecode = pipelinefilter(_xdecode)
