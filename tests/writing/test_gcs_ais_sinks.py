"""ShardWriter streaming to gs:// (fake-gcs-server) and ais:// (the AIStore emulator) through
the backends' own create() writers."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.emulators.ais.server import AisEmulator
from tests.support.fake_gcs import FakeGcsServer
from wds_cloud.core.samples import tar_samples
from wds_cloud.openers.ais import AisOpener
from wds_cloud.openers.gcs import GcsOpener
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.writing.shardwriter import ShardWriter


def write_shards(pattern: str, registry: OpenerRegistry, crash: bool = False) -> list[str]:
    posted: list[str] = []
    writer = ShardWriter(pattern, maxcount=3, post=posted.append, registry=registry)
    with writer:
        for i in range(8 if crash else 7):
            writer.write({"__key__": f"k{i}", "txt": f"t{i}", "bin": bytes([i]) * 2000})
        if crash:
            raise KeyError("crash")
    return posted


def read_keys(registry: OpenerRegistry, urls: list[str]) -> list[str]:
    keys = []
    for url in urls:
        with registry.open(url) as stream:
            keys += [s["__key__"] for s in tar_samples(stream, url)]
    return keys


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OpenerRegistry, Any]]:
    server = FakeGcsServer(Path(tmp_path_factory.mktemp("gcs-w")) / "server.log").start()
    try:
        client = server.client()
        client.create_bucket("wbucket")
        registry = OpenerRegistry(builtins=False)
        registry.register("gs", GcsOpener(endpoint=server.endpoint, backoff=0.01))
        yield registry, client
    finally:
        server.stop()


@pytest.mark.gcs
def test_shards_to_gcs(gcs: tuple[OpenerRegistry, Any]) -> None:
    registry, client = gcs
    posted = write_shards("gs://wbucket/train/s-%02d.tar", registry)
    assert posted == [f"gs://wbucket/train/s-0{n}.tar" for n in range(3)]
    assert sorted(b.name for b in client.list_blobs("wbucket", prefix="train/")) == [
        f"train/s-0{n}.tar" for n in range(3)
    ]
    assert read_keys(registry, posted) == [f"k{i}" for i in range(7)]
    with pytest.raises(KeyError):
        write_shards("gs://wbucket/crash/s-%02d.tar", registry, crash=True)
    assert sorted(b.name for b in client.list_blobs("wbucket", prefix="crash/")) == [
        "crash/s-00.tar",
        "crash/s-01.tar",
    ], "the third, open shard was aborted"


@pytest.fixture
def ais() -> Iterator[tuple[OpenerRegistry, AisEmulator]]:
    emu = AisEmulator().start()
    try:
        emu.store.create_bucket("wbucket")
        registry = OpenerRegistry(builtins=False)
        registry.register(
            "ais", AisOpener(endpoint=emu.url, retries=2, backoff=0.0, timeout=(2.0, 20.0))
        )
        yield registry, emu
    finally:
        emu.stop()


@pytest.mark.ais
def test_shards_to_ais(ais: tuple[OpenerRegistry, AisEmulator]) -> None:
    registry, emu = ais
    posted = write_shards("ais://wbucket/train/s-%02d.tar", registry)
    assert [o.name for o in emu.store.list_objects("wbucket", "train/")] == [
        f"train/s-0{n}.tar" for n in range(3)
    ]
    assert read_keys(registry, posted) == [f"k{i}" for i in range(7)]
    first = emu.store.get_object("wbucket", "train/s-00.tar").data
    assert [s["__key__"] for s in tar_samples(io.BytesIO(first), "x")] == ["k0", "k1", "k2"]
    with pytest.raises(KeyError):
        write_shards("ais://wbucket/crash/s-%02d.tar", registry, crash=True)
    assert [o.name for o in emu.store.list_objects("wbucket", "crash/")] == [
        "crash/s-00.tar",
        "crash/s-01.tar",
    ]
