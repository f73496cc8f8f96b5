"""Gap ranges of a resumed s3:// shard, fetched several at a time, against the local file."""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import pytest

from tests.resume.helpers import shard_bytes
from wds_cloud.core.handlers import ContinueHandler
from wds_cloud.core.shardopen import ShardOpener
from wds_cloud.errors import ShardNotFoundError
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.s3.opener import S3Opener
from wds_cloud.resume import reader
from wds_cloud.resume.state import WorkItem

pytestmark = [pytest.mark.s3]


def _extents(data: bytes) -> list[tuple[int, int]]:
    """The byte extent of every sample, from the reader itself over the whole shard."""
    return [ids[0][1:3] for _, ids in reader.samples_with_positions(io.BytesIO(data), "x")]


def _read(item: WorkItem, opener: ShardOpener, **kw: Any) -> list[tuple[str, int, int]]:
    return [(s["__key__"], i[0][1], i[0][2]) for s, i in reader.read_item(item, opener, **kw)]


def test_many_gaps_read_over_s3_equal_the_local_file(
    s3_config: Any, raw_client: Any, bucket: str, tmp_path: Path
) -> None:
    registry = OpenerRegistry()
    registry.register("s3", S3Opener(s3_config), override=True)
    s3 = ShardOpener(registry)
    local = ShardOpener()
    rng = random.Random(5)
    for n in range(6):
        data, _ = shard_bytes(n, rng.randint(90, 160), payload=rng.randint(10, 3000))
        raw_client.put_object(Bucket=bucket, Key=f"g/{n}.tar", Body=data)
        path = tmp_path / f"{n}.tar"
        path.write_bytes(data)
        extents = _extents(data)
        # gaps of one to three samples between delivered ones, more than RANGE_READS * 2
        ranges, i = [], rng.randint(0, 2)
        while i < len(extents) - 4:
            j = i + rng.randint(1, 3)
            ranges.append((extents[i][0], extents[j - 1][1]))
            i = j + rng.randint(1, 2)
        tail = None if n % 2 else extents[min(i, len(extents) - 1)][0]
        item_s3 = WorkItem(f"s3://{bucket}/g/{n}.tar", tuple(ranges), tail)
        item_local = WorkItem(str(path), tuple(ranges), tail)
        got = _read(item_s3, s3)
        assert len(ranges) > 2 * reader.RANGE_READS
        assert [g[1:] for g in got] == [g[1:] for g in _read(item_local, local)]
        assert [g[0] for g in got] == [g[0] for g in _read(item_local, local)]
        assert all(any(a <= g[1] < b for a, b in ranges) or g[1] >= (tail or 1 << 62) for g in got)


def test_a_failed_gap_read_goes_to_the_handler(s3_config: Any, bucket: str) -> None:
    registry = OpenerRegistry()
    registry.register("s3", S3Opener(s3_config, retries=0), override=True)
    opener = ShardOpener(registry)
    item = WorkItem(
        f"s3://{bucket}/missing.tar", tuple((k * 1024, k * 1024 + 512) for k in range(30))
    )
    with pytest.raises(ShardNotFoundError):
        _read(item, opener)
    handler = ContinueHandler()
    assert _read(item, opener, handler=handler) == []
    assert handler.count == 1  # the first failure stops the item: no other read is reported
