"""``webdataset.filters``' private stage functions whose draws or signature are webdataset's own.

Copied training code (open_clip's ``data.py`` and its many forks) imports ``_shuffle`` and
``_decode`` from ``webdataset.filters`` and calls them directly; :mod:`wds_cloud.webdataset_api`
maps those two names here, so such code gets webdataset 1.0.2's behaviour exactly:

* :func:`_shuffle` draws from ``rng`` as webdataset's does (``rng.randint`` per output, the
  buffer filled two inputs at a time), so a ``random.Random(seed)`` gives the same order as
  under webdataset: the point of open_clip's ``detshuffle2``. wds_cloud's own ``shuffle`` stage
  (:mod:`wds_cloud.core.shuffle`) keeps its faster buffer, which draws differently.
* :func:`_decode` takes the decoder's arguments (image specs, handlers, ``Decoder`` keywords),
  where wds_cloud's internal stage takes a built :class:`~wds_cloud.core.decode.Decoder`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Any

from wds_cloud.core.decode import decode
from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.core.stagekind import stage_kind
from wds_cloud.core.utils import pick

__all__ = ["_decode", "_shuffle"]

_END = object()


@stage_kind("identity")
def _shuffle(
    data: Iterable[Any],
    bufsize: int = 1000,
    initial: int = 100,
    rng: random.Random | None = None,
    seed: Any = None,
    handler: Any = None,
) -> Iterator[Any]:
    """Shuffle with a buffer, drawing from ``rng`` exactly as webdataset 1.0.2's ``_shuffle``.

    Each input is appended with, while the buffer is below ``bufsize``, the input after it;
    once ``initial`` items are buffered, one is picked (``rng.randint``) for each step; at the
    end the rest are picked one by one.

    Args:
        data: the items.
        bufsize: the most items held at once.
        initial: items buffered before the first output (at most ``bufsize``).
        rng: the generator to draw from (not with ``seed``).
        seed: seed of a private ``random.Random``; with neither, one seeded by the OS.
        handler: accepted for compatibility; shuffling cannot fail.

    Raises:
        ValueError: both ``rng`` and ``seed`` are given.
    """
    if seed is not None:
        if rng is not None:
            raise ValueError("_shuffle: pass either rng= or seed=, not both")
        rng = random.Random(seed)
    elif rng is None:
        rng = random.Random()
    initial = min(initial, bufsize)
    source = iter(data)
    buf: list[Any] = []
    for sample in source:
        buf.append(sample)
        if len(buf) < bufsize:
            following = next(source, _END)
            if following is not _END:
                buf.append(following)
        if len(buf) >= initial:
            yield pick(buf, rng)
    while buf:
        yield pick(buf, rng)


@stage_kind("stream")
def _decode(
    data: Iterable[dict[str, Any]],
    *args: Any,
    handler: Handler = reraise_exception,
    **kw: Any,
) -> Iterator[dict[str, Any]]:
    """Decode every sample with a :class:`~wds_cloud.core.decode.Decoder` built from ``args`` (webdataset's ``_decode``).

    Args:
        data: the samples.
        *args: image specs (``"rgb"``, ``"pil"``, ...) and handlers ``f(key, data)``.
        handler: error policy for a sample that fails to decode.
        **kw: the decoder's keywords (``pre``, ``post``, ``only``, ``partial``).

    Raises:
        ConfigError: an unknown image spec or a handler that is not callable.
    """
    yield from decode(*args, handler=handler, **kw)(data)
