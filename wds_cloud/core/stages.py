"""Sample-level pipeline stages (webdataset 1.0.2 names and semantics).

Every stage is a generator function curried with :func:`pipelinefilter`, so ``map(f)`` returns a
picklable stage that a pipeline later calls with its source iterator. Stages that can fail take
``handler=``: it returns True to skip the item (the built-in handlers count skips), False to
stop quietly, or raises. Key specifications are parsed once per stage, not per sample.

Batching lives in :mod:`wds_cloud.core.batching`, shuffling in :mod:`wds_cloud.core.shuffle`,
bookkeeping stages (``info``, ``log_keys``, ``associate``, ``check_empty``, ...) in
:mod:`wds_cloud.core.extras`; they are re-exported here.
"""

from __future__ import annotations

import builtins
import fnmatch
import itertools
import operator
import random
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from wds_cloud.core.curry import pipelinefilter
from wds_cloud.core.extras import (
    associate,
    check_empty,
    guess_batchsize,
    info,
    log_keys,
    non_empty,
    repeatedly,
)
from wds_cloud.core.handlers import Handler, handled, reraise_exception
from wds_cloud.core.stagekind import stage_kind
from wds_cloud.errors import ConfigError, SampleError, SampleKeyError

__all__ = [
    "associate",
    "check_empty",
    "extract_keys",
    "getfirst",
    "guess_batchsize",
    "info",
    "log_keys",
    "map",
    "map_dict",
    "map_tuple",
    "non_empty",
    "parse_field_spec",
    "rename",
    "rename_keys",
    "repeatedly",
    "rsample",
    "select",
    "slice",
    "to_tuple",
]


def _where(sample: Any) -> dict[str, Any]:
    if isinstance(sample, dict):
        return {"key": sample.get("__key__"), "url": sample.get("__url__")}
    return {}


def _keys(sample: Any) -> list[str]:
    return list(sample.keys()) if isinstance(sample, dict) else []


def parse_field_spec(fields: str | Iterable[str]) -> list[list[str]]:
    """Parse ``"png;jpg json"`` (or ``["png;jpg", "json"]``) into ``[["png", "jpg"], ["json"]]``."""
    if isinstance(fields, str):
        fields = fields.split()
    return [f.split(";") if isinstance(f, str) else list(f) for f in fields]


def getfirst(
    sample: dict[str, Any],
    keys: str | list[str],
    default: Any = None,
    missing_is_error: bool = True,
) -> Any:
    """Return the value of the first of ``keys`` (a list or ``"a;b"``) present in ``sample``.

    Raises:
        SampleError: none is present and ``missing_is_error``; names the keys and the sample.
    """
    alts = keys.split(";") if isinstance(keys, str) else keys
    for k in alts:
        if k in sample:
            return sample[k]
    if missing_is_error:
        raise SampleError(f"didn't find {alts} in sample keys {_keys(sample)}", **_where(sample))
    return default


@stage_kind("stream", lazy=True)
def _map(
    data: Iterable[Any], f: Callable[[Any], Any], handler: Handler = reraise_exception
) -> Iterator[Any]:
    """Apply ``f`` to every sample; a result of ``None`` drops the sample (as webdataset).

    When both sample and result are dicts, the result's ``__key__`` is set to the sample's.
    """

    def apply(sample: Any) -> Any:
        result = f(sample)
        if isinstance(result, dict) and isinstance(sample, dict):
            result["__key__"] = sample.get("__key__")
        return result

    yield from handled(data, apply, handler, drop_none=True)


@stage_kind("stream", lazy=True)
def _map_dict(
    data: Iterable[Any], handler: Handler = reraise_exception, **kw: Callable[[Any], Any]
) -> Iterator[Any]:
    """Replace ``sample[k]`` by ``f(sample[k])`` for each ``k=f`` (in place, as webdataset).

    Raises:
        SampleKeyError: a named key is missing (through ``handler``); a ``KeyError`` and a
            ``ValueError``, as webdataset raises ``KeyError`` here.
    """
    if not kw:
        raise ConfigError("map_dict: give at least one key=function")
    for key, f in kw.items():
        if not callable(f):
            raise ConfigError(f"map_dict: {key}={f!r} is not callable")
    items = list(kw.items())

    def apply(sample: Any) -> Any:
        for k, f in items:
            try:
                value = sample[k]
            except KeyError:
                raise SampleKeyError(
                    f"map_dict: key {k!r} not in sample keys {_keys(sample)}", **_where(sample)
                ) from None
            sample[k] = f(value)
        return sample

    yield from handled(data, apply, handler)


def _identity(x: Any) -> Any:
    return x


