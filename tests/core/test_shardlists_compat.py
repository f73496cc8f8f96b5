"""webdataset.shardlists' names: SimpleShardList/ResampledShards as webdataset calls them, the
``resampled`` stage, ``shardspec`` and ``MultiShardSample``, compared with webdataset's own."""

from __future__ import annotations

import pickle
import sys
from itertools import islice
from pathlib import Path

import pytest
import webdataset.shardlists as upstream

import wds_cloud
from wds_cloud.core import shards as sh
from wds_cloud.core.multishard import MultiShardSample
from wds_cloud.core.pipeline import DataPipeline
from wds_cloud.core.shardopen import tarfile_to_samples
from wds_cloud.errors import ConfigError
from wds_cloud.webdataset_api import webdataset_module

URLS = [f"http://example.com/file{i}" for i in range(13)]


def urls_of(items) -> list[str]:
    return [d["url"] for d in items]


def test_simple_shard_list_seed_is_positional_and_orders_as_webdataset() -> None:
    for seed in [*range(12), 2**40, 123456789]:
        ours = sh.SimpleShardList(URLS, seed)
        assert ours.seed == seed
        assert urls_of(ours) == urls_of(upstream.SimpleShardList(URLS, seed))
    assert sh.SimpleShardList(URLS).seed is None and urls_of(sh.SimpleShardList(URLS)) == URLS


def test_resampled_shards_takes_webdataset_positional_arguments(clean_env) -> None:
    def one() -> int:
        return 1

    rs = sh.ResampledShards(URLS, 5, 3, one, True, 4, False)
    assert (rs.nshards, rs.seed, rs.worker_seed, rs.deterministic) == (5, 3, one, True)
    assert rs.urls == URLS[:4] and rs.epoch == -1
    assert len(urls_of(rs)) == 5 and set(urls_of(rs)) <= set(URLS[:4])
    assert sh.ResampledShards(URLS).worker_seed is sh.worker_seed
    empty = sh.ResampledShards([], 10, empty_check=False)
    assert urls_of(empty) == []
    with pytest.raises(ConfigError, match="no shards"):
        sh.ResampledShards([])
    endless = (f"u{i}" for i in range(10**9))  # cut at max_urls, never listed in full
    assert sh.ResampledShards(endless, max_urls=7).urls == [f"u{i}" for i in range(7)]


@pytest.mark.parametrize("seed", [0, 1, 7, 2**31 + 5, -3])
@pytest.mark.parametrize("wseed", [0, 1, 1002, 7_000_000])
def test_deterministic_resampled_shards_draw_what_webdataset_draws(clean_env, seed, wseed) -> None:
    ours = sh.ResampledShards(URLS, 40, seed, lambda: wseed, True)
    theirs = upstream.ResampledShards(URLS, 40, seed, lambda: wseed, True)
    for _ in range(3):  # three epochs
        assert urls_of(ours) == urls_of(theirs)
    # default worker seed (rank * 1000 + worker) from the same environment
    clean_env.setenv("RANK", "2")
    clean_env.setenv("WORLD_SIZE", "4")
    clean_env.setenv("WORKER", "1")
    clean_env.setenv("NUM_WORKERS", "3")
    ours = sh.ResampledShards(URLS, 25, seed, deterministic=True)
    theirs = upstream.ResampledShards(URLS, 25, seed, deterministic=True)
    assert urls_of(ours) == urls_of(theirs)


def test_non_integer_seeds_still_give_a_stable_stream(clean_env) -> None:
    draws = [urls_of(sh.ResampledShards(URLS, 30, "run-a", deterministic=True)) for _ in range(2)]
    assert draws[0] == draws[1] and len(set(draws[0])) > 3
    other = urls_of(sh.ResampledShards(URLS, 30, "run-b", deterministic=True))
    assert other != draws[0]


def test_resampled_stage_draws_n_from_its_source_each_pass() -> None:
    pipe = DataPipeline(sh.SimpleShardList(URLS), wds_cloud.resampled(27))
    first, second = urls_of(pipe), urls_of(pipe)
    assert len(first) == len(second) == 27 and set(first) | set(second) <= set(URLS)
    assert first != second  # a fresh seed per pass
    seeded = DataPipeline(sh.SimpleShardList(URLS), sh.resampled(50, seed=4))
    copy = pickle.loads(pickle.dumps(seeded))
    assert urls_of(seeded) == urls_of(copy) == urls_of(seeded)
    assert len(set(urls_of(seeded))) > 5
    endless = sh.resampled()(iter(URLS))
    assert len(list(islice(endless, 1000))) == 1000
    with pytest.raises(ConfigError, match="nothing to draw"):
        list(sh.resampled(3)(iter([])))


