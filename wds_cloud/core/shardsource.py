"""webdataset's ``shardlists.expand_source``: a shard source (a spec, a list, an iterable) as a
list of URLs. Copied ``ResampledShards`` re-implementations import it."""

from __future__ import annotations

from itertools import islice
from typing import Any

from wds_cloud.core.utils import is_iterable
from wds_cloud.urls import expand_urls

__all__ = ["expand_source"]


def expand_source(source: Any, max_urls: int = int(1e9)) -> list[Any]:
    """The URLs of ``source``, as webdataset 1.0.2's ``expand_source`` gives them.

    Args:
        source: a shard spec string (braces, ``::``; expanded by :func:`expand_urls`), a list
            (returned as it is) or any other iterable (its first ``max_urls`` items).
        max_urls: the most items taken from an iterable.

    Raises:
        ValueError: ``source`` is none of these (its type is named).
    """
    if isinstance(source, str):
        return expand_urls(source)
    if isinstance(source, list):
        return source
    if is_iterable(source):
        return list(islice(source, max_urls))
    raise ValueError(f"expand_source: cannot handle a {type(source).__name__} ({source!r})")
