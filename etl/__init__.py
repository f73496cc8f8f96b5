"""AIStore ETL servers for WebDataset shards (one folder per transform, see ``etl/README.md``)."""
