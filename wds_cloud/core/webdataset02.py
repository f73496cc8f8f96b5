"""webdataset 0.2.x names that code pinned to ``webdataset<=0.2.86`` imports.

open_clip's ``data.py`` and the many training modules copied from it pin ``webdataset<=0.2.86``;
some also import ``webdataset.cache.cached_url_opener`` (gone in 1.0.2). Through
:func:`wds_cloud.alias_webdataset` these names resolve here:

* :func:`tar_file_expander` is 0.2.86's: no end-of-shard marker. webdataset 1.0.2 yields ``{}``
  after each shard, and the grouping function such modules re-implement
  (``group_by_keys_nothrow``) reads ``filesample["fname"]`` from it and fails with a
  ``KeyError`` at the end of the first shard: the reason they pin 0.2.86. wds_cloud's own
  ``wds.tar_file_expander`` keeps 1.0.2's marker (``eof_value=``).
* :func:`cached_url_opener`, :func:`get_file_cached`, :func:`cached_tarfile_samples` and
  :data:`cached_tarfile_to_samples` behave as 0.2.86's: the same cache layout
  (``cache_dir/<the URL's directory, with ':/|;' as '_'>/<file name>``), local files used
  where they are unless ``always``, a shard that fails ``validator`` deleted and reported.
  Downloads go through the opener registry and commit atomically; the URL a failure is
  reported with has its secrets removed.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlparse

from wds_cloud.core import filecache
from wds_cloud.core.curry import pipelinefilter
from wds_cloud.core.filecache import check_tar_format, download, get_filetype, pipe_cleaner
from wds_cloud.core.handlers import Handler, reraise_exception
from wds_cloud.core.samples import group_by_keys
from wds_cloud.core.shardopen import tar_file_expander as _expander
from wds_cloud.openers.cache.lru import LRUCleanup
from wds_cloud.redact import redact_url

__all__ = [
    "cached_tarfile_samples",
    "cached_tarfile_to_samples",
    "cached_url_opener",
    "get_file_cached",
    "tar_file_expander",
]

Sample = dict[str, Any]


def tar_file_expander(
    data: Iterable[Sample],
    handler: Handler = reraise_exception,
    select_files: Callable[[str], bool] | None = None,
    rename_files: Callable[[str], str] | None = None,
    eof_value: Any = None,
) -> Iterator[Sample]:
    """webdataset 0.2.86's ``tar_file_expander``: ``{"fname", "data", "__url__"}`` per member.

    The same as ``wds.tar_file_expander`` but with no end-of-shard marker unless ``eof_value``
    is given (1.0.2 yields ``{}``; code written for 0.2.x cannot read it).
    """
    return _expander(data, handler, select_files, rename_files, eof_value=eof_value)


def get_file_cached(
    spec: str,
    cache_size: float = -1,
    cache_dir: str | None = None,
    url_to_name: Callable[[str], str] = pipe_cleaner,
    verbose: bool = False,
) -> str:
    """The cached copy of ``spec`` (downloaded first if missing), as webdataset 0.2.86 names it.

    Args:
        spec: a URL or ``pipe:`` command, opened through the opener registry.
        cache_size: the cache's bound in bytes (oldest files deleted first, before a download);
            ``-1``: ``default_cache_size``.
        cache_dir: the cache directory; None: ``default_cache_dir``.
        url_to_name: gives the URL whose path names the cached file (default
            :func:`pipe_cleaner`).
        verbose: report downloads on stderr.

    Returns:
        ``cache_dir/<the URL's directory, ':/|;' replaced by '_'>/<its file name>``.
    """
    if cache_size == -1:
        cache_size = float(filecache.default_cache_size)
    if cache_dir is None:
        cache_dir = str(filecache.default_cache_dir)
    dirname, filename = os.path.split(urlparse(url_to_name(spec)).path)
    dirname = re.sub(r"[:/|;]", "_", dirname.lstrip("/"))
    os.makedirs(os.path.join(cache_dir, dirname), exist_ok=True)
    dest = os.path.join(cache_dir, dirname, filename)
    if not os.path.exists(dest):
        if verbose:
            print(f"# downloading {redact_url(spec)} to {dest}", file=sys.stderr)
        LRUCleanup(cache_dir, cache_size, verbose=verbose, interval=None).cleanup()
        download(spec, dest)
    return dest


def _not_a_tar(dest: str, url: str, cached: bool) -> ValueError:
    ftype = get_filetype(dest)
    with open(dest, "rb") as f:
        head = f.read(200)
    if cached:
        os.remove(dest)
    return ValueError(
        f"{dest} ({redact_url(url)}) is not a tar archive, but {ftype.strip()}; "
        f"it starts with {head!r}"
    )


def cached_url_opener(
    data: Iterable[Sample],
    handler: Handler = reraise_exception,
    cache_size: float = -1,
    cache_dir: str | None = None,
    url_to_name: Callable[[str], str] = pipe_cleaner,
    validator: Callable[[str], bool] = check_tar_format,
    verbose: bool = False,
    always: bool = False,
) -> Iterator[Sample]:
    """Stage: download each ``{"url": ...}`` into the cache and add its opened ``stream``.

    Each input dict is yielded with ``stream`` set (its other keys kept). A local file is
    opened where it is unless ``always``. A failure (download, ``validator``, open) goes to
    ``handler`` with the URL (secrets removed) appended to the exception's ``args``, as in
    0.2.86: True continues with the next URL, False stops, raising propagates.

    Args:
        data: dicts with a ``url`` key.
        handler: the error policy.
        cache_size: see :func:`get_file_cached`.
        cache_dir: see :func:`get_file_cached`.
        url_to_name: see :func:`get_file_cached`.
        validator: ``validator(path)`` must accept a file, else a ``ValueError`` naming it is
            raised and a cached copy deleted (default :func:`check_tar_format`; 0.2.86 also
            deletes a local file it was given, wds_cloud never does).
        verbose: report downloads and openings on stderr.
        always: download local files into the cache too.
    """
    for sample in data:
        if not isinstance(sample, dict) or "url" not in sample:
            raise TypeError(f"cached_url_opener: expected a dict with a 'url', got {sample!r}")
        url = sample["url"]
        try:
            cached = always or not os.path.exists(url)
            if cached:
                dest = get_file_cached(url, cache_size, cache_dir, url_to_name, verbose)
            else:
                dest = url
            if verbose:
                print(f"# opening {dest}", file=sys.stderr)
            if not validator(dest):
                raise _not_a_tar(dest, url, cached)
            sample.update(stream=open(dest, "rb"))
        except Exception as exn:
            exn.args = (*exn.args, redact_url(url))
            if handler(exn):
                continue
            return
        yield sample


def cached_tarfile_samples(
    src: Iterable[Sample],
    handler: Handler = reraise_exception,
    cache_size: float = -1,
    cache_dir: str | None = None,
    verbose: bool = False,
    url_to_name: Callable[[str], str] = pipe_cleaner,
    always: bool = False,
    select_files: Callable[[str], bool] | None = None,
    rename_files: Callable[[str], str] | None = None,
) -> Iterator[Sample]:
    """Samples of the shards ``src`` names, each shard read from the cache (0.2.86's)."""
    streams = cached_url_opener(
        src,
        handler=handler,
        cache_size=cache_size,
        cache_dir=cache_dir,
        verbose=verbose,
        url_to_name=url_to_name,
        always=always,
    )
    files = _expander(streams, handler, select_files, rename_files)
    return group_by_keys(files, handler=handler)


cached_tarfile_to_samples = pipelinefilter(cached_tarfile_samples)
