"""Resume and determinism with DataLoader workers (WebLoader, make_loader)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.resume.helpers import assert_exactly_once, run_interrupted, write_shards

pytestmark = pytest.mark.slow


def _keys(batch: Any) -> list[str]:
    return [t[0].decode() for t in batch]


def _slow_worker_1(sample: Any) -> Any:
    import torch.utils.data

    info = torch.utils.data.get_worker_info()
    if info is not None and info.id == 1:
        time.sleep(0.01)
    return sample


def _loader(urls: list[str], slow: bool = False) -> Any:
    ds = wds.WebDataset(urls, shardshuffle=True, seed=17).shuffle(10)
    if slow:
        ds = ds.map(_slow_worker_1)
    ds = ds.to_tuple("txt", "cls").batched(4)
    return (
        wds.WebLoader(ds, num_workers=2, batch_size=None)
        .unbatched()
        .shuffle(20)
        .batched(8, collation_fn=list)
    )


def test_webloader_exactly_once(tmp_path: Path) -> None:
    urls, keys = write_shards(tmp_path, 8, 30)
    delivered, states = run_interrupted(lambda: _loader(urls), [5, 9, 11], _keys)
    assert_exactly_once(delivered, keys)
    assert all(s["generation"] == i for i, s in enumerate(states))


def test_same_sequence_and_slow_worker(tmp_path: Path) -> None:
    urls, _ = write_shards(tmp_path, 8, 30)

    def run(slow: bool) -> list[str]:
        return [k for batch in _loader(urls, slow) for k in _keys(batch)]

    first = run(False)
    assert first == run(False)
    assert first == run(True)


def test_make_loader_exactly_once(tmp_path: Path) -> None:
    urls, keys = write_shards(tmp_path, 8, 30)

    def make() -> Any:
        return wds.make_loader(
            urls,
            batch_size=8,
            num_workers=2,
            shuffle_buffer=20,
            seed=17,
            to_tuple=("txt", "cls"),
            collate=list,
        )

    delivered, _ = run_interrupted(make, [7, 3, 12], _keys)
    assert_exactly_once(delivered, keys)
