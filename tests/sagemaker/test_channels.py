"""File/FastFile channels: listing, host splitting, ShardedByS3Key, WebDataset reading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import wds_cloud as wds
from wds_cloud.errors import ConfigError
from wds_cloud.sagemaker import SageMakerEnv, channel_shards, sagemaker_dataset

from .conftest import FakeOptML, sample_keys, write_shards


def _env(
    optml: FakeOptML, hosts: list[str] | None = None, current: str | None = None
) -> SageMakerEnv:
    optml.write_config(hosts=hosts, current=current)
    return SageMakerEnv(root=str(optml.root), environ={})


@pytest.mark.parametrize("mode", ["File", "FastFile"])
def test_file_modes_list_sorted_recursive_filtered(
    optml: FakeOptML, mode: str, clean_env: dict[str, str]
) -> None:
    train = optml.add_channel("train", mode)
    write_shards(train / "b", 2, 3, prefix="b")
    write_shards(train / "a", 2, 3, prefix="a")
    (train / "a" / "README.txt").write_text("not a shard")
    (train / "c.tgz").write_bytes(b"")
    source = channel_shards("train", env=_env(optml))
    rel = [str(Path(u).relative_to(train)) for u in source.urls]
    assert rel == ["a/a-000.tar", "a/a-001.tar", "b/b-000.tar", "b/b-001.tar", "c.tgz"]
    assert (source.mode, source.rank, source.world_size) == (mode, 0, 1)
    assert list(source) == source.urls


@pytest.mark.parametrize("mode", ["File", "FastFile"])
def test_dataset_reads_every_sample_once(
    optml: FakeOptML, mode: str, clean_env: dict[str, str]
) -> None:
    write_shards(optml.add_channel("train", mode), 4, 5)
    ds = sagemaker_dataset("train", env=_env(optml))
    assert isinstance(ds, wds.WebDataset)
    assert sorted(s["__key__"] for s in ds) == sample_keys(4, 5)
    # the ChannelSource is also a plain WebDataset source
    source = channel_shards("train", env=_env(optml))
    assert sorted(s["__key__"] for s in wds.WebDataset(source)) == sample_keys(4, 5)


def test_two_hosts_get_disjoint_halves_covering_all(
    optml: FakeOptML, clean_env: dict[str, str]
) -> None:
    write_shards(optml.add_channel("train"), 6, 4)
    keys = []
    for host in ("algo-2", "algo-1"):
        env = _env(optml, hosts=["algo-2", "algo-1"], current=host)
        source = channel_shards("train", env=env)
        assert source.world_size == 2
        assert len(source.urls) == 3
        keys.append({s["__key__"] for s in sagemaker_dataset("train", env=env)})
    assert not keys[0] & keys[1]
    assert sorted(keys[0] | keys[1]) == sample_keys(6, 4)


def test_two_hosts_with_shard_shuffle_still_partition_each_epoch(
    optml: FakeOptML, clean_env: dict[str, str]
) -> None:
    write_shards(optml.add_channel("train"), 8, 2)
    for epoch in (0, 1):
        seen: list[str] = []
        for host in ("algo-1", "algo-2"):
            ds = sagemaker_dataset(
                "train", env=_env(optml, ["algo-1", "algo-2"], host), shardshuffle=True
            )
            ds.set_epoch(epoch)
            seen += [s["__key__"] for s in ds]
        assert sorted(seen) == sample_keys(8, 2)


def test_sharded_by_s3_key_is_not_split_again(optml: FakeOptML, clean_env: dict[str, str]) -> None:
    write_shards(optml.add_channel("train", "File", "ShardedByS3Key"), 3, 2)
    env = _env(optml, hosts=["algo-1", "algo-2"], current="algo-2")
    source = channel_shards("train", env=env)
    assert (source.rank, source.world_size, len(source.urls)) == (0, 1, 3)
    assert sorted(s["__key__"] for s in sagemaker_dataset("train", env=env)) == sample_keys(3, 2)


def test_sharded_by_s3_key_splits_among_local_processes(optml: FakeOptML) -> None:
    write_shards(optml.add_channel("train", "File", "ShardedByS3Key"), 4, 1)
    optml.write_config(hosts=["algo-1", "algo-2"], current="algo-1")
    env = SageMakerEnv(root=str(optml.root), environ={"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    source = channel_shards("train", env=env)
    assert (source.rank, source.world_size) == (1, 2)
    assert [Path(u).name for u in source.urls] == ["shard-001.tar", "shard-003.tar"]


def test_global_rank_overrides_host_split(
    optml: FakeOptML, monkeypatch: pytest.MonkeyPatch, clean_env: dict[str, str]
) -> None:
    write_shards(optml.add_channel("train"), 8, 1)
    env = _env(optml, hosts=["algo-1", "algo-2"], current="algo-2")
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    source = channel_shards("train", env=env)
    assert (source.rank, source.world_size) == (3, 4)
    assert [Path(u).name for u in source.urls] == ["shard-003.tar", "shard-007.tar"]
    explicit = channel_shards("train", env=env, rank=0, world_size=8)
    assert [Path(u).name for u in explicit.urls] == ["shard-000.tar"]


def test_errors_name_channel_and_directory(optml: FakeOptML, clean_env: dict[str, str]) -> None:
    train = optml.add_channel("train")
    train.mkdir()
    (train / "x.txt").write_text("x")
    optml.add_channel("gone")
    env = _env(optml, hosts=["algo-1", "algo-2", "algo-3"], current="algo-1")
    with pytest.raises(ConfigError, match=r"no files ending with .*input/data/train"):
        channel_shards("train", env=env)
    with pytest.raises(ConfigError, match=r"input/data/gone does not exist"):
        channel_shards("gone", env=env)
    write_shards(train, 2, 1)
    with pytest.raises(ConfigError, match=r"2 shard\(s\) .* for 3 readers"):
        channel_shards("train", env=env)
    with pytest.raises(ConfigError, match="rank 5"):
        channel_shards("train", env=env, rank=5, world_size=2)
    with pytest.raises(ConfigError, match="both"):
        channel_shards("train", env=env, rank=0)


def test_default_env_reads_os_environ(
    optml: FakeOptML, monkeypatch: pytest.MonkeyPatch, clean_env: dict[str, str]
) -> None:
    write_shards(optml.add_channel("train"), 2, 2)
    optml.write_config()
    monkeypatch.setenv("WDS_CLOUD_SM_ROOT", str(optml.root))
    monkeypatch.setenv("SM_HOSTS", json.dumps(["algo-1"]))
    assert len(list(sagemaker_dataset("train"))) == 4
