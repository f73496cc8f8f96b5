"""Pacing the request rate (:class:`~wds_cloud.openers.streams.throttle.AimdLimiter` once
cutting slots no longer slows the requests): deterministic, on an injected clock.

The controller is checked step by step (starts spaced by the rate, one cut per round, the
floor, ``Retry-After``, growth back to just under the ceiling, the end of pacing), then in a
discrete-event simulation against a store that answers "slow down" above R requests a second
with a token bucket (as :mod:`tests.support.throttle_proxy` does): readers that always have a
request to send hold at least 0.9 R in simulated time, in the regimes where counting requests
in flight alone cannot (one request at a time is already above R).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque

import pytest

from tests.openers.test_backoff import FakeTime
from wds_cloud.openers.streams.throttle import AimdLimiter


def _limiter(clock: FakeTime, initial: int = 4, min_rate: float = 1.0) -> AimdLimiter:
    return AimdLimiter(
        initial, min=1, max=64, min_rate=min_rate, clock=clock.clock, sleep=clock.sleep
    )


def _pace(limiter: AimdLimiter, clock: FakeTime) -> None:
    """Start pacing: one lone request throttled."""
    taken = limiter.acquire()
    limiter.throttled(taken)
    limiter.release()
    assert limiter.rate is not None


def test_no_pacing_and_no_waiting_without_throttling_answers() -> None:
    clock = FakeTime()
    limiter = _limiter(clock)
    for _ in range(100):
        taken = limiter.acquire()
        limiter.accept()
        limiter.release()
        clock.now += 0.001
    assert limiter.rate is None and limiter.lowest_rate is None and taken == 0
    assert clock.sleeps == []


def test_paced_starts_are_spaced_by_the_rate_and_nothing_is_reserved() -> None:
    clock = FakeTime()
    limiter = _limiter(clock, initial=8)
    for _ in range(20):  # 20 answers in 1 s
        limiter.acquire()
        limiter.accept()
        limiter.release()
        clock.now += 0.05
    _pace(limiter, clock)  # 21 answers over the last second: 0.7 x 21 = 14.7/s
    assert limiter.ceiling == pytest.approx(21.0)
    assert limiter.rate == pytest.approx(14.7)
    taken, when = limiter.attempt()
    assert taken is None and when == pytest.approx(clock.now + 1 / 14.7)
    assert limiter.in_flight == 0  # a waiting request holds no slot
    starts = []
    for _ in range(3):
        limiter.acquire()
        starts.append(clock.now)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps == pytest.approx([1 / 14.7] * 2)


def test_one_rate_cut_per_round_down_to_min_rate() -> None:
    clock = FakeTime()
    limiter = _limiter(clock, min_rate=2.0)
    _pace(limiter, clock)
    cuts = limiter.cuts
    first = limiter.acquire()
    second = limiter.acquire()
    limiter.throttled(first)
    limiter.throttled(second)  # sent in the same round: no second cut
    assert limiter.cuts == cuts + 1
    for _ in range(2):
        limiter.release()
    for _ in range(10):
        _pace(limiter, clock)
    assert limiter.rate == limiter.lowest_rate == 2.0


def test_retry_after_holds_every_start_of_the_endpoint() -> None:
    clock = FakeTime()
    limiter = _limiter(clock, initial=8)
    held = [limiter.acquire() for _ in range(6)]
    limiter.throttled(held[0], retry_after=2.5)  # a slot cut (six in flight), no pacing
    for _ in held:
        limiter.release()
    assert limiter.rate is None
    limiter.acquire()
    assert clock.now == pytest.approx(2.5) and clock.sleeps == pytest.approx([2.5])


def test_the_rate_grows_back_to_just_under_the_ceiling_then_probes() -> None:
    clock = FakeTime()
    limiter = _limiter(clock, initial=8)
    for _ in range(40):  # 40 answers a second
        limiter.acquire()
        limiter.accept()
        limiter.release()
        clock.now += 0.025
    _pace(limiter, clock)
    # the fresh rate doubles a second until the store says "slow down": cut it while paced
    for _ in range(10):
        limiter.acquire()
        limiter.accept()
        limiter.release()
    taken = limiter.acquire()
    limiter.throttled(taken)
    limiter.release()
    ceiling = limiter.ceiling
    assert limiter.rate == pytest.approx(0.7 * ceiling)
    cut_at = clock.now
    rates = []
    while clock.now < cut_at + 2.0:  # two seconds of accepted answers at the paced rate
        limiter.acquire()
        limiter.accept()
        limiter.release()
        assert limiter.rate is not None
        rates.append((clock.now - cut_at, limiter.rate))
    assert [r for _, r in rates] == sorted(r for _, r in rates)  # no cut: it only grows
    seconds, reached = next((t, r) for t, r in rates if r >= 0.95 * ceiling)
    assert seconds < 1.5 and reached < ceiling  # back to just under the ceiling
    assert rates[-1][1] < 1.2 * ceiling  # and then slowly above it (probing)


def test_pacing_ends_when_the_rate_is_twice_what_is_granted() -> None:
    clock = FakeTime()
    limiter = _limiter(clock)
    _pace(limiter, clock)
    while limiter.rate is not None:  # a reader that asks once a second
        clock.now += 1.0
        limiter.acquire()
        limiter.accept()
        limiter.release()
        assert clock.now < 60
    assert limiter.cuts == 1


class TokenBucketStore:
    """Discrete-event simulation: ``readers`` each send one request after the other through
    ``limiter``; the store lets ``rate`` a second through a bucket of ``burst`` (as the
    throttle proxy) and answers after ``latency`` seconds, a "slow down" after 1 ms. A
    throttled request is sent again when the limiter paces, else after the read loop's
    backoff (0.2 s doubling, as ``RetryPolicy``'s default)."""

    def __init__(self, rate: float, burst: float, latency: float, readers: int) -> None:
        self.rate, self.burst, self.latency = rate, burst, latency
        self.now = 0.0
        self.tokens, self.stamp = burst, 0.0
        self.limiter = AimdLimiter(64, clock=lambda: self.now, sleep=self._no_sleep)
        self.events: list[tuple[float, int, str, int, object]] = []
        self.seq = 0
        self.waiting: deque[int] = deque()
        self.backoffs = [0] * readers
        self.accepted = self.throttled = 0
        for reader in range(readers):
            self._at(0.0, "want", reader, False)

    @staticmethod
    def _no_sleep(seconds: float) -> None:
        raise AssertionError("the simulation waits by events")

    def _at(self, when: float, kind: str, reader: int, data: object) -> None:
        self.seq += 1
        heapq.heappush(self.events, (when, self.seq, kind, reader, data))

    def _admit(self) -> bool:
        self.tokens = min(self.burst, self.tokens + (self.now - self.stamp) * self.rate)
        self.stamp = self.now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

    def run(self, seconds: float) -> float:
        """Accepted requests a second over ``seconds``, as a share of ``rate``."""
        limiter = self.limiter
        while self.events and self.events[0][0] <= seconds:
            self.now, _, kind, reader, data = heapq.heappop(self.events)
            if kind == "want":
                taken, when = limiter.attempt(bool(data))
                if taken is None:
                    if when:
                        self._at(when, "want", reader, True)
                    else:
                        self.waiting.append(reader)
                elif self._admit():
                    self._at(self.now + self.latency, "answer", reader, (taken, True))
                else:
                    self._at(self.now + 0.001, "answer", reader, (taken, False))
                continue
            assert isinstance(data, tuple)
            taken, ok = data
            if ok:
                self.accepted += 1
                self.backoffs[reader] = 0
                limiter.accept()
                limiter.release()
                self._at(self.now, "want", reader, False)
            else:
                self.throttled += 1
                limiter.throttled(taken)
                limiter.release()
                if limiter.paces():
                    self._at(self.now, "want", reader, False)
                else:
                    self.backoffs[reader] += 1
                    delay = min(0.2 * 2 ** (self.backoffs[reader] - 1), 5.0)
                    self._at(self.now + delay, "want", reader, False)
            while self.waiting and limiter.in_flight < limiter.allowed():
                self._at(self.now, "want", self.waiting.popleft(), False)
        return self.accepted / seconds / self.rate


@pytest.mark.parametrize(
    ("rate", "burst", "latency", "readers"),
    [
        (25, 2, 0.028, 16),  # bench_throttle's harsh cell: one request at a time is > R
        (25, 2, 0.028, 1),  # one reader
        (5, 2, 0.028, 16),
        (2, 2, 0.02, 4),
        (25, 2, 0.1, 64),  # a far store: 2 in flight < R < 3 in flight
        (50, 10, 0.025, 16),  # bench_throttle's default cell
        (200, 40, 0.02, 32),
    ],
)
def test_readers_hold_090_of_a_token_bucket_store(
    rate: float, burst: float, latency: float, readers: int
) -> None:
    store = TokenBucketStore(rate, burst, latency, readers)
    share = store.run(60.0)
    assert share >= 0.9, (share, store.limiter)
    assert store.throttled < 3 * 60  # converged: a "slow down" now and then, not a storm
