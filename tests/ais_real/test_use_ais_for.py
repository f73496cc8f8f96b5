"""``USE_AIS_FOR``: ``s3://`` reads through a real AIStore cluster in front of SeaweedFS.

``ais_cluster_s3`` (``tests/servers/conftest_plugin.py``) is an AIStore 5.0 cluster whose
``aws`` backend is the session's SeaweedFS server, behind a proxy that counts the requests the
cluster sends to it. The tests without that fixture need no cluster (they run without ``go``).
"""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import wds_cloud
from tests.servers.conftest_plugin import S3FrontedCluster
from tests.support.faulty_proxy import FaultyProxy
from tests.support.seaweed import (
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    boto3_client,
    create_bucket,
    free_ports,
)
from tests.support.tarbuild import tar_bytes
from wds_cloud.errors import ConfigError, ShardError, ShardNotFoundError, ShardOpenError
from wds_cloud.listing import list_shards, list_sizes
from wds_cloud.openers import registry as registry_module
from wds_cloud.openers.ais.route import ROUTES, USE_AIS_FOR, AisRoute, ais_url, routed_provider
from wds_cloud.openers.capabilities import BatchReader, RangeRequest
from wds_cloud.openers.registry import OpenerRegistry, open_sink
from wds_cloud.openers.s3.config import S3Config
from wds_cloud.openers.s3.opener import S3Opener

pytest.importorskip("aistore.sdk")

# the first test here may build the binaries in its fixture's setup: minutes on 2 cores
pytestmark = pytest.mark.timeout(1800)

Samples = dict[str, tuple[bytes, str]]


def _direct(seaweed_url: str) -> S3Opener:
    """An ``s3://`` opener straight to SeaweedFS (credentials explicit, never the env)."""
    return S3Opener(
        S3Config(
            endpoint_url=seaweed_url,
            region=REGION,
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
        )
    )


def _registry(seaweed_url: str) -> OpenerRegistry:
    """A fresh registry whose own ``s3://`` opener goes straight to SeaweedFS."""
    registry = OpenerRegistry()
    registry.register("s3", _direct(seaweed_url), override=True)
    return registry


def _read(spec: str, registry: OpenerRegistry) -> Samples:
    """``key -> (txt, __url__)`` of every sample of ``spec``."""
    dataset = wds_cloud.WebDataset(spec, registry=registry, shardshuffle=False)
    return {s["__key__"]: (s["txt"], s["__url__"]) for s in dataset}


@pytest.fixture
def s3_bucket(ais_cluster_s3: S3FrontedCluster) -> Iterator[str]:
    """A new SeaweedFS bucket with ``train/shard-0.tar``..``shard-3.tar`` (3 samples each)."""
    client = boto3_client(ais_cluster_s3.seaweed.endpoint_url)
    bucket = create_bucket(client, f"aisfor-{uuid.uuid4().hex[:10]}")
    for s in range(4):
        members = [(f"s{s}-{i}.txt", f"shard {s} sample {i}".encode()) for i in range(3)]
        client.put_object(Bucket=bucket, Key=f"train/shard-{s}.tar", Body=tar_bytes(members))
    client.put_object(Bucket=bucket, Key="train/", Body=b"")  # a directory marker
    yield bucket


