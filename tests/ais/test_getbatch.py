"""``AisOpener.read_batch`` (GetBatch) on the emulator and on the real cluster (``ais_backend``).

The same assertions on both: ranges in the order asked, equal to ``read_range``; a missing
object raises naming URL and offset or is skipped and counted; pieces. On the emulator only:
the answer cut at many points (its ``cut_after`` fault on ``/v1/ml/moss``) resumes from the
first incomplete entry; bad arguments; the requests it sends.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from tests.ais.backends import AisBackend
from wds_cloud.core.handlers import ContinueHandler
from wds_cloud.errors import ConfigError, ShardNotFoundError, ShardReadError
from wds_cloud.openers.ais.batch import BatchStats, pieces
from wds_cloud.openers.capabilities import RangeRequest

pytest.importorskip("aistore.sdk")


@pytest.fixture
def data(ais_backend: AisBackend) -> Iterator[tuple[AisBackend, dict[str, bytes]]]:
    rng = random.Random(11)
    bucket = ais_backend.create_bucket("gb")
    objects = {}
    for i, size in enumerate((1, 700, 5000, 70_000)):
        name = f"o/{i}.bin"
        objects[f"ais://{bucket}/{name}"] = payload = rng.randbytes(size)
        ais_backend.put_object(bucket, name, payload)
    yield ais_backend, objects


def _ranges(objects: dict[str, bytes], count: int, seed: int) -> list[RangeRequest]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        url = rng.choice(sorted(objects))
        size = len(objects[url])
        offset = rng.randrange(size)
        out.append(RangeRequest(url, offset, rng.randint(0, size - offset)))
    return out


def _expected(objects: dict[str, bytes], requests: list[RangeRequest]) -> list[bytes]:
    return [objects[r.url][r.offset : r.offset + r.length] for r in requests]


def test_ranges_in_order_equal_read_range(data: tuple[AisBackend, dict[str, bytes]]) -> None:
    backend, objects = data
    opener = backend.opener()
    requests = _ranges(objects, 500, seed=1)
    stats = BatchStats()
    got = opener.read_batch(requests, stats=stats)
    assert got == _expected(objects, requests)
    assert [opener.read_range(r.url, r.offset, r.length) for r in requests[:40]] == got[:40]
    assert stats.requests == 1 and stats.rereads == stats.resumes == 0


def test_missing_object_raises_or_is_skipped_and_counted(
    data: tuple[AisBackend, dict[str, bytes]],
) -> None:
    backend, objects = data
    opener = backend.opener()
    good = _ranges(objects, 12, seed=2)
    bucket = good[0].url.split("/")[2]
    missing = RangeRequest(f"ais://{bucket}/o/missing.bin", 42, 3)
    requests = [*good[:5], missing, *good[5:]]
    with pytest.raises(ShardReadError, match=r"o/missing\.bin") as info:
        opener.read_batch(requests)
    assert (info.value.url, info.value.offset) == (missing.url, 42)

    handler = ContinueHandler()
    got = opener.read_batch(requests, handler=handler)
    assert handler.count == 1 and got[5] == b""
    assert got[:5] + got[6:] == _expected(objects, good)

    # a bucket that does not exist: AIStore refuses the whole request; its entries are found
    # with a HEAD of each bucket, skipped (or raised), and the rest sent again
    gone = [RangeRequest(f"ais://no-such-bucket-gb/x{i}", i, 4) for i in range(2)]
    requests = [*good[:3], gone[0], *good[3:8], gone[1], *good[8:]]
    handler, stats = ContinueHandler(), BatchStats()
    got = opener.read_batch(requests, handler=handler, stats=stats)
    assert handler.count == stats.skipped == 2 and got[3] == got[9] == b""
    assert got[:3] + got[4:9] + got[10:] == _expected(objects, good)
    assert (stats.requests, stats.rereads) == (2, 0)
    with pytest.raises(ShardNotFoundError, match="no-such-bucket-gb") as gone_info:
        opener.read_batch(requests)
    assert (gone_info.value.url, gone_info.value.offset) == (gone[0].url, 0)


def test_a_batch_over_the_limits_is_sent_in_pieces(
    data: tuple[AisBackend, dict[str, bytes]],
) -> None:
    backend, objects = data
    requests = [r for r in _ranges(objects, 300, seed=3) if r.length]
    for overrides, expected_requests in (
        ({"batch_entries": 40}, -(-len(requests) // 40)),
        ({"batch_bytes": 50_000}, len(pieces([r.length for r in requests], 1000, 50_000))),
    ):
        stats = BatchStats()
        got = backend.opener(**overrides).read_batch(requests, stats=stats)
        assert got == _expected(objects, requests)
        assert stats.requests == expected_requests > 1
    if backend.emulator is not None:
        sent = [p for _, p, _, _ in backend.emulator.requests if p.startswith("/v1/ml/moss")]
        assert len(sent) == -(-len(requests) // 40) + expected_requests


@pytest.mark.emulator_only
@pytest.mark.parametrize("cut", [1, 511, 512, 1500, 20_000, 60_000, 150_000])
def test_an_answer_cut_resumes_from_the_first_incomplete_entry(
    data: tuple[AisBackend, dict[str, bytes]], cut: int
) -> None:
    backend, objects = data
    emu = backend.emulator
    assert emu is not None
    requests = [r for r in _ranges(objects, 80, seed=4) if r.length]
    emu.cut_after(cut, times=2, match="/v1/ml/moss")
    stats = BatchStats()
    got = backend.opener(retries=3).read_batch(requests, stats=stats)
    assert got == _expected(objects, requests)
    assert emu.pending_cuts() == 0
    assert stats.requests == 3 and stats.resumes + stats.rereads == 2
    bodies = [p for _, p, _, _ in emu.requests if p.startswith("/v1/ml/moss")]
    assert len(bodies) == 3


@pytest.mark.emulator_only
def test_a_range_past_the_end_is_read_again_and_named(
    data: tuple[AisBackend, dict[str, bytes]],
) -> None:
    backend, objects = data
    url = next(u for u, d in objects.items() if len(d) == 700)
    stats = BatchStats()
    with pytest.raises(ShardReadError, match="ends at byte 750") as info:
        backend.opener().read_batch(
            [RangeRequest(url, 0, 5), RangeRequest(url, 650, 100)], stats=stats
        )
    assert (info.value.url, info.value.offset) == (url, 650)
    assert stats.rereads == 1


@pytest.mark.emulator_only
def test_bad_arguments_are_config_errors(data: tuple[AisBackend, dict[str, bytes]]) -> None:
    backend, objects = data
    opener = backend.opener()
    url = sorted(objects)[0]
    with pytest.raises(ConfigError, match="offset and length must be >= 0"):
        opener.read_batch([RangeRequest(url, -1, 3)])
    with pytest.raises(ConfigError, match="inline ETL 'x'"):
        opener.read_batch([RangeRequest(url + "?etl=x", 0, 1)])
    with pytest.raises(ConfigError, match="unknown"):
        opener.read_batch([], missing="skip")
    assert opener.read_batch([]) == []
    assert opener.read_batch([RangeRequest(url, 0, 0)]) == [b""]  # answered without a request
    assert backend.emulator is not None and not backend.emulator.requests