@stage_kind("stream", lazy=True)
def _map_tuple(
    data: Iterable[Any], *fs: Callable[[Any], Any] | None, handler: Handler = reraise_exception
) -> Iterator[Any]:
    """Apply ``fs[i]`` to field ``i`` of tuple samples (``None`` keeps the field)."""
    funcs = [_identity if f is None else f for f in fs]
    for f in funcs:
        if not callable(f):
            raise ConfigError(f"map_tuple: {f!r} is not callable")

    def apply(sample: Any) -> tuple[Any, ...]:
        if not isinstance(sample, (list, tuple)):
            raise SampleError(f"map_tuple: expected a tuple, got {type(sample).__name__}")
        out = list(sample)
        for i in range(builtins.min(len(funcs), len(out))):
            out[i] = funcs[i](out[i])
        return tuple(out)

    yield from handled(data, apply, handler)


@stage_kind("stream", lazy=True)
def _to_tuple(
    data: Iterable[Any],
    *args: str,
    handler: Handler = reraise_exception,
    missing_is_error: bool = True,
    none_is_error: bool | None = None,
) -> Iterator[Any]:
    """Turn dict samples into tuples of the named fields (webdataset ``to_tuple``).

    ``to_tuple("png;jpg json")`` takes the first of png/jpg and json. Missing keys give
    ``None`` when ``missing_is_error=False``; ``none_is_error`` defaults to ``missing_is_error``.

    Raises:
        SampleError: (a ``ValueError``) a key is missing or None, naming it and the sample's
            ``__key__``/``__url__``; passed through ``handler``.
    """
    if none_is_error is None:
        none_is_error = missing_is_error
    if len(args) == 1 and isinstance(args[0], str) and " " in args[0]:
        args = tuple(args[0].split())
    spec = parse_field_spec(args)
    simple = all(len(alts) == 1 for alts in spec)
    names = [alts[0] for alts in spec]
    getter = operator.itemgetter(*names) if names else None
    single = len(names) == 1

    def missing(sample: Any) -> SampleError:
        gone = [";".join(a) for a in spec if not any(k in sample for k in a)]
        return SampleError(
            f"to_tuple: missing {gone} (sample keys {_keys(sample)})", **_where(sample)
        )

    def convert(sample: Any) -> Any:
        if simple and getter is not None:
            try:
                result = getter(sample)
                if single:
                    result = (result,)
            except KeyError:
                if missing_is_error:
                    raise missing(sample) from None
                result = tuple([sample.get(k) for k in names])
        else:
            out = []
            for alts in spec:
                for k in alts:
                    if k in sample:
                        out.append(sample[k])
                        break
                else:
                    if missing_is_error:
                        raise missing(sample)
                    out.append(None)
            result = tuple(out)
        if none_is_error:
            for v in result:
                if v is None:
                    bad = [";".join(a) for a, x in zip(spec, result, strict=True) if x is None]
                    raise SampleError(
                        f"to_tuple: {bad} missing or None (sample keys {_keys(sample)})",
                        **_where(sample),
                    )
        return result

    yield from handled(data, convert, handler)


@stage_kind("stream", lazy=True)
def _select(data: Iterable[Any], predicate: Callable[[Any], Any]) -> Iterator[Any]:
    """Keep the samples for which ``predicate(sample)`` is truthy."""
    for sample in data:
        if predicate(sample):
            yield sample


@stage_kind("stream", lazy=True)
def _rename(
    data: Iterable[Any], handler: Handler = reraise_exception, keep: bool = True, **kw: Any
) -> Iterator[Any]:
    """Rename fields: ``rename(image="png;jpg")``.

    With ``keep=True`` the other fields stay and the source fields are removed; with
    ``keep=False`` only the new fields remain.

    Raises:
        SampleError: none of a new field's sources is present (through ``handler``).
    """
    spec = [(new, old.split(";") if isinstance(old, str) else list(old)) for new, old in kw.items()]
    replaced = {k for _, alts in spec for k in alts}

    def convert(sample: Any) -> dict[str, Any]:
        if keep:
            result = {k: v for k, v in sample.items() if k not in replaced}
        else:
            result = {}
        for new, alts in spec:
            result[new] = getfirst(sample, alts)
        return result

    yield from handled(data, convert, handler)


def _compile_patterns(patterns: str | Iterable[str]) -> re.Pattern[str]:
    alts = patterns.split(";") if isinstance(patterns, str) else list(patterns)
    return re.compile("|".join(fnmatch.translate(p) for p in alts))


