"""The pipeline inside a real torch DataLoader (worker processes): epochs, splitting, pickling."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")

from torch.utils.data import DataLoader  # noqa: E402

from tests.core.conftest import write_shards  # noqa: E402
from wds_cloud.pytorch import WebDataset, WebLoader  # noqa: E402


def keys(loader) -> list[str]:
    return [s["__key__"] for s in loader]


def test_with_epoch_per_rank_is_exact_across_workers(shards, clean_env):
    ds = WebDataset(shards.pattern, resampled=True).with_epoch(50, per_rank=True)
    assert len(keys(DataLoader(ds, num_workers=3, batch_size=None))) == 50
    # webdataset semantics (default): the count is per worker
    ds = WebDataset(shards.pattern, resampled=True).with_epoch(10)
    assert len(keys(DataLoader(ds, num_workers=3, batch_size=None))) == 30


def test_with_epoch_per_rank_counts_batches(shards, clean_env):
    ds = WebDataset(shards.pattern).to_tuple("cls").batched(4).repeat().with_epoch(7, per_rank=True)
    assert len(list(DataLoader(ds, num_workers=2, batch_size=None))) == 7


def test_set_epoch_reaches_non_persistent_workers(shards, clean_env):
    ds = WebDataset(shards.pattern, shardshuffle=True, seed=3)
    loader = DataLoader(ds, num_workers=2, batch_size=None, persistent_workers=False)
    orders = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        order = keys(loader)
        assert sorted(order) == sorted(shards.keys)
        orders.append(order)
    assert len({tuple(o) for o in orders}) == 3
    ds.set_epoch(1)
    assert keys(loader) == orders[1]
    # without set_epoch the main-process copy never advances: the same order again
    assert keys(loader) == orders[1]


def test_more_workers_than_shards_reads_every_sample_once(tmp_path, clean_env):
    few = write_shards(tmp_path / "few", 2, 3)
    loader = DataLoader(WebDataset(few.pattern), num_workers=3, batch_size=None)
    assert sorted(keys(loader)) == sorted(few.keys)


def test_split_samples_in_loader_covers_each_sample_once(tmp_path, clean_env):
    few = write_shards(tmp_path / "few", 2, 5)
    ds = WebDataset(few.pattern, split_samples=True)
    assert sorted(keys(DataLoader(ds, num_workers=3, batch_size=None))) == sorted(few.keys)


def test_snippet_webloader_rebatch(image_shards, clean_env):
    def preprocess(sample):
        image, meta = sample
        return image, meta["n"]

    url = image_shards.pattern
    dataset = WebDataset(url).shuffle(1000).decode("rgb").to_tuple("png", "json")
    dataset = dataset.map(preprocess).batched(4)
    loader = (
        WebLoader(dataset, num_workers=4, batch_size=None).unbatched().shuffle(1000).batched(12)
    )
    batches = list(loader)
    assert [len(b[1]) for b in batches] == [12, 12]
    assert sorted(int(n) for b in batches for n in b[1]) == list(range(24))


@pytest.mark.slow
def test_spawn_pickles_full_pipeline_with_length(shards, clean_env):
    ds = (
        WebDataset(shards.pattern, shardshuffle=True)
        .decode()
        .to_tuple("txt", "cls")
        .with_epoch(40)
        .with_length(40, silent=True)
    )
    loader = DataLoader(ds, num_workers=1, batch_size=None, multiprocessing_context="spawn")
    assert len(loader) == 40
    assert len(list(loader)) == 40


def test_webloader_set_epoch_forwards_to_dataset(shards, clean_env):
    ds = WebDataset(shards.pattern, shardshuffle=True, seed=2)
    loader = WebLoader(ds, num_workers=2, batch_size=None)
    loader.set_epoch(4)
    assert ds.stage(1).epoch == 4
    ds.set_epoch(4)
    reference = keys(ds)
    loader.set_epoch(4)
    assert sorted(keys(loader)) == sorted(reference)


def _ddp_reader(rank: int, world: int, store_path: str, pattern: str, epoch: int, queue) -> None:
    import torch.distributed as dist

    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    try:
        from wds_cloud.core.shards import node_info, split_by_node

        ds = WebDataset(pattern, shardshuffle=True, seed=8, nodesplitter=split_by_node)
        ds.set_epoch(epoch)
        queue.put((rank, node_info(), keys(ds)))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_rank_from_torch_distributed(shards, clean_env, tmp_path):
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    results = {}
    for epoch in (0, 1):
        queue = ctx.Queue()
        store = str(tmp_path / f"store{epoch}")
        procs = [
            ctx.Process(target=_ddp_reader, args=(r, 2, store, shards.pattern, epoch, queue))
            for r in range(2)
        ]
        for p in procs:
            p.start()
        got = [queue.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
        by_rank = {rank: (info, ks) for rank, info, ks in got}
        assert by_rank[0][0] == (0, 2) and by_rank[1][0] == (1, 2)
        union = by_rank[0][1] + by_rank[1][1]
        assert sorted(union) == sorted(shards.keys)
        results[epoch] = by_rank[0][1]
    assert results[0] != results[1]
