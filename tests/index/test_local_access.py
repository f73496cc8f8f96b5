"""Random access on local shards: DataLoader (fork and spawn), DistributedSampler, missing and
stale indexes, ``WebDataset(index.json)`` lengths and exact per-rank epochs."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

import wds_cloud as wds
from tests.support import indexcheck
from wds_cloud.errors import ShardNotFoundError, ShardReadError
from wds_cloud.index.build import build_index
from wds_cloud.openers.registry import default_registry


@pytest.fixture(scope="module")
def local_shards(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("local-index")
    urls = []
    for name, blob in indexcheck.indexable_archives(40):
        (root / name).write_bytes(blob)
        urls.append(str(root / name))
    return urls


def test_build_check_and_read(local_shards: list[str]) -> None:
    json_url = os.path.join(os.path.dirname(local_shards[0]), "index.json")
    indexcheck.assert_build_check_and_read(local_shards, json_url, default_registry())


@pytest.fixture(scope="module")
def dataset(local_shards: list[str]) -> wds.IndexedWebDataset:
    json_url = os.path.join(os.path.dirname(local_shards[0]), "index.json")
    build_index(local_shards, json=json_url)
    return wds.IndexedWebDataset(json_url)


def test_is_a_map_style_torch_dataset(dataset: wds.IndexedWebDataset) -> None:
    from torch.utils.data import Dataset, IterableDataset

    assert isinstance(dataset, Dataset) and not isinstance(dataset, IterableDataset)


@pytest.mark.parametrize("context", ["fork", pytest.param("spawn", marks=pytest.mark.slow)])
def test_dataloader_workers(dataset: wds.IndexedWebDataset, context: str) -> None:
    indexcheck.assert_dataloader(dataset, context)


def test_distributed_sampler(dataset: wds.IndexedWebDataset) -> None:
    indexcheck.assert_distributed_sampler(dataset)


def test_open_maps_are_bounded(local_shards: list[str]) -> None:
    ds = wds.IndexedWebDataset(local_shards[:10], max_open=3)
    for i in range(len(ds)):
        ds[i]
    assert ds._handles is not None and len(ds._handles._maps) == 3


def test_missing_index_raises_with_the_command_or_is_built(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.support import samplegen

    paths = []
    for seed in range(3):
        path = tmp_path / f"m-{seed}.tar"
        path.write_bytes(samplegen.generate(seed, dali_safe=True).blob)
        paths.append(str(path))
    with pytest.raises(ShardNotFoundError, match=r"wds-cloud index .*build_missing=True"):
        wds.IndexedWebDataset(paths)
    with caplog.at_level(logging.WARNING, logger="wds_cloud"):
        ds = wds.IndexedWebDataset(paths, build_missing=True)
    assert "3 of 3 shards have no index; building them now" in caplog.text
    assert all(os.path.exists(p[:-4] + ".idx") for p in paths)
    assert [ds[i] for i in range(len(ds))] == indexcheck.sequential_samples(
        paths, default_registry()
    )


def test_a_rewritten_shard_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "s.tar"
    with wds.TarWriter(str(path), index=True) as w:
        for i in range(5):
            w.write({"__key__": f"k{i}", "txt": "x" * 600})
    ds = wds.IndexedWebDataset([str(path)])
    with wds.TarWriter(str(path)) as w:  # rewritten with other sizes, the index kept
        for i in range(5):
            w.write({"__key__": f"k{i}", "txt": "y" * 2000})
    with pytest.raises(ShardReadError, match="index does not match the shard"):
        for i in range(len(ds)):
            ds[i]


def test_json_count_disagreeing_with_an_index_is_refused(tmp_path: Path) -> None:
    with wds.ShardWriter(str(tmp_path / "s-%02d.tar"), maxcount=4, index=True) as sink:
        for i in range(6):
            sink.write({"__key__": f"k{i}", "txt": "1"})
    doc = json.loads((tmp_path / "index.json").read_text())
    doc["shardlist"][1]["nsamples"] = 3
    (tmp_path / "index.json").write_text(json.dumps(doc))
    with pytest.raises(ShardReadError, match="JSON says 3 samples"):
        wds.IndexedWebDataset(str(tmp_path / "index.json"))


def test_compressed_shards_are_refused(tmp_path: Path) -> None:
    with wds.ShardWriter(str(tmp_path / "s-%02d.tar.gz"), index=True) as sink:
        sink.write({"__key__": "a", "txt": "1"})
    assert len(wds.WebDataset(str(tmp_path / "index.json"))) == 1  # streaming works
    with pytest.raises(wds.ConfigError, match="compressed"):
        wds.IndexedWebDataset(str(tmp_path / "index.json"))


def _keys(ds: object) -> list[str]:
    return [s["__key__"] for s in ds]  # type: ignore[attr-defined]


def test_webdataset_from_an_index_json(local_shards: list[str], dataset: object) -> None:
    json_url = os.path.join(os.path.dirname(local_shards[0]), "index.json")
    total = len(dataset)  # type: ignore[arg-type]
    ds = wds.WebDataset(json_url, shardshuffle=False)
    assert len(ds) == total == ds.index_samples
    assert len(_keys(ds)) == total
    assert wds.SimpleShardList(json_url).urls == local_shards


@pytest.mark.parametrize("world", [1, 2, 3])
def test_per_rank_epochs_are_exact(
    local_shards: list[str], monkeypatch: pytest.MonkeyPatch, world: int
) -> None:
    """``with_epoch(per_rank=True)`` without a count: every rank yields total // world samples
    per epoch, through a DataLoader with 2 workers, with any shard split."""
    from torch.utils.data import DataLoader

    json_url = os.path.join(os.path.dirname(local_shards[0]), "index.json")
    build_index(local_shards, json=json_url)
    total = wds.WebDataset(json_url).index_samples
    for rank in range(world):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        ds = (
            wds.WebDataset(json_url, shardshuffle=True, nodesplitter=wds.split_by_node)
            .with_epoch(per_rank=True)
            .map(lambda s: s["__key__"])
        )
        loader = DataLoader(ds, batch_size=None, num_workers=2)
        assert len(list(loader)) == total // world
