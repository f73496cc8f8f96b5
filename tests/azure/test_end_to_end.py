"""``az://`` end to end on Azurite: ShardWriter, upload_shards, build_index and random access,
and where the blocks of a discarded write stay (the jobs: ``tests/jobs/test_backends.py``)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.azure.conftest import azure_opener
from tests.support import indexcheck
from tests.support.azurite import AzuriteServer
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.azure


@pytest.fixture
def registry(azurite: AzuriteServer) -> OpenerRegistry:
    registry = OpenerRegistry()
    for scheme in ("az", "azure", "abfs"):
        registry.register(scheme, azure_opener(azurite, block_size=64 << 10), override=True)
    return registry


def test_shardwriter_writes_and_webdataset_reads(registry: OpenerRegistry, container: Any) -> None:
    name = container.container_name
    with wds.ShardWriter(f"az://{name}/w/s-%03d.tar", maxcount=4, registry=registry) as sink:
        for i in range(10):
            sink.write({"__key__": f"k{i:03d}", "txt": f"{i}" * 40_000})
    shards = wds.list_shards(f"azure://{name}/w/", registry=registry)
    assert shards == [f"azure://{name}/w/s-{i:03d}.tar" for i in range(3)]
    got = list(wds.WebDataset(shards, shardshuffle=False, registry=registry))
    assert [s["__key__"] for s in got] == [f"k{i:03d}" for i in range(10)]
    assert got[9]["txt"] == b"9" * 40_000


def test_upload_shards_then_index_and_random_access(
    registry: OpenerRegistry, container: Any, tmp_path: Path
) -> None:
    name = container.container_name
    paths = []
    for shard_name, blob in indexcheck.indexable_archives(6):
        path = tmp_path / shard_name
        path.write_bytes(blob)
        paths.append(path)
    urls = wds.upload_shards(paths, f"az://{name}/train/", progress=False, registry=registry)
    assert urls == [f"az://{name}/train/{p.name}" for p in paths]
    json_url = f"az://{name}/train/index.json"
    indexcheck.assert_build_check_and_read(urls, json_url, registry)
    names = {b.name for b in container.list_blobs()}
    assert {f"train/{p.stem}.idx" for p in paths} <= names and "train/index.json" in names


def test_a_discarded_write_stages_blocks_but_commits_nothing(
    azurite: AzuriteServer, container: Any
) -> None:
    opener = azure_opener(azurite, block_size=64 << 10)
    container.upload_blob("old.tar", b"old")
    url = f"az://{container.container_name}/old.tar"
    sink = opener.create(url)
    sink.write(b"n" * (3 * (64 << 10) + 5))
    assert len(sink.blocks) == 3  # staged before the end
    sink.abort()
    assert container.download_blob("old.tar").readall() == b"old"  # the old blob, untouched
    staged = container.get_blob_client("old.tar").get_block_list("uncommitted")[1]
    assert len(staged) == 3  # where the blocks stay until Azure expires them
    new = opener.create(f"az://{container.container_name}/new.tar")
    new.write(b"x" * (64 << 10))
    with pytest.warns(ResourceWarning, match="nothing was committed"):
        del new  # garbage collection discards too
        gc.collect()
    assert not container.get_blob_client("new.tar").exists()
