"""The one backoff helper of every network read, driven by an injected clock (no real waiting)."""

from __future__ import annotations

import pytest

from wds_cloud.errors import ConfigError
from wds_cloud.openers.streams.backoff import Backoff, RetryPolicy, stall_bound


class FakeTime:
    """A clock that only moves when told to, and a sleep that moves it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _backoff(t: FakeTime, **policy: float) -> Backoff:
    return Backoff(RetryPolicy(**policy), clock=t.clock, sleep=t.sleep)  # type: ignore[arg-type]


def test_only_attempts_without_progress_count() -> None:
    t = FakeTime()
    b = _backoff(t, retries=2, backoff=0.0, stall_timeout=100)
    assert b.retry() is None
    assert b.retry() is None
    b.progress()  # a byte arrived: the count starts again
    assert b.retry() is None
    assert b.retry() is None
    assert b.retry() == "giving up after 2 retries without progress"


def test_delays_double_up_to_the_maximum() -> None:
    t = FakeTime()
    b = _backoff(t, retries=6, backoff=0.5, max_backoff=3.0, stall_timeout=100)
    for _ in range(5):
        assert b.retry() is None
    assert t.sleeps == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_the_stall_deadline_wins_over_the_retry_count() -> None:
    t = FakeTime()
    b = _backoff(t, retries=100, backoff=0.0, stall_timeout=10)
    t.now += 4  # each attempt times out after 4 s
    assert b.retry() is None
    t.now += 4
    assert b.retry() is None
    t.now += 4
    assert b.retry() == "stalled: no new data for 12.0 s (stall_timeout 10 s)"


def test_backoff_never_sleeps_past_the_deadline() -> None:
    t = FakeTime()
    b = _backoff(t, retries=5, backoff=8.0, max_backoff=60.0, stall_timeout=10)
    t.now = 7.0
    assert b.retry() is None
    assert t.sleeps == [3.0]


def test_skipped_bytes_keep_the_read_alive_but_are_not_progress() -> None:
    t = FakeTime()
    b = _backoff(t, retries=1, backoff=0.0, stall_timeout=10)
    t.now = 9.0
    b.touch()  # bytes re-read and skipped (an ETL re-request)
    t.now = 15.0
    assert b.retry() is None  # 6 s since those bytes: not stalled
    assert b.retry() == "giving up after 1 retries without progress"  # but no new byte


def test_read_timeout_is_clipped_to_the_stall_deadline() -> None:
    policy = RetryPolicy(stall_timeout=5)
    assert policy.read_timeout(20) == 5
    assert policy.read_timeout(2) == 2
    assert policy.read_timeout(None) == 5  # "no limit" still may not hang
    assert policy.read_timeout(0) == 5


def test_stall_bound_counts_one_connect_and_two_reads() -> None:
    assert stall_bound(60, 10, 20) == 110
    assert stall_bound(2, 10, 20) == 2 + 10 + 2 * 2
    assert stall_bound(60, 10, 0) == 60 + 10 + 2 * 60


@pytest.mark.parametrize("bad", [{"stall_timeout": 0}, {"retries": -1}, {"backoff": -1.0}])
def test_invalid_policies(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        RetryPolicy(**bad)  # type: ignore[arg-type]
