"""Indexes and random access on AIStore (the emulator and the real cluster, through the real
``aistore`` SDK): build, check, read, loaders, one ranged GET per sample (seen by the emulator)."""

from __future__ import annotations

from typing import Any

import pytest

import wds_cloud as wds
from tests.ais.backends import AisBackend
from tests.support import indexcheck
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.ais


@pytest.fixture(scope="module")
def bucket(ais_module_backend: AisBackend) -> str:
    return ais_module_backend.create_bucket("index-tests")


@pytest.fixture(scope="module")
def uploaded(ais_module_backend: AisBackend, bucket: str) -> tuple[list[str], str]:
    urls = []
    for name, blob in indexcheck.indexable_archives(40):
        ais_module_backend.put_object(bucket, f"train/{name}", blob)
        urls.append(f"ais://{bucket}/train/{name}")
    return urls, f"ais://{bucket}/train/index.json"


def test_build_check_and_read(
    uploaded: Any, registry: OpenerRegistry, ais_module_backend: AisBackend, bucket: str
) -> None:
    urls, json_url = uploaded
    indexcheck.assert_build_check_and_read(urls, json_url, registry)
    assert ais_module_backend.has_object(bucket, "train/index.json")
    for url in urls:
        assert ais_module_backend.has_object(bucket, url.split("/", 3)[3][:-4] + ".idx")


@pytest.fixture(scope="module")
def dataset(uploaded: Any, registry: OpenerRegistry) -> wds.IndexedWebDataset:
    urls, json_url = uploaded
    wds.build_index(urls, json=json_url, registry=registry)
    return wds.IndexedWebDataset(json_url, registry=registry)


@pytest.mark.emulator_only("reads each request from the emulator's log")
def test_one_ranged_get_per_sample(
    dataset: wds.IndexedWebDataset, ais_module_backend: AisBackend
) -> None:
    emulator = ais_module_backend.emulator
    assert emulator is not None
    for i in range(0, len(dataset), 3):
        before = len(emulator.requests)
        sample = dataset[i]
        requests = emulator.requests[before:]
        assert len(requests) == 1, requests
        method, path, _, rng = requests[0]
        shard, local = dataset.locate(i)
        members = dataset.indexes[shard].sample(local)[1]
        first, end = members[0].offset - 512, members[-1].offset + members[-1].size
        assert method == "GET" and path.endswith(sample["__url__"].split("/", 3)[3])
        assert rng == f"bytes={first}-{end - 1}"


@pytest.mark.slow_on_real  # ~20 s there: thousands of redirected ranged GETs on 2 cores
@pytest.mark.parametrize("context", ["fork", pytest.param("spawn", marks=pytest.mark.slow)])
def test_dataloader_workers(dataset: wds.IndexedWebDataset, context: str) -> None:
    indexcheck.assert_dataloader(dataset, context)


@pytest.mark.slow_on_real
def test_distributed_sampler(dataset: wds.IndexedWebDataset) -> None:
    indexcheck.assert_distributed_sampler(dataset)


def test_shardwriter_commits_indexes_and_json(
    registry: OpenerRegistry, ais_module_backend: AisBackend
) -> None:
    written = ais_module_backend.create_bucket("written")
    with wds.ShardWriter(
        f"ais://{written}/w/s-%03d.tar", maxcount=5, registry=registry, index=True
    ) as sink:
        for i in range(12):
            sink.write({"__key__": f"k{i:03d}", "txt": f"{i}" * (i * 50)})
    checks = wds.check_index(f"ais://{written}/w/index.json", registry=registry)
    assert [c.status for c in checks] == ["ok"] * 3
    ds = wds.IndexedWebDataset(f"ais://{written}/w/index.json", registry=registry)
    assert len(ds) == 12 and ds[11]["txt"] == b"11" * 550


@pytest.mark.emulator_only("uses the emulator's cut_after hook")
def test_a_dropped_ranged_read_resumes(
    dataset: wds.IndexedWebDataset, registry: OpenerRegistry, ais_module_backend: AisBackend
) -> None:
    emulator = ais_module_backend.emulator
    assert emulator is not None
    url = dataset.urls[0]
    want = wds.read_range(url, 512, 30000, registry=registry)
    emulator.cut_after(700, times=2)
    got = wds.read_range(url, 512, 30000, registry=registry)
    assert got == want and emulator.pending_cuts() == 0


def test_etl_urls_and_short_ranges_are_refused(
    dataset: wds.IndexedWebDataset, registry: OpenerRegistry, bucket: str
) -> None:
    with pytest.raises(wds.ConfigError, match="inline ETL"):
        wds.read_range(dataset.urls[0] + "?etl=x", 0, 10, registry=registry)
    with pytest.raises(wds.ShardNotFoundError):
        wds.read_range(f"ais://{bucket}/train/none.tar", 0, 10, registry=registry)
    with pytest.raises(wds.ShardReadError, match=r"has \d+ bytes; the range ends"):
        wds.read_range(dataset.urls[0], 512, 10**9, registry=registry)
