"""Writing shards: TarWriter, ShardWriter, uploads."""
