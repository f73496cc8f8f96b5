"""``WebDataset``: the webdataset-compatible all-in-one dataset, and ``FluidWrapper``.

Stage order (see ``docs/pipeline.md``)::

    shard list -> seeded per-epoch shard shuffle -> node split -> worker split
               -> tarfile_to_samples -> [sample-level split] -> check_empty

Unlike webdataset 1.0.2 the shard shuffle runs *before* splitting, with the same seed on every
rank, so each epoch the ranks together read every shard exactly once, in a new order.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from wds_cloud.core.extras import ShardTally, check_empty
from wds_cloud.core.fluid import FluidInterface
from wds_cloud.core.handlers import reraise_exception
from wds_cloud.core.join import JoinedShards, join_to_samples
from wds_cloud.core.pipeline import DataPipeline
from wds_cloud.core.shards import (
    ResampledShards,
    ShardShuffle,
    SimpleShardList,
    single_node_only,
    split_by_sample,
    split_by_worker,
)
from wds_cloud.errors import ConfigError
from wds_cloud.listing import resolve_spec
from wds_cloud.openers.cache.shardcache import env_cache_dir
from wds_cloud.settings import default_seed

log = logging.getLogger(__name__)

_logged_no_shuffle = False


class WebDataset(DataPipeline, FluidInterface):
    """Read WebDataset shards as samples, with the fluid methods (``.shuffle().decode()``).

    Args:
        urls: ``"shards-{000..099}.tar"`` (braces, ``::``), a list of URLs, a glob/prefix
            (``"s3://bucket/train/*.tar"``, ``"gs://bucket/train/"``) listed via
            ``wds_cloud.listing``, or a dataset index JSON (``"s3://b/train/index.json"``,
            see ``docs/indexes.md``): its shards, and ``len()`` is its exact sample count; or
            ``wds.join({...}, columns=[...])``: column sets read in lockstep, merged per key
            (``docs/mixing.md``, "Joined sources").
        handler: error policy for opening, reading and grouping.
        resampled: draw shards with replacement forever (per reader, seeded); shard shuffle and
            node/worker splitting are then not applied.
        shardshuffle: ``None``/``False``/``0``: shards in order; ``True`` or an int: a full
            seeded permutation of the shard list, new each epoch, identical on every rank.
        cache_dir: cache remote shards in this directory while streaming them; default
            ``WDS_CLOUD_CACHE_DIR`` or webdataset's ``WDS_CACHE`` (no cache when neither is set).
        cache_size: cache bound in bytes; default ``WDS_CLOUD_CACHE_SIZE`` or ``WDS_CACHE_SIZE``.
        detshuffle: accepted for compatibility: the shard shuffle is always deterministic.
        nodesplitter: how shards are divided among ranks (``split_by_node`` for DDP).
        workersplitter: how a rank's shards are divided among DataLoader workers.
        select_files: keep only tar members for which this returns True.
        rename_files: map member names before grouping.
        empty_check: raise if a reader yields no sample.
        seed: shard-shuffle / resampling seed (``None``: ``$WDS_SEED`` or 0); must be equal on
            every rank.
        registry: opener registry (default: the built-in one).
        split_samples: split at sample level instead of by shard: every reader reads all
            shards and keeps samples ``i % (world * workers) == slot``.
        split_by: ``"shard"`` (default) or ``"sample"`` (same as ``split_samples=True``).
        zero_copy: member data as read-only ``memoryview``s instead of ``bytes`` (no copy), for
            decoders that read from buffers; see docs/pipeline.md, "Zero-copy members".
        mode: ``"resampled"`` is the same as ``resampled=True``.
        repeat, url_to_name, verbose: accepted and ignored, as in webdataset 1.0.2.
        **open_options: passed to the backend opener (e.g. ``etl="name"`` for ``ais://``).

    Raises:
        ConfigError: no shards, bad arguments.
    """

    def __init__(
        self,
        urls: str | Iterable[str],
        handler: Callable[[BaseException], bool] = reraise_exception,
        mode: str | None = None,
        resampled: bool = False,
        repeat: bool = False,
        shardshuffle: bool | int | None = None,
        cache_size: int | None = None,
        cache_dir: str | None = None,
        url_to_name: Any = None,
        detshuffle: bool = False,
        nodesplitter: Callable[..., Any] | None = single_node_only,
        workersplitter: Callable[..., Any] | None = split_by_worker,
        select_files: Callable[[str], bool] | None = None,
        rename_files: Callable[[str], str] | None = None,
        empty_check: bool = True,
        verbose: bool = False,
        seed: int | None = None,
        registry: Any = None,
        split_samples: bool = False,
        split_by: str = "shard",
        zero_copy: bool = False,
        **open_options: Any,
    ) -> None:
        super().__init__()
        from wds_cloud.core.shardopen import tarfile_to_samples

        if isinstance(urls, dict) or (isinstance(urls, str) and urls.endswith((".yaml", ".yml"))):
            raise ConfigError(
                f"WebDataset({urls!r}): YAML dataset specifications are not supported; "
                "pass shard URLs, a brace pattern, a glob, a prefix or a dataset index JSON"
            )
        joined = urls if isinstance(urls, JoinedShards) else None  # wds.join(...): rows of shards
        if joined is not None and (
            resampled or mode == "resampled" or split_samples or split_by != "shard"
        ):
            raise ConfigError(
                "WebDataset(wds.join(...)): resampled and split_samples do not apply to joined "
                "sets; their rows are shuffled and split among readers as shards"
            )
        if isinstance(urls, str):  # a list is taken as given (ResampledShards cuts an endless one)
            started = time.perf_counter()
            resolved = resolve_spec(urls, registry=registry)
            self.listing_seconds = time.perf_counter() - started  # read by profiling
            urls = resolved.urls  # resolved once: the shard list takes this list as given
            if resolved.index is not None:  # a wids dataset index: its exact length
                self.index_samples = resolved.index.nsamples
                self.with_length(resolved.index.nsamples, silent=True)
        if split_by not in ("shard", "sample"):
            raise ConfigError(f"split_by must be 'shard' or 'sample', got {split_by!r}")
        resampled = resampled or mode == "resampled"
        if cache_dir is None:  # as in webdataset, the environment can switch caching on
            cache_dir = env_cache_dir()
        self.split_samples = split_samples or split_by == "sample"
        self.seed = default_seed() if seed is None else int(seed)
        if resampled:
            if shardshuffle not in (None, False, 0):
                log.warning("WebDataset(shardshuffle=...) is ignored for resampled datasets")
            self.append(
                ResampledShards(urls, seed=self.seed, deterministic=True, registry=registry)
            )
        else:
            self.append(joined if joined is not None else SimpleShardList(urls, registry=registry))
            if shardshuffle is None:
                global _logged_no_shuffle
                if not _logged_no_shuffle:
                    _logged_no_shuffle = True
                    log.info("WebDataset: shardshuffle not set; shards are read in order")
            elif shardshuffle is True or (shardshuffle is not False and int(shardshuffle) > 0):
                self.append(ShardShuffle(seed=self.seed))
            if not self.split_samples:
                if nodesplitter is not None:
                    self.append(nodesplitter)
                if workersplitter is not None:
                    self.append(workersplitter)
        tally = ShardTally()
        self.append(tally)
        if joined is not None:
            self.append(
                join_to_samples(
                    handler=handler,
                    clash=joined.clash,
                    window=joined.window,
                    registry=registry,
                    cache_dir=cache_dir,
                    cache_size=cache_size,
                    **open_options,
                )
            )
        else:
            self.append(
                tarfile_to_samples(
                    handler=handler,
                    select_files=select_files,
                    rename_files=rename_files,
                    registry=registry,
                    cache_dir=cache_dir,
                    cache_size=cache_size,
                    local_paths=True,
                    **(
                        {"zero_copy": True} if zero_copy else {}
                    ),  # the stage's kw stay webdataset's
                    **open_options,
                )
            )
        if self.split_samples and not resampled:
            self.append(split_by_sample)
        if empty_check:
            self.append(functools.partial(check_empty, tally=tally))


class FluidWrapper(DataPipeline, FluidInterface):
    """Give any iterable (a dataset, a DataLoader) the fluid methods."""

    def __init__(self, initial: Any) -> None:
        super().__init__()
        self.pipeline = [initial]  # a list is the source itself, not a list of stages
