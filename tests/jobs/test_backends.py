"""Jobs on the other object stores, end to end: gs:// (fake-gcs-server) and az:// (Azurite),
ais:// to dSort (the AIStore emulator driven by the real ``aistore`` SDK), and files from an
s3:// prefix. The jobs on ``ais://`` through the engine run on the emulator and the real
cluster in ``tests/ais/test_jobs.py``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.jobs import helpers
from tests.jobs.helpers import multiset, read_samples, write_inputs
from tests.s3.conftest import make_config
from wds_cloud.errors import ConfigError
from wds_cloud.jobs import convert, map_shards, reshard
from wds_cloud.listing import resolve_shards
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.gcs.opener import GcsOpener
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Opener

pytestmark = pytest.mark.slow


def _object_store(kind: str, request: pytest.FixtureRequest) -> tuple[OpenerRegistry, str]:
    """(registry, output prefix) of an empty bucket or container on ``kind``'s server."""
    registry = OpenerRegistry()
    if kind == "gs":
        fake_gcs = request.getfixturevalue("fake_gcs")
        registry.register("gs", GcsOpener(endpoint=fake_gcs.endpoint, backoff=0.01), override=True)
        fake_gcs.client().create_bucket("jobs-out")
        return registry, "gs://jobs-out"
    from wds_cloud.openers.azure.opener import AzureOpener

    azurite = request.getfixturevalue("azurite")
    registry.register("az", AzureOpener(connection_string=azurite.connection_string), override=True)
    container = azurite.container("jobs-out")
    request.addfinalizer(container.delete_container)
    return registry, "az://jobs-out"


@pytest.mark.parametrize(
    "kind", [pytest.param("gs", marks=pytest.mark.gcs), pytest.param("az", marks=pytest.mark.azure)]
)
def test_reshard_local_to_an_object_store_and_map_back(
    kind: str, request: pytest.FixtureRequest, tmp_path
):
    registry, root = _object_store(kind, request)
    inputs = resolve_shards(write_inputs(tmp_path / "in", 3, 8))
    out = f"{root}/r/r-%03d.tar"
    summary = reshard(inputs, out, maxcount=5, shuffle=True, seed=4, registry=registry)
    assert summary.shards == [out % i for i in range(5)]
    assert multiset(read_samples(summary.shards, registry)) == multiset(read_samples(inputs))
    back = map_shards(
        summary.shards, str(tmp_path / "m" / "m-%03d.tar"), helpers.upper, registry=registry
    )
    local = reshard(inputs, str(tmp_path / "l" / "r-%03d.tar"), maxcount=5, shuffle=True, seed=4)
    assert read_samples(back.shards) == [helpers.upper(s) for s in read_samples(local.shards)]


@pytest.mark.s3
def test_convert_files_under_an_s3_prefix(s3_endpoint, raw_client, bucket, tmp_path):
    registry = OpenerRegistry()
    registry.register("s3", S3Opener(make_config(s3_endpoint)), override=True)
    for i in range(7):
        raw_client.put_object(Bucket=bucket, Key=f"raw/a/{i:02d}.jpg", Body=bytes([i]) * 9)
        raw_client.put_object(Bucket=bucket, Key=f"raw/a/{i:02d}.json", Body=b"{}")
    out = f"s3://{bucket}/shards/s-%02d.tar"
    summary = convert(f"s3://{bucket}/raw/", out, maxcount=3, registry=registry)
    got = read_samples(summary.shards, registry)
    assert [s["__key__"] for s in got] == [f"a/{i:02d}" for i in range(7)]
    assert got[6] == {"__key__": "a/06", "jpg": b"\6" * 9, "json": b"{}"}
    assert len(summary.shards) == 3


@pytest.mark.ais
def test_shuffled_reshard_from_ais_to_ais_runs_as_one_dsort_job(ais_emulator: Any, tmp_path):
    """Without map/select/maxcount the reshard goes to the cluster (dSort, run by the emulator);
    ``dsort=False`` keeps it on the engine; ``dsort=True`` refuses what dSort cannot run."""
    registry = OpenerRegistry()
    registry.register(
        "ais", AisOpener(endpoint=ais_emulator.url, retries=2, backoff=0.0), override=True
    )
    ais_emulator.store.create_bucket("ds", exist_ok=True)
    local = resolve_shards(write_inputs(tmp_path / "in", 3, 8))
    for url in local:
        ais_emulator.store.put_object("ds", f"in/{url.rsplit('/', 1)[1]}", open(url, "rb").read())
    before = multiset(read_samples(local))
    on_cluster = reshard(
        "ais://ds/in/", "ais://ds/out/o-%06d.tar", maxsize=4000, shuffle=True, seed=3,
        registry=registry,
    )  # fmt: skip
    assert on_cluster.extra["engine"] == "dsort" and on_cluster.extra["dsort_job"]
    shards = on_cluster.extra["shards"]
    assert on_cluster.samples_out == sum(before.values()) and len(shards) > 1
    assert multiset(read_samples(shards, registry)) == before
    on_engine = reshard(
        "ais://ds/in/", "ais://ds/eng/e-%02d.tar", maxsize=4000, shuffle=True, seed=3,
        registry=registry, dsort=False,
    )  # fmt: skip
    assert "engine" not in on_engine.extra
    assert multiset(read_samples(on_engine.shards, registry)) == before
    with pytest.raises(ConfigError, match="dsort=True"):
        reshard("ais://ds/in/", "ais://ds/x/x-%02d.tar", maxcount=5, shuffle=True, dsort=True,
                registry=registry)  # fmt: skip
