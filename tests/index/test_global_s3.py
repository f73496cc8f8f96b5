"""The global order over ``s3://`` (the session's SeaweedFS): the same batches as the same
shards on local disk, read by DataLoader workers, resumed exactly from a cursor."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.resume.helpers import assert_exactly_once, run_interrupted, shard_bytes, write_shards
from tests.s3.conftest import make_config
from tests.support.faulty_proxy import FaultyProxy, faulty_proxy  # noqa: F401 - fixture
from tests.support.seaweed import SeaweedServer, boto3_client, create_bucket
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Opener

pytestmark = pytest.mark.s3

BUCKET = "global-order"
SHARDS, PER_SHARD = 6, 20


@pytest.fixture(scope="module")
def on_s3(seaweed: SeaweedServer) -> tuple[str, OpenerRegistry]:
    """The shards of ``write_shards`` in a bucket, indexed through the S3 opener."""
    client = boto3_client(seaweed.endpoint_url)
    create_bucket(client, BUCKET)
    registry = OpenerRegistry()
    registry.register("s3", S3Opener(make_config(seaweed.endpoint_url)), override=True)
    urls = []
    for i in range(SHARDS):
        data, _ = shard_bytes(i, PER_SHARD)
        client.put_object(Bucket=BUCKET, Key=f"train/shard-{i:03d}.tar", Body=data)
        urls.append(f"s3://{BUCKET}/train/shard-{i:03d}.tar")
    json_url = f"s3://{BUCKET}/train/index.json"
    wds.build_index(urls, json=json_url, registry=registry)
    return json_url, registry


def make(source: str, registry: OpenerRegistry | None = None) -> Any:
    kw: dict[str, Any] = {} if registry is None else {"registry": registry}
    return wds.make_loader(
        source,
        order="global",
        batch_size=8,
        num_workers=2,
        seed=23,
        to_tuple=("txt",),
        map=lambda s: s[0].decode(),
        collate=list,
        **kw,
    )


def test_same_order_as_local_and_exact_resume(
    on_s3: tuple[str, OpenerRegistry], tmp_path: Path
) -> None:
    json_url, registry = on_s3
    local, keys = write_shards(tmp_path, SHARDS, PER_SHARD)
    wds.build_index(local, json=None)
    whole = [k for batch in make(json_url, registry) for k in batch]
    assert whole == [k for batch in make(local) for k in batch]  # same N and seed: same order
    assert_exactly_once(whole, keys)
    delivered, states = run_interrupted(lambda: make(json_url, registry), [4, 6], list)
    assert delivered == whole
    assert [s["cursor"] for s in states] == [32, 80]


def test_each_batch_is_one_batch_read(
    on_s3: tuple[str, OpenerRegistry],
    seaweed: SeaweedServer,
    faulty_proxy: Callable[..., FaultyProxy],  # noqa: F811 - the fixture imported above
) -> None:
    """The workers read each batch with ``get_batch``: a proxy in front of the server counts
    the ranged GETs, fewer than one per sample (``ds[i]`` per sample takes exactly one each):
    samples near each other in a shard share one."""
    json_url, _ = on_s3
    proxy = faulty_proxy(int(seaweed.endpoint_url.rsplit(":", 1)[1]))
    registry = OpenerRegistry()
    registry.register("s3", S3Opener(make_config(proxy.url)), override=True)
    loader = make(json_url, registry)
    before = proxy.ranged_requests
    batches = list(loader)
    ranged = proxy.ranged_requests - before
    samples = sum(len(batch) for batch in batches)
    assert samples == SHARDS * PER_SHARD
    assert len(batches) <= ranged < samples
