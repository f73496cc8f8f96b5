"""wds.join over S3 (SeaweedFS), GCS (fake-gcs-server) and HTTP: the same merged samples as the
reference read with ``tarfile``; on S3 the bytes the server sent, counted by a proxy in front of
it, for a 3-set join asking 2 are within 1.05x of those 2 sets' object sizes; resume reads the
rest of a shard from its offsets (ranged reads) on a remote backend."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.core.joinsets import fields, make_sets, reference
from tests.resume.helpers import run_interrupted
from tests.support.fake_gcs import FakeGcsServer
from tests.support.faulty_proxy import FaultyProxy
from tests.support.http_server import HttpFileServer
from tests.support.seaweed import SeaweedServer, boto3_client, create_bucket
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.slow

NSHARDS, SAMPLES = 4, 40
COLUMNS = ["img", "txt"]
_ids = itertools.count()


@pytest.fixture(scope="module")
def data() -> dict[str, list[bytes]]:
    return make_sets(NSHARDS, SAMPLES)


def want(data: dict[str, list[bytes]]) -> list[dict[str, Any]]:
    return reference(list(zip(*(data[c] for c in COLUMNS), strict=True)), COLUMNS)


def specs(base: str) -> dict[str, str]:
    return {c: f"{base}{c}-{{000..{NSHARDS - 1:03d}}}.tar" for c in ("img", "txt", "emb")}


def read(sets: dict[str, str], registry: Any = None) -> list[dict[str, Any]]:
    ds = wds.WebDataset(
        wds.join(sets, columns=COLUMNS, registry=registry), shardshuffle=False, registry=registry
    )
    return [fields(s) for s in ds]


# -- S3 --------------------------------------------------------------------------------------------


@pytest.fixture
def s3_sets(seaweed: SeaweedServer, data: dict[str, list[bytes]]) -> Iterator[tuple[str, Any]]:
    client = boto3_client(seaweed.endpoint_url)
    bucket = create_bucket(client, f"join-{next(_ids)}")
    for column, shards in data.items():
        for i, body in enumerate(shards):
            client.put_object(Bucket=bucket, Key=f"{column}-{i:03d}.tar", Body=body)
    yield f"s3://{bucket}/", client


def s3_registry(endpoint: str) -> OpenerRegistry:
    from tests.s3.conftest import make_config
    from wds_cloud.openers.s3.opener import S3Opener

    registry = OpenerRegistry()
    registry.register("s3", S3Opener(make_config(endpoint)), override=True)
    return registry


@pytest.mark.s3
def test_s3_matches_the_reference_and_sends_only_the_asked_sets(
    seaweed: SeaweedServer, s3_sets: tuple[str, Any], data: dict[str, list[bytes]]
) -> None:
    base, _ = s3_sets
    port = int(seaweed.endpoint_url.rsplit(":", 1)[1])
    with FaultyProxy(port) as proxy:  # no fault: it counts the bytes the server sends
        got = read(specs(base), s3_registry(proxy.url))
        sent = proxy.bytes_forwarded
    assert got == want(data)
    asked = sum(len(b) for c in COLUMNS for b in data[c])
    unasked = sum(len(b) for b in data["emb"])
    assert unasked > 0.05 * asked  # reading it would break the bound below
    assert asked <= sent <= 1.05 * asked, (sent, asked, sent / asked)


@pytest.mark.s3
def test_s3_resume_reads_the_rest_of_each_set(
    seaweed: SeaweedServer, s3_sets: tuple[str, Any]
) -> None:
    base, _ = s3_sets
    registry = s3_registry(seaweed.endpoint_url)

    def make() -> Any:
        j = wds.join(specs(base), columns=COLUMNS)
        return wds.WebDataset(j, shardshuffle=True, seed=3, registry=registry).shuffle(6, seed=1)

    def keys(s: dict[str, Any]) -> list[str]:
        return [s["__key__"]]

    full = sorted(keys(s)[0] for s in make())
    got, states = run_interrupted(make, [17, 50], keys)
    assert sorted(got) == full and len(got) == NSHARDS * SAMPLES
    assert any(states[0]["open"])  # stopped inside shards: their rest was read from offsets


# -- GCS ---------------------------------------------------------------------------------------


@pytest.mark.gcs
def test_gcs_matches_the_reference(fake_gcs: FakeGcsServer, data: dict[str, list[bytes]]) -> None:
    from wds_cloud.openers.gcs.opener import GcsOpener

    client = fake_gcs.client()
    bucket = client.create_bucket(f"join-{next(_ids)}")
    for column in COLUMNS:  # emb is not uploaded: never asked, never opened
        for i, body in enumerate(data[column]):
            bucket.blob(f"{column}-{i:03d}.tar").upload_from_string(body)
    registry = OpenerRegistry()
    registry.register("gs", GcsOpener(endpoint=fake_gcs.endpoint, backoff=0.01), override=True)
    try:
        assert read(specs(f"gs://{bucket.name}/"), registry) == want(data)
    finally:
        for blob in client.list_blobs(bucket.name):
            blob.delete()


# -- HTTP ----------------------------------------------------------------------------------------


def test_http_matches_the_reference(tmp_path: Path, data: dict[str, list[bytes]]) -> None:
    for column in COLUMNS:
        for i, body in enumerate(data[column]):
            (tmp_path / f"{column}-{i:03d}.tar").write_bytes(body)
    server = HttpFileServer(tmp_path).start()
    try:
        assert read(specs(server.url())) == want(data)
    finally:
        server.stop()


# -- AIStore (the emulator) ---------------------------------------------------------------------


@pytest.mark.ais
def test_ais_matches_the_reference(ais_emulator: Any, data: dict[str, list[bytes]]) -> None:
    from wds_cloud.openers.ais.opener import AisOpener

    ais_emulator.store.create_bucket("joins")
    for column in COLUMNS:
        for i, body in enumerate(data[column]):
            ais_emulator.store.put_object("joins", f"{column}-{i:03d}.tar", body)
    registry = OpenerRegistry()
    registry.register("ais", AisOpener(endpoint=ais_emulator.url), override=True)
    assert read(specs("ais://joins/"), registry) == want(data)
