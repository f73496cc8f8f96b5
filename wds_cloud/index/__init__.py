"""Shard indexes, exact dataset lengths and random access (``docs/indexes.md``).

- :mod:`~wds_cloud.index.format`: DALI's per-shard ``.idx`` (v1.2), grouped as the reader groups.
- :mod:`~wds_cloud.index.datasetjson`: webdataset's wids dataset JSON (shards + sample counts).
- :mod:`~wds_cloud.index.build`: :func:`build_index` / :func:`check_index` on any backend.
- :mod:`~wds_cloud.index.indexed`: :class:`IndexedWebDataset`, ``ds[i]`` by ranged reads.
- :mod:`~wds_cloud.index.globalorder`: :class:`GlobalOrder` / :class:`GlobalBatchSampler`, a
  global shuffle resumed from a cursor (:mod:`~wds_cloud.index.permutation` its permutation).

Nothing here imports torch; ``wds_cloud.IndexedWebDataset`` is the torch ``Dataset`` version.
"""

from __future__ import annotations

from wds_cloud.index.build import IndexBuild, build_index
from wds_cloud.index.check import IndexCheck, check_index
from wds_cloud.index.datasetjson import DatasetIndex, ShardInfo, load_dataset_json
from wds_cloud.index.format import ShardIndex, idx_url
from wds_cloud.index.globalorder import GlobalBatchSampler, GlobalOrder
from wds_cloud.index.indexed import IndexedWebDataset

__all__ = [
    "DatasetIndex",
    "GlobalBatchSampler",
    "GlobalOrder",
    "IndexBuild",
    "IndexCheck",
    "IndexedWebDataset",
    "ShardIndex",
    "ShardInfo",
    "build_index",
    "check_index",
    "idx_url",
    "load_dataset_json",
]
