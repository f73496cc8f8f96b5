"""Shard lists, resampling, node/worker splitting and the per-epoch shard shuffle."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import warnings

import pytest

from wds_cloud.core import shards as sh
from wds_cloud.core.pipeline import DataPipeline
from wds_cloud.errors import ConfigError

URLS = [f"s{i}.tar" for i in range(10)]


def set_reader(env: pytest.MonkeyPatch, rank: int, world: int, worker: int, nworkers: int) -> None:
    env.setenv("RANK", str(rank))
    env.setenv("WORLD_SIZE", str(world))
    env.setenv("WORKER", str(worker))
    env.setenv("NUM_WORKERS", str(nworkers))


def urls_of(items) -> list[str]:
    return [d["url"] for d in items]


def test_simple_shard_list(shards):
    lst = sh.SimpleShardList(shards.pattern)
    assert len(lst) == shards.nshards
    assert urls_of(lst) == shards.urls
    assert urls_of(sh.SimpleShardList("a.tar::b-{1..2}.tar")) == ["a.tar", "b-1.tar", "b-2.tar"]
    seeded = urls_of(sh.SimpleShardList(URLS, seed=4))
    assert seeded == urls_of(sh.SimpleShardList(URLS, seed=4))
    assert sorted(seeded) == sorted(URLS) and seeded != URLS
    with pytest.raises(ConfigError):
        sh.SimpleShardList([])


def test_simple_shard_list_glob_and_prefix(shards):
    assert urls_of(sh.SimpleShardList(str(shards.root / "shard-*.tar"))) == shards.urls
    assert urls_of(sh.SimpleShardList(str(shards.root) + "/")) == shards.urls


def test_worker_info_env_and_defaults(clean_env):
    assert sh.worker_info() == (0, 1, 0, 1)
    set_reader(clean_env, 1, 4, 2, 3)
    assert sh.worker_info() == (1, 4, 2, 3)
    assert sh.worker_seed() == 1002
    clean_env.setenv("RANK", "x")
    with pytest.raises(ConfigError, match="RANK"):
        sh.worker_info()


def test_split_by_node_and_worker(clean_env):
    set_reader(clean_env, 1, 2, 0, 1)
    assert urls_of(sh.split_by_node(iter({"url": u} for u in URLS))) == URLS[1::2]
    set_reader(clean_env, 0, 1, 2, 3)
    assert urls_of(sh.split_by_worker(iter({"url": u} for u in URLS))) == URLS[2::3]
    # node then worker: every shard read by exactly one of the 2 x 2 readers
    seen = []
    for rank in range(2):
        for worker in range(2):
            set_reader(clean_env, rank, 2, worker, 2)
            src = ({"url": u} for u in URLS)
            seen += urls_of(sh.split_by_worker(sh.split_by_node(src)))
    assert sorted(seen) == sorted(URLS)


def test_fewer_shards_than_ranks_is_an_error_naming_the_numbers(clean_env):
    set_reader(clean_env, 0, 2, 0, 4)
    with pytest.raises(ConfigError) as info:
        list(sh.split_by_node(iter({"url": u} for u in URLS[:1])))
    msg = str(info.value)
    assert "1 shard(s)" in msg and "world size 2" in msg and "every rank" in msg
    # 5 shards for 2 ranks x 4 workers: every rank has data, surplus workers are allowed
    assert len(urls_of(sh.split_by_node(iter({"url": u} for u in URLS[:5])))) == 3


def test_surplus_workers_yield_nothing_and_worker_0_warns_once(clean_env):
    seen = []
    for worker in range(4):
        set_reader(clean_env, 0, 1, worker, 4)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            seen.append(list(sh.split_by_worker(iter(URLS[:3]))))
        messages = [str(w.message) for w in caught]
        if worker == 0:
            assert messages == [
                "3 shard(s) for 4 DataLoader workers: workers 3..3 yield nothing; use at most "
                "3 workers or more shards"
            ]
        else:
            assert messages == []
    assert seen == [[URLS[0]], [URLS[1]], [URLS[2]], []]
    # exactly enough shards: no warning, every reader gets one
    set_reader(clean_env, 1, 2, 3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(sh.split_by_worker(sh.split_by_node(iter(URLS[:8]))))) == 1


def test_single_node_only(clean_env):
    assert list(sh.single_node_only(iter(URLS))) == URLS
    set_reader(clean_env, 1, 2, 0, 1)
    with pytest.raises(ConfigError, match=r"world size is 2.*split_by_node"):
        list(sh.single_node_only(iter(URLS)))


def test_resampled_shards_deterministic_and_per_epoch(clean_env):
    r = sh.ResampledShards(URLS, nshards=20, seed=7, deterministic=True)
    e0, e1 = urls_of(r), urls_of(r)
    assert len(e0) == 20 and set(e0) <= set(URLS) and e0 != e1
    again = sh.ResampledShards(URLS, nshards=20, seed=7, deterministic=True)
    again.set_epoch(1)
    assert urls_of(again) == e1
    set_reader(clean_env, 0, 1, 1, 2)  # another worker draws another stream
    assert urls_of(sh.ResampledShards(URLS, nshards=20, seed=7, deterministic=True)) != e0
    nondet = [urls_of(sh.ResampledShards(URLS, nshards=30)) for _ in range(2)]
    assert nondet[0] != nondet[1]
    with pytest.raises(ConfigError):
        sh.ResampledShards([], empty_check=True)


_CHILD = """
import json, sys
from wds_cloud.core.shards import ResampledShards, ShardShuffle
r = ResampledShards([f"s{i}.tar" for i in range(50)], nshards=40, seed=11, deterministic=True)
r.set_epoch(3)
order = list(ShardShuffle(seed=5, epoch=2).run(iter(range(30))))
print(json.dumps([[d["url"] for d in r], order]))
"""


def test_seeds_independent_of_pythonhashseed(clean_env):
    outs = []
    for hashseed in ("1", "98765"):
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
        env["PYTHONHASHSEED"] = hashseed
        res = subprocess.run(
            [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True
        )
        outs.append(json.loads(res.stdout))
    assert outs[0] == outs[1]
    assert len(set(outs[0][0])) > 10


def test_shard_shuffle_changes_per_epoch_and_set_epoch():
    stage = sh.ShardShuffle(seed=3)
    orders = [list(stage.run(iter(URLS))) for _ in range(3)]
    assert all(sorted(o) == URLS for o in orders)
    assert len({tuple(o) for o in orders}) == 3
    fresh = sh.shuffle_shards(seed=3)
    fresh.set_epoch(2)
    assert list(fresh.run(iter(URLS))) == orders[2]
    assert stage.epoch == 3 and fresh.epoch == 3


def test_shard_shuffle_buffered_variant_is_a_permutation():
    out = list(sh.ShardShuffle(seed=1, bufsize=4).run(iter(range(30))))
    assert sorted(out) == list(range(30)) and out != list(range(30))


def _pipeline() -> DataPipeline:
    return DataPipeline(
        sh.SimpleShardList(URLS), sh.ShardShuffle(seed=9), sh.split_by_node, sh.split_by_worker
    )


def test_shard_shuffle_before_split_union_is_permutation_each_epoch(clean_env):
    per_epoch = []
    for epoch in range(3):
        seen: dict[tuple[int, int], list[str]] = {}
        for rank in range(2):
            for worker in range(2):
                set_reader(clean_env, rank, 2, worker, 2)
                ds = _pipeline()
                ds.set_epoch(epoch)
                # what reaches a DataLoader worker is a pickled copy
                seen[rank, worker] = urls_of(pickle.loads(pickle.dumps(ds)))
        everything = [u for part in seen.values() for u in part]
        assert sorted(everything) == sorted(URLS)
        per_epoch.append(seen)
    # each reader's subset changes across epochs (not just its order)
    assert {tuple(per_epoch[e][0, 0]) for e in range(3)} != {tuple(per_epoch[0][0, 0])}
    assert len({frozenset(per_epoch[e][1, 1]) for e in range(3)}) > 1


def test_shard_shuffle_epoch_advances_per_iteration(clean_env):
    ds = _pipeline()
    first, second = urls_of(ds), urls_of(ds)
    assert sorted(first) == sorted(second) == URLS and first != second
    ds.set_epoch(0)
    assert urls_of(ds) == first


def test_split_by_sample_covers_every_sample_once(clean_env):
    got = []
    for rank in range(2):
        for worker in range(3):
            set_reader(clean_env, rank, 2, worker, 3)
            got.append(list(sh.split_by_sample(iter(range(20)))))
    flat = sorted(x for part in got for x in part)
    assert flat == list(range(20))
    assert got[0] == [0, 6, 12, 18] and got[5] == [5, 11, 17]
