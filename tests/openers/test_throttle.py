"""The AIMD limiter of requests in flight (:mod:`wds_cloud.openers.streams.throttle`) and how
the one retry loop uses it: deterministic, fake fetches, fake clocks, no timing thresholds."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.openers.test_backoff import FakeTime
from wds_cloud.errors import ConfigError, ShardOpenError
from wds_cloud.openers.streams.backoff import Backoff, RetryPolicy
from wds_cloud.openers.streams.resumable import (
    Opened,
    ResumableReader,
    RetryableError,
    ThrottledError,
    read_span,
    transient_error,
)
from wds_cloud.openers.streams.throttle import (
    AimdLimiter,
    ThrottleConfig,
    limiter_for,
    limiters,
    retry_after_seconds,
)


class Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read1(self, n: int) -> bytes:
        out, self.data = self.data[:n], self.data[n:]
        return out

    def close(self) -> None:
        pass


class ThrottlingStore:
    """A fetch over ``data`` that answers "slow down" ``throttles`` times first; records how
    many slots of ``limiter`` were taken at each request."""

    def __init__(self, data: bytes, throttles: int, limiter: AimdLimiter | None = None) -> None:
        self.data = data
        self.left = throttles
        self.limiter = limiter
        self.in_flight_seen: list[int] = []

    def __call__(self, offset: int) -> Opened:
        if self.limiter is not None:
            self.in_flight_seen.append(self.limiter.in_flight)
        if self.left:
            self.left -= 1
            raise ThrottledError("503 SlowDown", retry_after=None)
        return Opened(Body(self.data[offset:]), offset, len(self.data))

    def span(self, first: int, end: int) -> Opened:
        self(first)  # the same answers as a streaming request
        return Opened(Body(self.data[first:end]), first)


# -- the controller --------------------------------------------------------------------------


def test_one_cut_per_round_however_many_answers_are_throttled() -> None:
    limiter = AimdLimiter(8, min=1, max=64)
    rounds = [limiter.acquire() for _ in range(6)]
    for taken in rounds:
        limiter.throttled(taken)
    assert limiter.limit == 4.0
    assert (limiter.throttles, limiter.cuts) == (6, 1)
    for _ in rounds:
        limiter.release()
    # requests sent after the cut and throttled cut again
    again = [limiter.acquire() for _ in range(4)]
    limiter.throttled(again[0])
    for _ in again:
        limiter.release()
    assert limiter.limit == 2.0
    assert limiter.lowest == 2.0
    assert limiter.rate is None  # the slots were what limited the requests: no pacing


def test_slots_are_cut_only_while_that_slows_the_requests_then_the_rate_is_paced() -> None:
    clock = FakeTime()
    limiter = AimdLimiter(16, min=3, max=32, clock=clock.clock, sleep=clock.sleep)
    taken = [limiter.acquire() for _ in range(9)]
    limiter.throttled(taken[0])  # 9 in flight, a cut to 8 slows them: slots
    assert (limiter.limit, limiter.rate) == (8.0, None)
    for _ in taken:
        limiter.release()
    lone = limiter.acquire()  # one request: cutting slots would not slow it
    limiter.throttled(lone)
    limiter.release()
    assert limiter.limit == 8.0 and limiter.rate is not None
    floor = AimdLimiter(4, min=3, max=8, clock=clock.clock, sleep=clock.sleep)
    for _ in range(12):  # the cut would go below min: the rate, down to min_rate
        taken_now = floor.acquire()
        floor.throttled(taken_now)
        floor.release()
    assert floor.limit == 4.0 and floor.rate == floor.min_rate


def test_additive_increase_one_slot_per_round_only_while_every_slot_is_taken() -> None:
    limiter = AimdLimiter(2, min=1, max=3)
    # not the bottleneck: one request at a time never grows the limit
    for _ in range(10):
        limiter.acquire()
        limiter.accept()
        limiter.release()
    assert limiter.limit == 2.0
    # every slot taken: each answer adds 1/limit (one slot per round of answers)
    limiter.acquire()
    limiter.acquire()
    limiter.accept()
    assert limiter.limit == 2.5
    assert limiter.allowed() == 3  # rounded up: a third request may go
    limiter.accept()  # two of three slots taken: no growth
    assert limiter.limit == 2.5
    limiter.acquire()
    limiter.accept()
    assert limiter.limit == pytest.approx(2.5 + 1 / 2.5)
    for _ in range(3):
        limiter.release()
    for _ in range(20):  # capped at max
        for _ in range(limiter.allowed()):
            limiter.acquire()
        for _ in range(limiter.in_flight):
            limiter.accept()
        for _ in range(limiter.in_flight):
            limiter.release()
    assert limiter.limit == 3.0
    assert limiter.highest == 3.0


def test_acquire_waits_for_a_released_slot() -> None:
    limiter = AimdLimiter(1, min=1, max=1)
    limiter.acquire()
    got = threading.Event()

    def second() -> None:
        limiter.acquire()
        got.set()

    thread = threading.Thread(target=second)
    thread.start()
    assert not got.wait(0.2)  # the only slot is taken
    limiter.release()
    assert got.wait(10)
    thread.join()
    assert limiter.in_flight == 1


def test_limiter_arguments_are_checked() -> None:
    with pytest.raises(ConfigError, match="min <= initial <= max"):
        AimdLimiter(1, min=2, max=4)
    with pytest.raises(ConfigError, match="decrease"):
        AimdLimiter(2, decrease=1.0)
    with pytest.raises(ConfigError, match="rate_decrease=0"):
        AimdLimiter(2, rate_decrease=0.0)
    with pytest.raises(ConfigError, match="min_rate=-1"):
        AimdLimiter(2, min_rate=-1.0)


# -- settings --------------------------------------------------------------------------------


def test_settings_from_the_environment() -> None:
    env = {
        "WDS_CLOUD_THROTTLE_INITIAL": "5",
        "WDS_CLOUD_THROTTLE_MIN": "2",
        "WDS_CLOUD_THROTTLE_MAX": "9",
        "WDS_CLOUD_THROTTLE_DECREASE": "0.75",
        "WDS_CLOUD_THROTTLE_RATE_DECREASE": "0.8",
        "WDS_CLOUD_THROTTLE_MIN_RATE": "0.25",
    }
    cfg = ThrottleConfig().resolved(env)
    assert (cfg.enabled, cfg.initial, cfg.min, cfg.max, cfg.decrease) == (True, 5, 2, 9, 0.75)
    assert (cfg.rate_decrease, cfg.min_rate) == (0.8, 0.25)
    limiter = limiter_for("http://settings.test:1/x", env)
    assert limiter is not None
    assert (limiter.limit, limiter.min, limiter.max, limiter.decrease) == (5.0, 2, 9, 0.75)
    assert (limiter.rate_decrease, limiter.min_rate, limiter.rate) == (0.8, 0.25, None)
    # one limiter per host, shared by every URL of it
    assert limiter_for("http://SETTINGS.test:1/other", env) is limiter
    assert limiters()["http://settings.test:1"] is limiter
    # other settings: a new limiter
    assert limiter_for("http://settings.test:1/x", {}) is not limiter


@pytest.mark.parametrize("value", ["0", "false", "off"])
def test_throttle_0_switches_it_off(value: str) -> None:
    assert limiter_for("http://off.test", {"WDS_CLOUD_THROTTLE": value}) is None
    assert limiter_for("http://off.test", {"WDS_CLOUD_THROTTLE_ENABLED": value}) is None


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"WDS_CLOUD_THROTTLE_MIN": "0"}, "WDS_CLOUD_THROTTLE_MIN='0' must be at least 1"),
        ({"WDS_CLOUD_THROTTLE_INITIAL": "x"}, "WDS_CLOUD_THROTTLE_INITIAL"),
        ({"WDS_CLOUD_THROTTLE_DECREASE": "1.5"}, "WDS_CLOUD_THROTTLE_DECREASE='1.5' must be < 1"),
        ({"WDS_CLOUD_THROTTLE_RATE_DECREASE": "1"}, "WDS_CLOUD_THROTTLE_RATE_DECREASE='1' must"),
        ({"WDS_CLOUD_THROTTLE_MIN_RATE": "0"}, "WDS_CLOUD_THROTTLE_MIN_RATE='0' must be"),
        ({"WDS_CLOUD_THROTTLE_MAX": "4", "WDS_CLOUD_THROTTLE_INITIAL": "8"}, "min <= initial"),
        ({"WDS_CLOUD_THROTTLE": "maybe"}, "WDS_CLOUD_THROTTLE"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ThrottleConfig().resolved(env)


def test_retry_after_seconds() -> None:
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds(" 0.5 ") == 0.5
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") is None
    assert retry_after_seconds("-1") is None
    assert retry_after_seconds(None) is None


def test_transient_error_kinds() -> None:
    assert isinstance(transient_error("x", 503, 1.0), ThrottledError)
    assert transient_error("x", 429, 1.0).retry_after == 1.0  # type: ignore[attr-defined]
    for status in (500, 502, 504, None):
        error = transient_error("x", status)
        assert isinstance(error, RetryableError) and not isinstance(error, ThrottledError)


# -- the backoff of throttled attempts ---------------------------------------------------------


def test_throttled_attempts_do_not_use_up_retries() -> None:
    clock = FakeTime()
    backoff = Backoff(
        RetryPolicy(retries=1, backoff=0.1, max_backoff=0.4), clock=clock.clock, sleep=clock.sleep
    )
    for _ in range(6):
        assert backoff.throttled() is None
    assert backoff.failures == 0
    assert clock.sleeps == [0.1, 0.2, 0.4, 0.4, 0.4, 0.4]
    backoff.progress()
    assert backoff.throttled(retry_after=3.0) is None  # Retry-After wins, past max_backoff
    assert clock.sleeps[-1] == 3.0


def test_a_paced_throttled_attempt_waits_for_a_slot_not_a_backoff() -> None:
    clock = FakeTime()
    backoff = Backoff(RetryPolicy(backoff=0.1), clock=clock.clock, sleep=clock.sleep)
    assert backoff.throttled(paced=True) is None
    assert backoff.throttled(paced=True) is None
    assert clock.sleeps == []
    assert backoff.throttled(retry_after=0.7, paced=True) is None  # Retry-After still honoured
    assert backoff.throttled(paced=False) is None  # at the limiter's minimum: the backoff
    assert clock.sleeps == [0.7, 0.1 * 2]  # the paced attempts did not double it


def test_the_limiter_paces_while_every_slot_is_taken_or_while_pacing_the_rate() -> None:
    clock = FakeTime()
    limiter = AimdLimiter(8, min=1, max=16, clock=clock.clock, sleep=clock.sleep)
    held = [limiter.acquire() for _ in range(6)]
    assert not limiter.paces()  # a retry would leave a slot free: it must wait in time
    held.append(limiter.acquire())
    assert limiter.paces()  # a retry takes the last free slot
    limiter.throttled(held[-1])
    assert limiter.limit == 4.0 and limiter.paces()
    for _ in range(6):
        limiter.release()
    assert not limiter.paces()  # one in flight of four slots
    limiter.throttled(limiter.acquire())  # taken after the cut, two in flight: a cut to
    assert limiter.limit == 4.0 and limiter.rate is not None  # 2 would not slow them
    assert limiter.paces()  # the retry waits for its start


class Crowded(AimdLimiter):
    """Three other requests hold slots until the throttled one asks for a slot again."""

    others = 3

    def acquire(self) -> int:
        if self.throttles and self.others:
            for _ in range(self.others):
                self.release()
            self.others = 0
        return super().acquire()


def test_a_crowded_throttled_read_waits_for_a_slot_not_a_backoff() -> None:
    data = b"c" * 500
    limiter = Crowded(4, min=1, max=4)
    for _ in range(3):
        limiter.acquire()
    store = ThrottlingStore(data, throttles=1, limiter=limiter)
    clock = FakeTime()
    with _reader(store, limiter, clock).start() as reader:
        assert reader.read() == data
    assert clock.sleeps == []  # the cut (4 -> 2) left no free slot: it waited for one
    assert limiter.cuts == 1


def test_a_lone_or_minimal_throttled_read_waits_for_its_paced_start() -> None:
    data = b"m" * 500
    for initial in (1, 16):
        clock = FakeTime()
        limiter = AimdLimiter(initial, min=1, max=16, clock=clock.clock, sleep=clock.sleep)
        store = ThrottlingStore(data, throttles=3, limiter=limiter)
        with _reader(store, limiter, clock).start() as reader:
            assert reader.read() == data
        # no backoff (0.1, 0.2, 0.4): the rate is paced. The first answer measured 10
        # answers a second (one in the first tenth): 0.7 of it; each retry waited for its
        # start, and was refused at that rate: 0.7 of it again
        assert clock.sleeps == pytest.approx([1 / 7, 1 / 4.9, 1 / 3.43])
        assert limiter.lowest_rate == pytest.approx(3.43)
        assert limiter.limit == initial and limiter.cuts == 3


def test_the_stall_deadline_ends_a_throttled_read() -> None:
    clock = FakeTime()
    policy = RetryPolicy(retries=1, backoff=1.0, max_backoff=1.0, stall_timeout=5.0)
    backoff = Backoff(policy, clock=clock.clock, sleep=clock.sleep)
    reasons = [backoff.throttled() for _ in range(7)]
    assert reasons[:5] == [None] * 5
    assert reasons[5] is not None and "throttled" in reasons[5] and "stall_timeout 5" in reasons[5]


# -- the retry loop with a limiter --------------------------------------------------------------


def _reader(
    store: ThrottlingStore, limiter: AimdLimiter | None, clock: FakeTime, **kw: Any
) -> ResumableReader:
    return ResumableReader(
        store,
        url="s3://b/shard.tar",
        policy=RetryPolicy(retries=2, backoff=0.1, max_backoff=1.0),
        clock=clock.clock,
        sleep=clock.sleep,
        limiter=limiter,
        **kw,
    )


def test_a_throttled_read_is_retried_by_the_loop_and_reads_every_byte_once() -> None:
    data = bytes(range(256)) * 40
    clock = FakeTime()
    limiter = AimdLimiter(8, min=1, max=16, clock=clock.clock, sleep=clock.sleep)
    store = ThrottlingStore(data, throttles=6, limiter=limiter)
    with _reader(store, limiter, clock).start() as reader:
        assert reader.read() == data
    assert limiter.throttles == 6
    assert limiter.cuts == 6  # every request after a cut starts a new round
    assert limiter.lowest_rate == pytest.approx(7 * 0.7**5)  # a lone request: the rate, cut
    assert limiter.in_flight == 0  # every slot given back
    # the slot was given back before each retry: one request in flight at a time
    assert store.in_flight_seen == [1] * 7


def test_without_a_limiter_throttling_counts_against_retries() -> None:
    store = ThrottlingStore(b"x" * 100, throttles=6)
    clock = FakeTime()
    with pytest.raises(ShardOpenError, match=r"giving up after 2 retries.*SlowDown"):
        _reader(store, None, clock).start()


def test_streaming_reader_gives_its_slot_back_when_the_answer_arrives() -> None:
    limiter = AimdLimiter(1, min=1, max=1)
    store = ThrottlingStore(b"y" * 1000, throttles=0, limiter=limiter)
    clock = FakeTime()
    first = _reader(store, limiter, clock).start()
    assert limiter.in_flight == 0  # the consumer reads at its own pace: no slot held
    second = _reader(store, limiter, clock).start()  # does not wait for the first
    assert first.read(10) == b"y" * 10
    first.close()
    second.close()


def test_held_slot_is_given_back_at_the_end_and_on_close() -> None:
    limiter = AimdLimiter(2, min=1, max=2)
    store = ThrottlingStore(b"z" * 1000, throttles=0, limiter=limiter)
    clock = FakeTime()
    reader = _reader(store, limiter, clock, hold=True, size=1000).start()
    assert limiter.in_flight == 1
    assert reader.read(1000) == b"z" * 1000
    assert reader.read(1) == b""
    assert limiter.in_flight == 0
    reader.close()
    other = _reader(store, limiter, clock, hold=True, size=1000).start()
    assert limiter.in_flight == 1
    other.close()
    assert limiter.in_flight == 0


def test_read_span_holds_a_slot_and_survives_throttling() -> None:
    data = bytes(range(200))
    limiter = AimdLimiter(4, min=1, max=4)
    store = ThrottlingStore(data, throttles=3, limiter=limiter)
    got = read_span(
        store.span,
        url="gs://b/o",
        offset=10,
        length=50,
        policy=RetryPolicy(retries=0, backoff=0.0),
        limiter=limiter,
    )
    assert got == data[10:60]
    assert limiter.in_flight == 0
    assert limiter.throttles == 3


def test_a_failure_that_is_not_throttling_still_gives_up() -> None:
    limiter = AimdLimiter(4)
    clock = FakeTime()

    def broken(offset: int) -> Opened:
        raise ConnectionResetError("reset")

    reader = ResumableReader(
        broken,
        url="http://h/x",
        policy=RetryPolicy(retries=1, backoff=0.1),
        clock=clock.clock,
        sleep=clock.sleep,
        limiter=limiter,
        hold=True,
    )
    with pytest.raises(ShardOpenError, match="giving up after 1 retries"):
        reader.start()
    assert limiter.in_flight == 0
    assert limiter.limit == 4.0  # a reset is not a "slow down"


def test_without_throttling_answers_the_limiter_never_drops_below_its_start() -> None:
    limiter = AimdLimiter(3, min=1, max=8)
    clock = FakeTime()
    for i in range(50):
        store = ThrottlingStore(bytes([i]) * 300, throttles=0, limiter=limiter)
        with _reader(store, limiter, clock, hold=True).start() as reader:
            assert reader.read() == bytes([i]) * 300
    assert limiter.lowest == 3.0
    assert limiter.limit >= 3.0
    assert limiter.cuts == 0


def test_a_short_body_mid_read_is_not_throttling() -> None:
    data = b"q" * 100

    class Short:
        calls = 0

        def __call__(self, offset: int) -> Opened:
            Short.calls += 1
            body = data[offset:] if Short.calls > 1 else data[offset:40]
            return Opened(Body(body), offset, len(data))

    limiter = AimdLimiter(2)
    clock = FakeTime()
    reader = ResumableReader(
        Short(),
        url="ais://b/o",
        size=100,
        clock=clock.clock,
        sleep=clock.sleep,
        limiter=limiter,
        hold=True,
    ).start()
    assert reader.read(100) == data
    reader.close()
    assert limiter.cuts == 0 and limiter.in_flight == 0
    with pytest.raises(ValueError):
        reader.read(1)
