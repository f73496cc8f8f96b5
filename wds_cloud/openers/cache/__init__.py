"""The local shard cache: ``shardcache`` (cache names, publishing, :class:`ShardCache`) and
``lru`` (size-bounded eviction)."""

from wds_cloud.openers.cache.shardcache import (
    ShardCache,
    cache_name,
    env_cache_dir,
    env_cache_size,
    publish,
)

__all__ = ["ShardCache", "cache_name", "env_cache_dir", "env_cache_size", "publish"]
