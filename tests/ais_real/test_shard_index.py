"""AIStore's shard index and GetBatch ``archpath`` entries on the real AIStore 5.0 cluster.

What docs/aistore.md ("archpath and AIStore's shard index") tells users: the index is built by
the ``index-shard`` bucket action (``ais bucket shard-index build``, or one plain
``POST /v1/buckets/<bucket>`` as here: SDK 2.0.0 has no call for it; where it lands,
``ais://.sys-shardidx``, is not checked: see the test), GetBatch ``archpath`` entries give the same bytes as the byte ranges
``AisOpener.read_batch`` sends (with and without the index), and a member not in the shard
comes back as an empty ``__404__/`` entry under ``coer``; a shard rewritten after its index was
built is read right (the stale index is not used).
"""

from __future__ import annotations

import io
import random
import tarfile
import uuid
from typing import Any

import pytest

from tests.servers.aistore import Cluster
from tests.support.tarbuild import tar_bytes
from wds_cloud.openers.ais import AisOpener
from wds_cloud.openers.capabilities import RangeRequest

aistore_sdk = pytest.importorskip("aistore.sdk")

pytestmark = [pytest.mark.ais, pytest.mark.timeout(600)]
SHARD = "shards/shard-0.tar"


def _archpath_batch(client: Any, bucket: str, names: list[str]) -> list[tuple[str, bytes]]:
    """(member name, bytes) of one GetBatch request of ``archpath`` entries, in order."""
    batch = client.batch(cont_on_err=True, streaming_get=True)
    for name in names:
        batch.add(SHARD, bck=bucket, provider="ais", archpath=name)
    resp = batch.get(raw=True)
    body = getattr(resp, "raw", resp).read()
    out = []
    with tarfile.open(fileobj=io.BytesIO(body), mode="r|") as tar:
        for member in tar:
            f = tar.extractfile(member) if member.isfile() else None
            out.append((member.name, f.read() if f is not None else b""))
    return out


def _build_shard_index(client: Any, bucket: str) -> None:
    resp = client.bucket(bucket).make_request("POST", "index-shard", value={"prefix": "shards/"})
    xid = resp.text.strip().strip('"')
    assert xid, resp.text
    client.job(job_id=xid, job_kind="index-shard").wait(timeout=120, verbose=False)


def test_archpath_members_equal_the_ranges_with_and_without_a_shard_index(
    ais_cluster: Cluster,
) -> None:
    client = aistore_sdk.Client(ais_cluster.endpoint, timeout=(2, 60))
    bucket_name = f"shardidx-{uuid.uuid4().hex[:6]}"
    bucket = client.bucket(bucket_name).create()
    rng = random.Random(25)
    members = [
        (f"s{i:04d}.{ext}", rng.randbytes(rng.randint(1, 5000)))
        for i in range(60)
        for ext in ("jpg", "cls", "json")
    ]
    shard = tar_bytes(members)
    bucket.object(SHARD).get_writer().put_content(shard)
    with tarfile.open(fileobj=io.BytesIO(shard)) as tar:
        spans = {m.name: (m.offset_data, m.size) for m in tar.getmembers()}
    picked = rng.sample(members, 40)
    names = [name for name, _ in picked]
    url = f"ais://{bucket_name}/{SHARD}"
    opener = AisOpener(endpoint=ais_cluster.endpoint, token=None, timeout=(3, 60))

    ranges = opener.read_batch([RangeRequest(url, *spans[n]) for n in names])
    assert ranges == [data for _, data in picked]
    before = _archpath_batch(client, bucket_name, [*names, "absent.jpg"])
    _build_shard_index(client, bucket_name)
    after = _archpath_batch(client, bucket_name, names)

    expected = [(f"{bucket_name}/{SHARD}/{n}", data) for n, data in zip(names, ranges, strict=True)]
    assert before[:-1] == expected
    assert before[-1] == (f"__404__/{bucket_name}/{SHARD}/absent.jpg", b"")
    assert after == expected
    # Not checked: that the index object exists in ``.sys-shardidx``. In full-suite runs it was
    # not listed within 30 s after the job finished (3 of 5 runs, also on a fresh cluster);
    # alone it usually is. wds_cloud does not use the shard index (ranges: docs/aistore.md).

    # the shard rewritten after its index was built: the stale index is not used
    rewritten = [(name, data[::-1] + b"x") for name, data in members]
    bucket.object(SHARD).get_writer().put_content(tar_bytes(rewritten))
    stale = _archpath_batch(client, bucket_name, names)
    assert stale == [(f"{bucket_name}/{SHARD}/{n}", d[::-1] + b"x") for n, d in picked]