def test_resampled_stage_in_a_reading_pipeline(shards) -> None:
    pipe = DataPipeline(sh.SimpleShardList(shards.urls[:3]), sh.resampled(10), tarfile_to_samples())
    samples = list(pipe)
    assert len(samples) == 10 * shards.per_shard
    assert {s["__url__"] for s in samples} <= set(shards.urls[:3])


def test_shardspec(shards, tmp_path: Path) -> None:
    lst = wds_cloud.shardspec(shards.pattern)
    assert isinstance(lst, sh.SimpleShardList) and urls_of(lst) == shards.urls
    both = wds_cloud.shardspec(f"{shards.urls[0]}::{shards.urls[1]}")
    assert urls_of(both) == shards.urls[:2]
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"prefix: {shards.root}/\ndatasets:\n  - shards: shard-{{000..002}}.tar\n")
    multi = wds_cloud.shardspec(str(spec))
    assert isinstance(multi, MultiShardSample)
    assert sorted(urls_of(multi)) == shards.urls[:3]


SPEC = {
    "prefix": "s3://bucket/",
    "datasets": [
        {"name": "web", "buckets": "web", "shards": "web-{000..019}.tar", "choose": 5},
        {"shards": ["books-{00..09}.tar", "extra.tar"], "resample": 12},
        {"buckets": ["code"], "shards": "code-{a..d}.tar"},
    ],
}


def test_multi_shard_sample_draws_what_webdataset_draws(monkeypatch) -> None:
    monkeypatch.setenv("ALLOW_OBSOLETE", "1")  # webdataset refuses to build one otherwise
    ours, theirs = MultiShardSample(SPEC), upstream.MultiShardSample(SPEC)
    assert [(s.name, s.urls, s.perepoch, s.resample) for s in ours.sources] == [
        (s.name, s.urls, s.perepoch, s.resample) for s in theirs.sources
    ]
    for seed in (0, 5, 99):
        ours.set_epoch(seed)
        theirs.set_epoch(seed)
        for _ in range(2):
            assert urls_of(ours) == urls_of(theirs)
    drawn = urls_of(ours)
    assert len(drawn) == 5 + 12 + 4
    assert sum(u.startswith("s3://bucket/web/") for u in drawn) == 5
    assert sum("/code/" in u for u in drawn) == 4


def test_multi_shard_sample_reads_yaml_and_refuses_bad_specs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SHARD_ROOT", "/data")
    spec = tmp_path / "s.yaml"
    spec.write_text("prefix: $SHARD_ROOT/\ndatasets:\n  - shards: [a.tar, 'b-{1..2}.tar']\n")
    assert sorted(urls_of(MultiShardSample(str(spec)))) == [
        "/data/a.tar",
        "/data/b-1.tar",
        "/data/b-2.tar",
    ]
    bad = [
        ({"datasets": [{"shards": "a.tar"}], "extra": 1}, "unknown key"),
        ({"shards": "a.tar"}, "datasets"),
        ({"datasets": [{"name": "x"}]}, "shards"),
        ({"datasets": [{"shards": "a.tar", "choose": 2}]}, "more than its 1"),
        ({"datasets": [{"shards": "{a,b,c}", "choose": 2, "resample": 2}]}, "only one"),
        ({"datasets": [{"shards": "a.tar", "buckets": ["x", "y"]}]}, "one bucket"),
        ({"datasets": [{"shards": 7}]}, "string"),
    ]
    for spec_dict, message in bad:
        with pytest.raises(ConfigError, match=message):
            MultiShardSample(spec_dict)
    spec.write_text("datasets:\n  - shards: [b-{1..2}.tar]\n")  # YAML reads { as a mapping
    with pytest.raises(ConfigError, match="not valid YAML"):
        MultiShardSample(spec)


def test_webdataset_shardlists_module_names() -> None:
    mod = webdataset_module("shardlists")
    assert mod.resampled is sh.resampled and mod.shardspec is sh.shardspec
    assert mod.MultiShardSample is MultiShardSample
    assert mod.DirectoryShardList is wds_cloud.DirectoryShardList
    assert mod.ResampledShards is sh.ResampledShards
    assert mod.ResampledShardList is sh.ResampledShards
    assert callable(mod.check_pid_is_running)
    assert sys.maxsize == sh.ResampledShards(URLS).nshards
