"""AIStore services beyond reading and writing objects (those are :mod:`wds_cloud.openers.ais`):
``dsort`` (shuffle/sort jobs), ``transform`` and ``transform_watch`` (offline ETL) and
``cluster`` (the one job client they share)."""
