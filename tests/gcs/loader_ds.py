"""A minimal torch IterableDataset over gs:// shards, importable by spawned DataLoader workers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch.utils.data

from wds_cloud.core.samples import tar_samples
from wds_cloud.openers.gcs.opener import GcsOpener


class GcsShards(torch.utils.data.IterableDataset):
    """Yields ``(worker id, pid, key, payload length)`` for each sample of its share of shards."""

    def __init__(self, opener: GcsOpener, urls: list[str]) -> None:
        self.opener = opener
        self.urls = urls

    def __iter__(self) -> Iterator[Any]:
        import os

        info = torch.utils.data.get_worker_info()
        wid, n = (info.id, info.num_workers) if info is not None else (0, 1)
        for url in self.urls[wid::n]:
            with self.opener.open(url) as stream:
                for sample in tar_samples(stream, url):
                    yield wid, os.getpid(), sample["__key__"], len(sample["bin"])