@pytest.fixture
def routed(ais_cluster_s3: S3FrontedCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """``USE_AIS_FOR=s3`` with ``AIS_ENDPOINT`` naming the cluster."""
    monkeypatch.setenv(USE_AIS_FOR, "s3")
    monkeypatch.setenv("AIS_ENDPOINT", ais_cluster_s3.cluster.endpoint)
    for name in ("AIS_AUTHN_TOKEN", "WDS_CLOUD_AIS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


# -- through the real cluster ------------------------------------------------------------------


def test_the_first_epoch_reads_through_to_s3_the_second_comes_from_the_cluster(
    ais_cluster_s3: S3FrontedCluster, s3_bucket: str, routed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = f"s3://{s3_bucket}/train/shard-{{0..3}}.tar"
    registry = _registry(ais_cluster_s3.seaweed.endpoint_url)
    assert isinstance(registry.get("s3"), AisRoute)
    counter = ais_cluster_s3.counter

    before = counter.requests
    first = _read(spec, registry)
    cold = counter.requests - before
    before = counter.requests
    second = _read(spec, registry)
    warm = counter.requests - before

    assert cold >= 4, f"the first epoch sent {cold} requests to SeaweedFS for 4 shards"
    assert warm == 0, f"the second epoch sent {warm} requests to SeaweedFS (not cached)"
    monkeypatch.delenv(USE_AIS_FOR)
    direct = _read(spec, registry)
    assert first == second == direct
    assert len(direct) == 12
    assert {url for _, url in first.values()} == {
        f"s3://{s3_bucket}/train/shard-{s}.tar" for s in range(4)
    }


def test_listing_goes_through_the_cluster_and_gives_s3_urls(
    ais_cluster_s3: S3FrontedCluster, s3_bucket: str, routed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = _registry(ais_cluster_s3.seaweed.endpoint_url)
    prefix = f"s3://{s3_bucket}/train/"
    before = ais_cluster_s3.counter.requests
    through = list_sizes(prefix, registry=registry)
    shards = list_shards(prefix, registry=registry)
    assert ais_cluster_s3.counter.requests > before  # the cluster asked SeaweedFS

    monkeypatch.delenv(USE_AIS_FOR)
    assert through == list_sizes(prefix, registry=registry)
    assert shards == list_shards(prefix, registry=registry)
    assert shards == [f"{prefix}shard-{s}.tar" for s in range(4)]


def test_ranged_reads_and_open_at_go_through_the_cluster(
    ais_cluster_s3: S3FrontedCluster, s3_bucket: str, routed: None
) -> None:
    registry = _registry(ais_cluster_s3.seaweed.endpoint_url)
    url = f"s3://{s3_bucket}/train/shard-1.tar"
    whole = _direct(ais_cluster_s3.seaweed.endpoint_url).read_range(url, 0, 10240)
    assert registry.read_range(url, 512, 100) == whole[512:612]
    with registry.get("s3").open_at(url, 1000) as stream:
        assert stream.read() == whole[1000:]


def test_batch_reads_go_through_getbatch_and_name_the_s3_url(
    ais_cluster_s3: S3FrontedCluster, s3_bucket: str, routed: None
) -> None:
    registry = _registry(ais_cluster_s3.seaweed.endpoint_url)
    route = registry.get("s3")
    assert isinstance(route, BatchReader)
    direct = _direct(ais_cluster_s3.seaweed.endpoint_url)
    urls = [f"s3://{s3_bucket}/train/shard-{s}.tar" for s in (2, 0, 3)]
    requests = [RangeRequest(u, 512 * k, 700) for k, u in enumerate(urls)]
    before = ais_cluster_s3.counter.requests
    assert route.read_batch(requests) == [
        direct.read_range(r.url, r.offset, r.length) for r in requests
    ]  # cold objects: GetBatch says missing, and one ranged GET each brings them in
    cold = ais_cluster_s3.counter.requests - before
    assert cold >= 3
    before = ais_cluster_s3.counter.requests
    assert route.read_batch(requests) == [
        direct.read_range(r.url, r.offset, r.length) for r in requests
    ]
    assert ais_cluster_s3.counter.requests == before  # warm: served by the cluster
    missing = RangeRequest(f"s3://{s3_bucket}/train/missing.tar", 0, 10)
    with pytest.raises(ShardError, match="read through AIStore") as info:
        route.read_batch([requests[0], missing])
    assert info.value.url == missing.url


def test_writes_go_straight_to_s3_not_to_the_cluster(
    ais_cluster_s3: S3FrontedCluster, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FaultyProxy(ais_cluster_s3.cluster.nodes[0].port) as ais_front:
        monkeypatch.setenv(USE_AIS_FOR, "s3")
        monkeypatch.setenv("AIS_ENDPOINT", ais_front.url)
        registry = _registry(ais_cluster_s3.seaweed.endpoint_url)
        sink = open_sink(f"s3://{s3_bucket}/out/new.tar", registry)
        sink.write(b"written")
        sink.close()
        assert ais_front.connections == 0
    body = boto3_client(ais_cluster_s3.seaweed.endpoint_url).get_object(
        Bucket=s3_bucket, Key="out/new.tar"
    )["Body"]
    assert body.read() == b"written"


def test_gopen_reads_through_the_cluster(
    ais_cluster_s3: S3FrontedCluster, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"s3://{s3_bucket}/train/shard-2.tar"
    expected = _direct(ais_cluster_s3.seaweed.endpoint_url).read_range(url, 0, 10240)
    with FaultyProxy(ais_cluster_s3.cluster.nodes[0].port) as ais_front:
        monkeypatch.setenv(USE_AIS_FOR, "s3")
        monkeypatch.setenv("AIS_ENDPOINT", ais_front.url)  # the default registry, as is
        with wds_cloud.gopen(url) as stream:
            assert stream.read() == expected
        assert ais_front.connections > 0


def test_an_object_overwritten_in_s3_is_served_from_the_cluster_copy(
    ais_cluster_s3: S3FrontedCluster, s3_bucket: str, routed: None
) -> None:
    # docs/aistore.md: writes are not routed, so the cluster's copy goes stale (the test
    # cluster has versioning.validate_warm_get off, AIStore's default)
    registry = _registry(ais_cluster_s3.seaweed.endpoint_url)
    url = f"s3://{s3_bucket}/train/shard-3.tar"
    with registry.open(url) as stream:
        cached = stream.read()
    sink = open_sink(url, registry)  # straight to S3
    sink.write(b"new bytes")
    sink.close()
    with registry.open(url) as stream:
        assert stream.read() == cached


@pytest.mark.parametrize("use_ais_for", [None, "gs"])
def test_without_s3_in_use_ais_for_reads_never_contact_the_cluster(
    ais_cluster_s3: S3FrontedCluster,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    use_ais_for: str | None,
) -> None:
    with FaultyProxy(ais_cluster_s3.cluster.nodes[0].port) as ais_front:
        monkeypatch.setenv("AIS_ENDPOINT", ais_front.url)
        if use_ais_for is None:
            monkeypatch.delenv(USE_AIS_FOR, raising=False)
        else:
            monkeypatch.setenv(USE_AIS_FOR, use_ais_for)
        registry = _registry(ais_cluster_s3.seaweed.endpoint_url)
        samples = _read(f"s3://{s3_bucket}/train/shard-{{0..1}}.tar", registry)
        assert len(samples) == 6
        assert list_shards(f"s3://{s3_bucket}/train/", registry=registry)
        assert ais_front.connections == 0
    assert not isinstance(registry.get("s3"), AisRoute)


def test_a_missing_object_names_the_s3_url_and_the_route(
    ais_cluster_s3: S3FrontedCluster, s3_bucket: str, routed: None
) -> None:
    url = f"s3://{s3_bucket}/train/missing.tar"
    with pytest.raises(ShardNotFoundError) as caught:
        _registry(ais_cluster_s3.seaweed.endpoint_url).open(url)
    message = str(caught.value)
    assert caught.value.url == url
    assert url in message
    assert f"ais://{s3_bucket}/train/missing.tar?provider=aws" in message
    assert ais_cluster_s3.cluster.endpoint in message and "USE_AIS_FOR='s3'" in message


# -- no cluster needed -------------------------------------------------------------------------


def test_use_ais_for_without_an_endpoint_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(USE_AIS_FOR, "s3")
    for name in ("AIS_ENDPOINT", "WDS_CLOUD_AIS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match=r"USE_AIS_FOR='s3'.*AIS_ENDPOINT"):
        OpenerRegistry().open("s3://bucket/shard.tar")


def test_a_malformed_endpoint_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(USE_AIS_FOR, "s3")
    monkeypatch.setenv("AIS_ENDPOINT", "cluster:51080")
    with pytest.raises(ConfigError, match=r"USE_AIS_FOR.*AIS_ENDPOINT='cluster:51080'"):
        OpenerRegistry().open("s3://bucket/shard.tar")


def test_an_unreachable_endpoint_names_it_the_url_and_the_route(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint = f"http://127.0.0.1:{free_ports(1)[0]}"  # nothing listens there
    monkeypatch.setenv(USE_AIS_FOR, "gs:s3")
    monkeypatch.setenv("AIS_ENDPOINT", endpoint)
    monkeypatch.setenv("WDS_CLOUD_AIS_RETRIES", "0")
    with pytest.raises(ShardOpenError) as caught:
        OpenerRegistry().open("s3://bucket/dir/shard.tar")
    message = str(caught.value)
    assert caught.value.url == "s3://bucket/dir/shard.tar"
    assert endpoint in message and "ais://bucket/dir/shard.tar?provider=aws" in message


def test_use_ais_for_names_and_routes() -> None:
    assert routed_provider("s3", {USE_AIS_FOR: "s3"}) == "aws"
    assert routed_provider("gs", {USE_AIS_FOR: "s3"}) is None
    assert routed_provider("s3", {}) is None
    # webdataset's docstring example lists "aws", which names no URL scheme: accepted
    both = {USE_AIS_FOR: "aws:gs:s3"}
    assert [routed_provider(s, both) for s in ("s3", "gs", "gcs")] == ["aws", "gcp", "gcp"]
    with pytest.raises(ConfigError, match=r"USE_AIS_FOR='s3:http'.*'http'"):
        routed_provider("s3", {USE_AIS_FOR: "s3:http"})
    # the registry's cheap guard (it imports the route module only when it may route)
    assert {s for schemes, _ in ROUTES.values() for s in schemes} == registry_module._ROUTABLE
    assert registry_module._USE_AIS_FOR == USE_AIS_FOR


@pytest.mark.parametrize(
    ("url", "routed"),
    [
        ("s3://b/dir/shard-0.tar", "ais://b/dir/shard-0.tar?provider=aws"),
        ("s3://b/a b%c?d.tar", "ais://b/a%20b%25c%3Fd.tar?provider=aws"),  # S3 keys verbatim
        ("s3://b", "ais://b/?provider=aws"),
        ("gs://b/x/y.tar", "ais://b/x/y.tar?provider=gcp"),
        ("gcs://b/x/y.tar", "ais://b/x/y.tar?provider=gcp"),
    ],
)
def test_urls_map_to_the_cluster(url: str, routed: str) -> None:
    provider = "aws" if url.startswith("s3") else "gcp"
    assert ais_url(url, provider) == routed


def test_gs_options_cannot_be_routed() -> None:
    with pytest.raises(ConfigError, match="generation"):
        ais_url("gs://b/x.tar?generation=7", "gcp")


def test_a_pickled_registry_routes_by_the_environment_of_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = OpenerRegistry()
    monkeypatch.delenv(USE_AIS_FOR, raising=False)
    copy: Any = pickle.loads(pickle.dumps(registry))
    assert not isinstance(copy.get("s3"), AisRoute)
    monkeypatch.setenv(USE_AIS_FOR, "s3")
    monkeypatch.setenv("AIS_ENDPOINT", "http://127.0.0.1:9")
    route = copy.get("s3")
    assert isinstance(route, AisRoute) and route is copy.get("s3")
    assert route.endpoint() == "http://127.0.0.1:9"
