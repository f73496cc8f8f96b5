"""Extension-keyed sample decoders, compatible with ``webdataset.autodecode`` (1.0.2).

A decoder handler is any callable ``f(key, data)`` that receives the sample key with a leading
dot (``".jpg"``, ``".seg.png"``) and the raw bytes, and returns ``None`` ("not mine"), a
:class:`Continue` (re-dispatch ``data`` under a new key, which is how ``.gz`` works) or the
decoded value. :class:`Decoder` runs ``pre + handlers + post`` (by default
``[gzfilter] + handlers + [basichandlers]``) over every non-``__`` key of a sample.

Unlike webdataset, the built-in handlers (:data:`basichandlers`, :data:`gzfilter`,
:func:`handle_extension`, :class:`~wds_cloud.core.imagedecode.ImageHandler`) are
:class:`KeyedHandler` objects: whether they apply depends on the key only, so a
:class:`Decoder` works out once per distinct key which function decodes it and afterwards
dispatches with one dict lookup (no per-sample regex, no per-call import). The handler types
live in :mod:`wds_cloud.core.decodehandlers` (the image, video and audio handlers build on its
base without importing this module) and are re-exported here.

Every name of ``webdataset.autodecode`` is here: the per-format functions
(:func:`~wds_cloud.core.loads.unpickle_loads`, ``torch_loads``, ``npy_loads``, ... and the
:data:`decoders` table, defined in :mod:`wds_cloud.core.loads`), the image handler (from
:mod:`wds_cloud.core.imagedecode`) and the video and audio handlers ``torch_video`` and
``torch_audio`` (from :mod:`wds_cloud.core.avdecode`), imported on first use.
Secure mode (:mod:`wds_cloud.security`) refuses ``pkl``/``pickle``/``pyd`` and ``pth`` values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from wds_cloud.core.curry import FilterFunction
from wds_cloud.core.decodehandlers import (
    Continue,
    DecodingError,
    KeyedHandler,
    basichandlers,
    call_extension_handler,
    gzfilter,
    handle_extension,
)
from wds_cloud.core.handlers import Handler, handled, reraise_exception
from wds_cloud.core.loads import (
    cbor_loads,
    decoders,
    msgpack_loads,
    npy_loads,
    npz_loads,
    tenbin_loads,
    torch_loads,
    unpickle_loads,
)
from wds_cloud.core.stagekind import stage_kind
from wds_cloud.errors import ConfigError

__all__ = [
    "Continue",
    "Decoder",
    "DecodingError",
    "KeyedHandler",
    "basichandlers",
    "call_extension_handler",
    "cbor_loads",
    "decode",
    "decoders",
    "default_decoder",
    "default_post_handlers",
    "default_pre_handlers",
    "gzfilter",
    "handle_extension",
    "msgpack_loads",
    "npy_loads",
    "npz_loads",
    "tenbin_loads",
    "torch_loads",
    "unpickle_loads",
]


default_pre_handlers: list[Any] = [gzfilter]
"""What :class:`Decoder` runs before its handlers when ``pre`` is None (read at construction)."""
default_post_handlers: list[Any] = [basichandlers]
"""What :class:`Decoder` runs after its handlers when ``post`` is None (read at construction)."""


class _Generic:
    """A plain handler ``f(key, data)`` in a decoding plan."""

    __slots__ = ("f",)

    def __init__(self, f: Callable[[str, bytes], Any]) -> None:
        self.f = f


Plan = tuple[tuple[int, Any], ...]
_MAX_PLANS = 4096


def _raw(v: Any) -> bool:
    return isinstance(v, bytes | bytearray | memoryview)


class Decoder:
    """Decode samples with a chain of handlers (``pre + handlers + post``).

    Args:
        handlers: the main handlers (callables ``f(key, data)``).
        pre: handlers run first; default :data:`default_pre_handlers` (``[gzfilter]``).
        post: handlers run last; default :data:`default_post_handlers` (``[basichandlers]``).
        only: decode only these exact keys (a list or a space-separated string); other keys
            pass through unchanged.
        partial: leave values that are not bytes as they are (otherwise such a value is an
            error: the sample was probably decoded twice).

    Raises:
        ConfigError: a handler is not callable.
    """

    def __init__(
        self,
        handlers: list[Any],
        pre: list[Any] | None = None,
        post: list[Any] | None = None,
        only: str | Iterable[str] | None = None,
        partial: bool = False,
    ) -> None:
        if callable(handlers) and not isinstance(handlers, list | tuple):
            handlers = [handlers]  # Decoder(handle_extension(...)): one handler
        if not isinstance(handlers, list | tuple):
            raise ConfigError(f"Decoder handlers must be a list, got {type(handlers).__name__}")
        if isinstance(only, str):
            only = only.split()
        self.only = None if only is None else set(only)
        pre = list(default_pre_handlers if pre is None else pre)
        post = list(default_post_handlers if post is None else post)
        self.handlers = pre + list(handlers) + post
        for h in self.handlers:
            if not callable(h):
                raise ConfigError(f"decoder handler {h!r} is not callable")
        self.partial = partial
        self._plans: dict[str, Plan] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_plans"] = {}
        return state

    def _plan(self, key: str) -> Plan:
        """The (index, step) pairs that may decode ``key`` (leading dot), cached per key."""
        plan = self._plans.get(key)
        if plan is None:
            steps: list[tuple[int, Any]] = []
            for i, h in enumerate(self.handlers):
                if isinstance(h, KeyedHandler) and type(h).__call__ is KeyedHandler.__call__:
                    fn = h.resolve(key)
                    if fn is not None:
                        steps.append((i, fn))
                else:
                    steps.append((i, _Generic(h)))
            plan = tuple(steps)
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def decode1(self, key: str, data: bytes) -> Any:
        """Decode one value stored under ``key`` (without the leading dot)."""
        key = "." + key
        after = -1
        plan = self._plan(key)
        while True:
            for i, step in plan:
                if i <= after:
                    continue
                if type(step) is _Generic:
                    result = step.f(key, data)
                    if result is None:
                        continue
                else:
                    result = step(data)
                if type(result) is Continue:
                    key, data, after = result.key, result.data, i
                    plan = self._plan(key)
                    break
                return result
            else:
                return data

    def decode(self, sample: dict[str, Any]) -> dict[str, Any]:
        """Decode a whole sample; returns a new dict.

        Raises:
            DecodingError: a value could not be decoded (names url, key, field and cause).
        """
        if not isinstance(sample, dict):
            raise DecodingError(f"decode expects dict samples, got {type(sample).__name__}")
        result = {}
        only = self.only
        for k, v in sample.items():
            if k[:2] == "__":
                if type(v) is bytes:
                    try:
                        v = v.decode("utf-8")
                    except UnicodeDecodeError:
                        pass  # kept as bytes, exactly as given
                result[k] = v
                continue
            if only is not None and k not in only:
                result[k] = v
                continue
            try:
                if type(v) is not bytes:
                    if not _raw(v):
                        if self.partial:
                            result[k] = v
                            continue
                        raise TypeError(
                            f"value is {type(v).__name__}, not bytes (already decoded? "
                            "use partial=True to decode only bytes values)"
                        )
                    v = bytes(v)
                result[k] = self.decode1(k, v)
            except Exception as exn:
                raise field_error(
                    exn, sample.get("__url__"), sample.get("__key__"), k, sample
                ) from exn
        return result

    def __call__(self, sample: Any) -> Any:
        """Decode one sample dict, or, given a dataset or iterable of samples, decode each.

        ``Decoder(...)(dataset)`` returns ``dataset.map(decoder)`` for fluid datasets and a
        generator otherwise, so both ``ds.map(Decoder(...))`` and ``Decoder(...)(ds)`` work.
        """
        if isinstance(sample, dict):
            return self.decode(sample)
        if callable(getattr(sample, "map", None)) and hasattr(sample, "compose"):
            return sample.map(self)
        if hasattr(sample, "__iter__"):
            return (self.decode(s) for s in sample)
        return self.decode(sample)  # raises DecodingError naming the type


def field_error(
    exn: Exception, url: Any, key: Any, k: str, sample: dict[str, Any] | None = None
) -> DecodingError:
    """The error of field ``k`` of the sample ``key`` of ``url`` that failed to decode."""
    return DecodingError(
        f"cannot decode field {k!r}: {type(exn).__name__}: {exn}",
        url=None if url is None else str(url),
        key=None if key is None else str(key),
        k=k,
        sample=sample,
    )


default_decoder = Decoder([])
"""A :class:`Decoder` with only the default pre and post handlers (webdataset's)."""


def _as_handler(x: Any) -> Any:
    if isinstance(x, str):
        from wds_cloud.core.imagedecode import ImageHandler

        return ImageHandler(x)
    return x


@stage_kind("stream")
def _decode(
    data: Iterable[dict[str, Any]], decoder: Decoder, handler: Handler = reraise_exception
) -> Iterator[dict[str, Any]]:
    yield from handled(data, decoder.decode, handler)


def decode(
    *args: Any,
    handler: Handler = reraise_exception,
    pre: list[Any] | None = None,
    post: list[Any] | None = None,
    only: str | Iterable[str] | None = None,
    partial: bool = False,
) -> FilterFunction:
    """Pipeline stage that decodes every sample (webdataset's ``wds.decode``).

    String arguments are image specs (``"rgb"``, ``"torchrgb8"``, ``"pil"``, ...) and become
    :class:`~wds_cloud.core.imagedecode.ImageHandler`; other arguments are handlers.

    Args:
        *args: image specs and handlers ``f(key, data)``.
        handler: error policy for samples that fail to decode.
        pre: see :class:`Decoder`.
        post: see :class:`Decoder`.
        only: see :class:`Decoder`.
        partial: see :class:`Decoder`.

    Raises:
        ConfigError: an unknown image spec or a handler that is not callable.
    """
    handlers = [_as_handler(x) for x in args]
    decoder = Decoder(handlers, pre=pre, post=post, only=only, partial=partial)
    return decode_stage(decoder, handler)


def decode_stage(decoder: Decoder, handler: Handler = reraise_exception) -> FilterFunction:
    """The pipeline stage that decodes every sample with ``decoder`` (what :func:`decode`
    returns for the decoder it builds)."""
    return FilterFunction(_decode, decoder, handler=handler)


# Names that live in modules with heavier imports, resolved on first use.
_LAZY = {
    **dict.fromkeys(
        ("IMAGE_EXTENSIONS", "ImageHandler", "imagehandler", "imagespecs"),
        "wds_cloud.core.imagedecode",
    ),
    **dict.fromkeys(("torch_audio", "torch_video"), "wds_cloud.core.avdecode"),
}


def __getattr__(name: str) -> Any:
    home = _LAZY.get(name)
    if home is not None:
        import importlib

        return getattr(importlib.import_module(home), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