@stage_kind("stream", lazy=True)
def _rename_keys(
    data: Iterable[Any],
    *args: tuple[str, str],
    keep_unselected: bool = False,
    must_match: bool = True,
    duplicate_is_error: bool = True,
    handler: Handler = reraise_exception,
    **kw: str,
) -> Iterator[Any]:
    """Rename fields by fnmatch patterns on the lowercased base name of each key.

    ``rename_keys(("image", "*.png"), label="*.cls")``; later rules win. Matching is cached per
    key name, so the per-sample cost is dictionary lookups.

    Raises:
        SampleError: a pattern matched nothing (``must_match``), or two keys map to one name.
    """
    rules = [(new, pattern) for new, pattern in args] + list(kw.items())
    compiled = [(new, pattern, re.compile(fnmatch.translate(pattern))) for new, pattern in rules]
    cache: dict[str, tuple[str, str] | None] = {}

    def lookup(path: str) -> tuple[str, str] | None:
        base = path.rsplit("/", 1)[-1].lower()
        for new, pattern, rx in reversed(compiled):
            if rx.match(base):
                return new, pattern
        return None

    patterns = {p for _, p in rules}

    def convert(sample: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        matched: set[str] = set()
        for path, value in sample.items():
            try:
                hit = cache[path]
            except KeyError:
                hit = cache[path] = lookup(path)
            if hit is None:
                if keep_unselected:
                    out[path] = value
                continue
            new, pattern = hit
            matched.add(pattern)
            if new in out:
                if duplicate_is_error:
                    raise SampleError(
                        f"rename_keys: two keys map to {new!r} (sample keys {_keys(sample)})",
                        **_where(sample),
                    )
                continue
            out[new] = value
        if must_match and len(matched) < len(patterns):
            raise SampleError(
                f"rename_keys: patterns {sorted(patterns - matched)} matched no key of "
                f"{_keys(sample)}",
                **_where(sample),
            )
        return out

    yield from handled(data, convert, handler)


@stage_kind("stream", lazy=True)
def _extract_keys(
    data: Iterable[Any],
    *patterns: str,
    duplicate_is_error: bool = True,
    ignore_missing: bool = False,
    handler: Handler = reraise_exception,
) -> Iterator[Any]:
    """Return a tuple with, per pattern (``"*.png;*.jpg"``), the value of the matching key.

    Resolution is cached per distinct key set.

    Raises:
        SampleError: a pattern matches no key (unless ``ignore_missing``) or several keys
            (``duplicate_is_error``).
    """
    rxs = [_compile_patterns(p) for p in patterns]
    cache: dict[tuple[str, ...], list[str]] = {}

    def resolve(sample: dict[str, Any]) -> list[str]:
        keys = tuple(sample.keys())
        chosen = cache.get(keys)
        if chosen is None:
            chosen = []
            for pattern, rx in zip(patterns, rxs, strict=True):
                matches = [k for k in keys if rx.match("." + k) or rx.match(k)]
                if not matches:
                    if ignore_missing:
                        continue
                    raise SampleError(
                        f"extract_keys: {pattern!r} matches no key of {list(keys)}",
                        **_where(sample),
                    )
                if len(matches) > 1 and duplicate_is_error:
                    raise SampleError(
                        f"extract_keys: {pattern!r} matches several keys {matches}",
                        **_where(sample),
                    )
                chosen.append(matches[0])
            cache[keys] = chosen
        return chosen

    def extract(sample: dict[str, Any]) -> tuple[Any, ...]:
        return tuple([sample[k] for k in resolve(sample)])

    yield from handled(data, extract, handler)


@stage_kind("stream")
def _slice(data: Iterable[Any], *args: int | None) -> Iterator[Any]:
    """``itertools.islice(data, *args)``."""
    return itertools.islice(data, *args)


@stage_kind("stream")
def _rsample(
    data: Iterable[Any], p: float = 0.5, seed: Any = None, rng: random.Random | None = None
) -> Iterator[Any]:
    """Keep each sample with probability ``p`` (seedable, unlike webdataset's global RNG)."""
    if not 0.0 <= p <= 1.0:
        raise ConfigError(f"rsample: p must be in [0, 1], got {p}")
    if rng is None:
        rng = random.Random(seed)
    rand = rng.random
    for sample in data:
        if rand() < p:
            yield sample


map = pipelinefilter(_map)
map_dict = pipelinefilter(_map_dict)
map_tuple = pipelinefilter(_map_tuple)
to_tuple = pipelinefilter(_to_tuple)
select = pipelinefilter(_select)
rename = pipelinefilter(_rename)
rename_keys = pipelinefilter(_rename_keys)
extract_keys = pipelinefilter(_extract_keys)
slice = pipelinefilter(_slice)
rsample = pipelinefilter(_rsample)
