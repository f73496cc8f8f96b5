"""wds_cloud against a real AIStore 5.0 cluster (one proxy, two targets; ``tests/servers/``).

Skipped without ``go`` unless ``WDS_CLOUD_REQUIRE_REAL_AIS=1`` (see ``conftest_plugin``).
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import wds_cloud
from tests.servers.aistore import NO_ACCESS, READER, Cluster
from tests.support.tarbuild import tar_bytes
from wds_cloud.errors import ShardOpenError
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.registry import OpenerRegistry

aistore_sdk = pytest.importorskip("aistore.sdk")

# the first test here may build the binaries in its fixture's setup: minutes on 2 cores (CI
# builds them before pytest with `python -m tests.servers.aistore build`)
pytestmark = pytest.mark.timeout(1800)


def _client(cluster: Cluster, token: str | None = None) -> Any:
    return aistore_sdk.Client(cluster.endpoint, token=token, timeout=(2, 30))


def _put_shards(bucket: Any, count: int) -> dict[str, tuple[bytes, bytes]]:
    """Put ``shard-0.tar``... (5 samples each: ``.txt``, ``.cls``); returns the samples by key."""
    expected = {}
    for s in range(count):
        members = []
        for i in range(5):
            key = f"s{s}/sample-{i:03d}"
            text, cls = f"shard {s} sample {i}".encode(), str(i % 3).encode()
            members += [(f"{key}.txt", text), (f"{key}.cls", cls)]
            expected[key] = (text, cls)
        bucket.object(f"shard-{s}.tar").get_writer().put_content(tar_bytes(members))
    return expected


def _read(spec: str) -> dict[str, tuple[bytes, bytes]]:
    """The samples of ``spec`` by key, through an ``ais://`` opener made from the environment
    now (the default registry keeps the first opener it made, and its endpoint and token)."""
    dataset = wds_cloud.WebDataset(spec, registry=OpenerRegistry())
    return {s["__key__"]: (s["txt"], s["cls"]) for s in dataset}


def test_webdataset_reads_shards_put_to_the_cluster(
    ais_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = _client(ais_cluster).bucket("wds-shards").create(exist_ok=True)
    expected = _put_shards(bucket, 4)
    monkeypatch.setenv("AIS_ENDPOINT", ais_cluster.endpoint)
    monkeypatch.delenv("AIS_AUTHN_TOKEN", raising=False)

    assert _read("ais://wds-shards/shard-{0..3}.tar") == expected


def _objects_on(target_root: Path, prefix: str) -> int:
    return sum(1 for path in target_root.glob(f"mp*/**/{prefix}*") if path.is_file())


def test_listing_pages_through_objects_of_both_targets(ais_cluster: Cluster) -> None:
    count, page = 1100, 250
    tag = uuid.uuid4().hex[:8]  # names only this test makes: other tests share the cluster
    bucket = _client(ais_cluster).bucket("wds-many").create(exist_ok=True)
    names = [f"many/obj-{tag}-{i:05d}.tar" for i in range(count)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: bucket.object(n).get_writer().put_content(n.encode()), names))

    # the objects are spread over both targets (by name hash), so a listing merges two
    on_disk = [_objects_on(node.root, f"obj-{tag}-") for node in ais_cluster.nodes[1:]]
    assert sum(on_disk) == count and min(on_disk) > 0, on_disk
    first = bucket.list_objects(prefix="many/", page_size=page)
    assert len(first.entries) == page and first.continuation_token  # the cluster pages

    opener = AisOpener(endpoint=ais_cluster.endpoint, page_size=page)
    listed = opener.list_sizes(f"ais://wds-many/many/obj-{tag}-")
    assert listed == [(f"ais://wds-many/{n}", len(n)) for n in names]


def test_authn_token_reads_and_no_token_is_refused(
    ais_cluster_authn: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = ais_cluster_authn
    admin = _client(cluster, cluster.token_for("admin"))
    expected = _put_shards(admin.bucket("wds-private").create(exist_ok=True), 2)
    spec = "ais://wds-private/shard-{0..1}.tar"
    monkeypatch.setenv("AIS_ENDPOINT", cluster.endpoint)

    monkeypatch.setenv("AIS_AUTHN_TOKEN", cluster.token_for(READER))
    assert _read(spec) == expected

    monkeypatch.delenv("AIS_AUTHN_TOKEN")
    with pytest.raises(ShardOpenError, match=r"none was sent \(401\)") as no_token:
        _read(spec)
    assert no_token.value.url == "ais://wds-private/shard-0.tar"

    monkeypatch.setenv("AIS_AUTHN_TOKEN", cluster.token_for(NO_ACCESS))
    with pytest.raises(ShardOpenError, match=r"not allowed to do this \(403"):
        _read(spec)
