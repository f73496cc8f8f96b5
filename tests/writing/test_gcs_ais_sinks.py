"""ShardWriter streaming to gs:// (fake-gcs-server) and ais:// (the AIStore emulator) through
the backends' own create() writers."""

from __future__ import annotations

import io
from typing import Any

import pytest

from tests.emulators.ais.server import AisEmulator
from tests.support.fake_gcs import FakeGcsServer
from wds_cloud.core.samples import tar_samples
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.gcs.opener import GcsOpener
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
def gcs(fake_gcs: FakeGcsServer) -> tuple[OpenerRegistry, Any]:
    """(registry with a gs:// opener, client) on the session's fake-gcs-server."""
    client = fake_gcs.client()
    client.create_bucket("wbucket")
    registry = OpenerRegistry(builtins=False)
    registry.register("gs", GcsOpener(endpoint=fake_gcs.endpoint, backoff=0.01))
    return registry, client


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
def ais(ais_emulator: AisEmulator) -> tuple[OpenerRegistry, AisEmulator]:
    ais_emulator.store.create_bucket("wbucket")
    registry = OpenerRegistry(builtins=False)
    registry.register(
        "ais", AisOpener(endpoint=ais_emulator.url, retries=2, backoff=0.0, timeout=(2.0, 20.0))
    )
    return registry, ais_emulator


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
