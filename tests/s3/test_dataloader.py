"""A torch DataLoader with spawned workers reading s3:// shards through the S3 opener."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Opener

pytestmark = [pytest.mark.s3, pytest.mark.slow]


def _key_of(sample: dict[str, Any]) -> tuple[str, str]:
    return sample["__url__"], sample["__key__"]


def test_dataloader_two_spawned_workers(opener: S3Opener, put_shards: Any) -> None:
    """Spawned workers unpickle the opener (no live client) and read with parallel prefetch;
    the plain streaming path under spawn is covered by test_read's process-pool test."""
    torch_data = pytest.importorskip("torch.utils.data")
    from wds_cloud.pytorch import WebDataset

    shards = put_shards(6, 40, payload=50_000)  # ~2 MB each
    registry = OpenerRegistry()
    registry.register("s3", opener, override=True)
    dataset = WebDataset(
        [url for url, _ in shards],
        registry=registry,
        shardshuffle=False,
        prefetch=2,
        prefetch_chunk=1 << 19,
    ).map(_key_of)
    loader = torch_data.DataLoader(
        dataset,
        batch_size=None,
        num_workers=2,
        multiprocessing_context="spawn",
    )
    seen = Counter(tuple(item) for item in loader)
    expected = {(url, key) for url, keys in shards for key in keys}
    assert set(seen) == expected
    assert set(seen.values()) == {1}
