"""Torch datasets and WebLoader in a real DataLoader (fork and spawn workers)."""

from __future__ import annotations

import pickle
from collections import Counter

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset

from tests.pytorch.helpers import key_and_cls, key_npy_cls
from wds_cloud.core import compat
from wds_cloud.pytorch import DataPipeline, FluidWrapper, WebDataset, WebLoader, torch_collate

CONTEXTS = ["fork", pytest.param("spawn", marks=pytest.mark.slow)]  # spawn: ~8 s each


def _dataset(shards: dict[str, object]) -> WebDataset:
    return WebDataset(shards["pattern"], shardshuffle=False).decode()


def test_classes_are_iterable_datasets(shards: dict[str, object]) -> None:
    ds = _dataset(shards)
    assert isinstance(ds, IterableDataset) and isinstance(ds, compat.WebDataset)
    assert isinstance(ds.shuffle(10), WebDataset)  # fluid copies keep the torch class
    assert isinstance(DataPipeline([1, 2]), IterableDataset)
    assert isinstance(FluidWrapper([1]), IterableDataset)


def test_single_process_yields_everything_in_order(shards: dict[str, object]) -> None:
    out = [s["__key__"] for s in _dataset(shards)]
    assert out == shards["keys"]


@pytest.mark.parametrize("context", CONTEXTS)
def test_two_workers_every_sample_once(shards: dict[str, object], context: str) -> None:
    ds = _dataset(shards).map(key_and_cls)
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=context)
    keys = [key for key, _ in loader]
    assert Counter(keys) == Counter(shards["keys"])
    assert len(keys) == len(shards["keys"])


@pytest.mark.parametrize("context", CONTEXTS)
def test_webloader_rebatch_pattern(shards: dict[str, object], context: str) -> None:
    ds = _dataset(shards).map(key_npy_cls).batched(5)
    loader = WebLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=context)
    loader = loader.unbatched().shuffle(1000).batched(12)
    batches = list(loader)
    total = len(shards["keys"])
    assert [len(b[0]) for b in batches] == [12] * (total // 12) + [total % 12]
    keys = [k for b in batches for k in b[0]]
    assert Counter(keys) == Counter(shards["keys"])
    for names, npy, cls in batches:
        assert isinstance(npy, torch.Tensor) and npy.shape == (len(names), 2, 2)
        assert isinstance(cls, torch.Tensor) and cls.dtype == torch.int64
        for name, array, label in zip(names, npy, cls, strict=True):
            index = int(name.rsplit("_", 1)[1])
            assert label.item() == index and bool((array == index).all())


def test_webloader_with_epoch_counts_loader_outputs(shards: dict[str, object]) -> None:
    ds = _dataset(shards).map(key_and_cls).batched(4)
    loader = WebLoader(ds, batch_size=None, num_workers=0).with_epoch(7)
    batches = list(loader)
    assert len(batches) == 7  # 10 batches available, capped at 7 loader outputs
    assert len(list(loader)) == 7
    # 40 samples -> 10 batches of 4; with_epoch(13) restarts the loader to reach 13
    assert len(list(WebLoader(ds, batch_size=None).with_epoch(13))) == 13


def test_webloader_batched_collation_override(shards: dict[str, object]) -> None:
    ds = _dataset(shards).map(key_npy_cls)
    loader = WebLoader(ds, batch_size=None).batched(8, collation_fn=None)
    first = next(iter(loader))
    assert isinstance(first, list) and len(first) == 8
    assert WebLoader(ds, batch_size=None).loader.batch_size is None
    assert torch_collate([(np.zeros(1),), (np.zeros(1),)])[0].shape == (2, 1)


def test_torch_batching_inside_loader(shards: dict[str, object]) -> None:
    ds = _dataset(shards).map(key_npy_cls)
    loader = DataLoader(ds, batch_size=8, num_workers=2, multiprocessing_context="fork")
    sizes = [len(keys) for keys, _, _ in loader]
    assert sum(sizes) == len(shards["keys"])


def test_datasets_pickle_and_iterate_the_same(shards: dict[str, object]) -> None:
    for ds in (
        _dataset(shards).shuffle(5, seed=3).map(key_and_cls),
        DataPipeline(compat.WebDataset(shards["urls"], shardshuffle=False)).decode(),
        FluidWrapper(_dataset(shards)).map(key_and_cls),
    ):
        copy = pickle.loads(pickle.dumps(ds))
        assert type(copy) is type(ds)
        assert [repr(x) for x in copy] == [repr(x) for x in ds]


def test_more_workers_than_shards_yield_every_sample_once(shards: dict[str, object]) -> None:
    ds = WebDataset(shards["urls"][:1], shardshuffle=False).decode().map(key_and_cls)
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork")
    expected = [key_and_cls(s) for s in WebDataset(shards["urls"][:1]).decode()]
    assert [tuple(x) for x in loader] == [tuple(x) for x in expected]
