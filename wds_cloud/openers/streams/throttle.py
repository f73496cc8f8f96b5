"""Backing off when a server says "slow down": one AIMD limiter per endpoint, of the requests
in flight and, when that is not enough, of the requests started a second.

Every backend translates its throttling answers into :class:`ThrottledError` (a
:class:`~wds_cloud.openers.streams.resumable.RetryableError`): S3 ``SlowDown`` (and the other
throttling codes) and 503, GCS 429 and 503, AIStore 429 and 503, HTTP 429 and 503, with the
answer's ``Retry-After`` when it has one. The one retry loop
(:class:`~wds_cloud.openers.streams.resumable.ResumableReader`) and AIStore's GetBatch
(:mod:`wds_cloud.openers.ais.batch`) read through an :class:`AimdLimiter` shared by every
reader of the same endpoint in the process:

- **Slots.** A request takes a slot before it is sent and gives it back when its answer has
  been read (parallel ranged reads, batch reads: readers driven by a worker thread) or when the
  answer's headers arrived (a stream the consumer reads at its own pace, such as the next shard
  opened early by read-ahead), so slots never wait on the consumer.
- **Multiplicative decrease, at most once per round**: answers to requests sent before the
  last decrease do not cut again (the TCP rule), so a burst of 503s from one round is one cut.
  A cut multiplies the slots by ``decrease`` (0.5) while that slows the requests: more are in
  flight than the cut leaves, and it leaves at least two. Otherwise (a lone reader, a store
  that allows fewer requests a second than one or two connections make) the cut paces the
  **rate**: the first one starts pacing at ``rate_decrease`` (0.7) times the answers a second
  of the last second; each later one sets the ceiling to the paced rate (when requests were
  waiting for their start: that rate was refused) or else to the rate the store granted (its
  accepted answers a second over the last second, no more than the paced rate), and the rate
  to ``rate_decrease`` times the ceiling, never below ``min_rate``.
- **Pacing.** A request starts only when the clock reaches the next start (the last one plus
  ``1 / rate``; nothing is reserved ahead, so a cut applies at once) and after any
  ``Retry-After`` of the endpoint. Nothing is paced until the first such cut: without
  throttling answers the limiter only takes and gives back slots and counts the answers (one
  clock read each).
- **Additive increase.** Not pacing: each accepted request while every slot is taken adds
  ``1 / limit``, one slot per round (the slots are the limit rounded up); a limit that is not
  the bottleneck does not grow. Pacing: the rate closes its gap to 0.95 of the ceiling within
  about a second (3 times the gap a second), then grows by 10 % a second (doubling each second
  without a cut) to probe for more; until the first cut while pacing it grows fourfold a
  second. So it settles just under what the store grants. The slots then grow only while
  requests do not wait for their start, and pacing ends after 10 s without a cut once the
  rate is twice what the store granted over the last second (the rate no longer limits the
  requests).
- **Throttled is not failed.** The throttled request gives its slot back and is sent again by
  the same loop: without a backoff while pacing (it waits for its start) or while its retry
  leaves no slot free (the cut limit spaces the requests), else after the retry policy's
  backoff, and never before the answer's ``Retry-After``. It does not use up ``retries``; only
  the stall deadline (``stall_timeout`` without a new byte) bounds it, so a throttled shard is
  read whole, late, never skipped or read twice.

Settings (:data:`THROTTLE_SETTINGS`; ``WDS_CLOUD_THROTTLE`` = ``0`` switches it off, and the
retry loop then treats throttling answers as any other failure), read when a reader is made:
``WDS_CLOUD_THROTTLE_INITIAL`` (64), ``..._MIN`` (1), ``..._MAX`` (512) slots,
``..._DECREASE`` (0.5), ``..._RATE_DECREASE`` (0.7), ``..._MIN_RATE`` (1 request a second).
See ``docs/openers.md`` ("Throttling").
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from wds_cloud.errors import ConfigError
from wds_cloud.openers.clients import ProcessLocal
from wds_cloud.settings import BOOL, INT, ConfigTable, Field, Kind, above, at_least, parse_float

__all__ = [
    "THROTTLE_SETTINGS",
    "AimdLimiter",
    "ThrottleConfig",
    "limiter_for",
    "limiters",
    "retry_after_seconds",
]

DEFAULT_INITIAL = 64
DEFAULT_MIN = 1
DEFAULT_MAX = 512
DEFAULT_DECREASE = 0.5
DEFAULT_RATE_DECREASE = 0.7
DEFAULT_MIN_RATE = 1.0

_FEW = 2  # slots are cut while the cut leaves at least this many; below, the rate is paced
_START = math.log(4)  # until the first cut while pacing, the rate grows e^this a second
_WINDOW = 1.0  # seconds over which the granted rate is measured
_CALM = 10.0  # seconds without a cut before pacing may end
_TARGET = 0.95  # while pacing, the rate settles at this share of the ceiling
_GAIN = 3.0  # the share of the gap to the target closed a second
_PROBE = 0.1  # above the target, the rate grows by this share a second (doubling each second)

_FRACTION = Kind("a number", parse_float, float)


def _below_one(value: float) -> str | None:
    return None if value < 1 else "must be < 1"


THROTTLE_SETTINGS = ConfigTable(
    section="THROTTLE",
    owner="ThrottleConfig",
    what="throttle",
    fields=(
        Field("enabled", BOOL, True, env=("WDS_CLOUD_THROTTLE",)),
        Field("initial", INT, DEFAULT_INITIAL, checks=(at_least(1),)),
        Field("min", INT, DEFAULT_MIN, checks=(at_least(1),)),
        Field("max", INT, DEFAULT_MAX, checks=(at_least(1),)),
        Field("decrease", _FRACTION, DEFAULT_DECREASE, checks=(above(0), _below_one)),
        Field("rate_decrease", _FRACTION, DEFAULT_RATE_DECREASE, checks=(above(0), _below_one)),
        Field("min_rate", _FRACTION, DEFAULT_MIN_RATE, checks=(above(0),)),
    ),
)


@dataclass(frozen=True)
class ThrottleConfig:
    """The limiter's settings; None fields come from ``WDS_CLOUD_THROTTLE_<FIELD>`` or the
    default (:meth:`resolved`).

    Attributes:
        enabled: back off on throttling answers (``WDS_CLOUD_THROTTLE``, default on).
        initial: slots of a new endpoint's limiter.
        min: the fewest slots a decrease leaves.
        max: the most slots an increase reaches.
        decrease: the factor a throttled round multiplies the limit by (0 < f < 1).
        rate_decrease: the factor a throttled round multiplies the paced rate by.
        min_rate: the lowest paced rate (requests a second, > 0).
    """

    enabled: bool | None = None
    initial: int | None = None
    min: int | None = None
    max: int | None = None
    decrease: float | None = None
    rate_decrease: float | None = None
    min_rate: float | None = None

    def resolved(self, environ: Mapping[str, str] | None = None) -> ThrottleConfig:
        """Every None field from the environment or its default.

        Raises:
            ConfigError: a bad value, or ``min <= initial <= max`` does not hold.
        """
        cfg = THROTTLE_SETTINGS.resolve(self, environ=environ)
        assert cfg.initial is not None and cfg.min is not None and cfg.max is not None
        if not cfg.min <= cfg.initial <= cfg.max:
            raise ConfigError(
                f"throttle settings need min <= initial <= max, got min={cfg.min} "
                f"initial={cfg.initial} max={cfg.max} (WDS_CLOUD_THROTTLE_MIN/_INITIAL/_MAX)"
            )
        return cfg


class AimdLimiter:
    """Requests to one endpoint, limited by additive increase and multiplicative decrease: of
    the requests in flight, then (once that is at ``min`` and the store still says "slow
    down") of the requests started a second; see the module docstring. Thread-safe.

    Args:
        initial: the starting limit (slots).
        min: the lowest limit.
        max: the highest limit.
        decrease: the factor of a cut (of the slots, and of the rate).
        min_rate: the lowest rate pacing goes down to (requests a second).
        clock: monotonic seconds (``time.monotonic``).
        sleep: waits a number of seconds (``time.sleep``): a request waiting for its start.

    Attributes:
        limit: the current limit (a float; :meth:`allowed` slots).
        in_flight: slots taken.
        lowest: the lowest limit reached.
        highest: the highest limit reached.
        rate: requests a second that may start, or None while not pacing.
        ceiling: while pacing, the rate the store granted when it last said "slow down".
        lowest_rate: the lowest rate reached (None: never paced).
        throttles: throttled answers reported.
        cuts: decreases made (at most one per round), of the slots or of the rate.
        accepted: accepted answers reported.
    """

    def __init__(
        self,
        initial: int = DEFAULT_INITIAL,
        *,
        min: int = DEFAULT_MIN,
        max: int = DEFAULT_MAX,
        decrease: float = DEFAULT_DECREASE,
        rate_decrease: float = DEFAULT_RATE_DECREASE,
        min_rate: float = DEFAULT_MIN_RATE,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        if (
            not 1 <= min <= initial <= max
            or not 0 < decrease < 1
            or not 0 < rate_decrease < 1
            or not min_rate > 0
        ):
            raise ConfigError(
                f"AimdLimiter needs 1 <= min <= initial <= max, 0 < decrease < 1, "
                f"0 < rate_decrease < 1 and min_rate > 0, got min={min} initial={initial} "
                f"max={max} decrease={decrease} rate_decrease={rate_decrease} "
                f"min_rate={min_rate}"
            )
        self.min = min
        self.max = max
        self.decrease = decrease
        self.rate_decrease = rate_decrease
        self.min_rate = min_rate
        self.limit = float(initial)
        self.lowest = self.highest = self.limit
        self.in_flight = 0
        self.throttles = 0
        self.cuts = 0
        self.accepted = 0
        self.rate: float | None = None
        self.ceiling = 0.0
        self.lowest_rate: float | None = None
        self._clock = clock
        self._sleep = sleep
        self._round = 0  # bumped by each cut; a slot remembers the round it was taken in
        self._next = 0.0  # while pacing: the earliest start of the next request
        self._not_before = 0.0  # no request starts before (a Retry-After)
        self._token_bound = False  # the last request started late for want of a token
        self._paced_at = 0.0  # when pacing began or the rate was last cut
        self._fresh = False  # pacing began and no cut came since
        self._reached: float | None = None  # when the rate reached its target since then
        self._meter = _Meter(clock())  # accepted answers a second (what the store grants)
        self._answers = _Meter(clock())  # all answers a second (what was sent)
        self._cond = threading.Condition()

    def allowed(self) -> int:
        """Slots that may be taken at once now: the limit rounded up (a limit of 1.5 lets
        two requests go while the next cut or increase is decided)."""
        return math.ceil(self.limit)

    def paces(self) -> bool:
        """Whether a throttled request (its slot given back) may retry without a backoff:
        while pacing (it waits for its start instead), or when once it takes a slot again
        every slot is taken (the cut limit is then what spaces the requests out) and the
        limit is above ``min`` (at the minimum, before pacing, only time helps)."""
        with self._cond:
            if self.rate is not None:
                return True
            return self.limit > self.min and self.in_flight + 1 >= math.ceil(self.limit)

    def attempt(self, waited: bool = False) -> tuple[int | None, float]:
        """Take a slot if one is free and the request may start now: ``(round, 0.0)``, the
        round it was taken in (for :meth:`throttled`); else ``(None, when)``: no slot is
        free (``when`` is 0.0: wait for one) or the start must wait until the clock says
        ``when`` (pacing, or a ``Retry-After``). Nothing is reserved: a waiting request
        tries again, and the rate of that moment decides. ``waited``: this request already
        waited for its start (it is then counted as paced, not slowed by the slots)."""
        with self._cond:
            if self.in_flight >= math.ceil(self.limit):
                return None, 0.0
            if self.rate is not None or self._not_before:
                now = self._clock()
                start = max(self._not_before, self._next if self.rate is not None else 0.0)
                if now < start:
                    return None, start
                self._not_before = 0.0  # passed: no clock read while not pacing
                if self.rate is not None:
                    self._next = max(self._next, now) + 1.0 / self.rate
                    self._token_bound = waited
            self.in_flight += 1
            return self._round, 0.0

    def acquire(self) -> int:
        """Wait for a free slot and for the request's start (pacing), take the slot and
        return the round it was taken in (for :meth:`throttled`). Slots are given back by
        requests that end on their own, so the wait ends."""
        waited = False
        while True:
            taken, when = self.attempt(waited)
            if taken is not None:
                return taken
            if when:
                waited = True
                self._sleep(max(0.0, when - self._clock()))
                continue
            with self._cond:
                while self.in_flight >= math.ceil(self.limit):
                    self._cond.wait()

    def release(self) -> None:
        """Give a slot back."""
        with self._cond:
            self.in_flight -= 1
            self._cond.notify()

    def accept(self) -> None:
        """A request holding a slot was answered (not throttled). Not pacing: one slot more
        per round, only while every slot is taken (a limit that is not the bottleneck does
        not grow). Pacing: the rate grows (:meth:`_raise_rate`), and the slots only while
        every one is taken and requests do not wait for their start."""
        with self._cond:
            self.accepted += 1
            now = self._clock()
            self._meter.count(now)
            self._answers.count(now)
            if self.rate is not None:
                self._raise_rate(now)
                if self._token_bound:
                    return
            if self.in_flight >= math.ceil(self.limit) and self.limit < self.max:
                self.limit = min(float(self.max), self.limit + 1.0 / self.limit)
                self.highest = max(self.highest, self.limit)
                self._cond.notify()

    def _raise_rate(self, now: float) -> None:
        """One accepted answer while pacing: the rate closes ``_GAIN`` of its gap to
        ``_TARGET`` of the ceiling a second; from there on it grows by ``_PROBE`` a second,
        that share doubling every second without a cut (probing for more), until the store
        says "slow down" again (until the first cut while pacing, fourfold a second). A rate
        twice what the store granted over the last second, ``_CALM`` seconds after the last
        cut (the rate is not what limits the requests), ends the pacing."""
        rate = self.rate
        assert rate is not None
        target = _TARGET * self.ceiling
        if rate >= target and self._reached is None:
            self._reached = now
        if self._fresh:  # no cut since pacing began: the rate grows fourfold a second
            growth = _START
        elif self._reached is None:
            growth = _PROBE
        else:
            growth = _PROBE * 2.0 ** min(now - self._reached, 30.0)
        step = rate * min(1.0, growth / rate)
        if rate < target:
            step = max(step, (target - rate) * min(1.0, _GAIN / rate))
        rate += step
        self.rate = rate
        granted = self._meter.rate(now)
        if now - self._paced_at >= _CALM and rate >= 2 * granted:
            self.rate = None  # the slots are the limit again

    def throttled(self, taken_in: int, retry_after: float | None = None) -> None:
        """A request whose slot was taken in round ``taken_in`` was throttled: cut, unless
        a cut already happened since that request was sent. Not pacing, the cut multiplies
        the slots by ``decrease`` while that slows the requests (more in flight than the cut
        leaves, and it leaves at least ``_FEW``); else it starts pacing at ``rate_decrease``
        times the answers a second just seen. Pacing, it cuts the rate to ``rate_decrease``
        times the new ceiling (see the module docstring), not below ``min_rate``.
        ``retry_after`` (seconds) holds every request of the endpoint back that long."""
        with self._cond:
            self.throttles += 1
            now = self._clock()
            self._answers.count(now)
            if retry_after:
                self._not_before = max(self._not_before, now + retry_after)
            if taken_in != self._round:
                return
            self._round += 1
            self.cuts += 1
            cut = max(float(self.min), self.limit * self.decrease)
            if self.rate is None and self.in_flight > cut and cut >= _FEW:
                self.limit = max(float(self.min), self.limit * self.decrease)
                self.lowest = min(self.lowest, self.limit)
                return
            self._fresh = self.rate is None
            if self.rate is None:  # pacing starts below what was being sent
                self.ceiling = self._answers.rate(now)
            elif self._token_bound:  # requests waited for their start: this rate was refused
                self.ceiling = self.rate
            else:  # the rate did not limit the requests: what the store granted
                self.ceiling = min(self.rate, self._meter.rate(now))
            self.rate = max(self.min_rate, self.ceiling * self.rate_decrease)
            self.lowest_rate = min(self.lowest_rate or self.rate, self.rate)
            self._paced_at = now
            self._reached = None
            self._next = max(self._next, now + 1.0 / self.rate)

    def __repr__(self) -> str:
        pacing = "" if self.rate is None else f", rate={self.rate:.2f}/s"
        return (
            f"AimdLimiter(limit={self.limit:.2f}, in_flight={self.in_flight}{pacing}, "
            f"lowest={self.lowest:.2f}, throttles={self.throttles}, cuts={self.cuts})"
        )


class _Meter:
    """Accepted answers a second, over a sliding window of ``_WINDOW`` seconds: the count of
    the current window plus the share of the last window's count the slide still covers."""

    def __init__(self, now: float) -> None:
        self._start = now
        self._count = 0
        self._last: float | None = None  # the last window's count a second

    def count(self, now: float) -> None:
        elapsed = now - self._start
        if elapsed >= _WINDOW:
            self._last = self._count / elapsed
            self._start = now
            self._count = 0
        self._count += 1

    def rate(self, now: float) -> float:
        elapsed = now - self._start
        if self._last is None:  # the first window: what came so far (at least a tenth)
            return self._count / max(elapsed, _WINDOW / 10)
        left = max(0.0, _WINDOW - elapsed)
        return (self._last * left + self._count) / max(elapsed + left, _WINDOW)


_Held = dict[str, tuple[ThrottleConfig, AimdLimiter]]
_LIMITERS: ProcessLocal[_Held] = ProcessLocal()


def _held() -> _Held:
    return {}


def _host(endpoint: str) -> str:
    if "://" not in endpoint:
        return endpoint.lower()
    parts = urlsplit(endpoint)
    return f"{parts.scheme}://{parts.netloc}".lower()


def limiter_for(endpoint: str, environ: Mapping[str, str] | None = None) -> AimdLimiter | None:
    """The limiter every reader of ``endpoint`` (a URL or a host name) in this process shares,
    or None when ``WDS_CLOUD_THROTTLE=0``. Made on first use with the settings of that moment;
    settings that changed since make a new one (the old one ends with its readers). A forked
    process gets its own.

    Raises:
        ConfigError: a bad ``WDS_CLOUD_THROTTLE*`` value.
    """
    cfg = ThrottleConfig().resolved(environ)
    if not cfg.enabled:
        return None
    held = _LIMITERS.get(_held)
    key = _host(endpoint)
    found = held.get(key)
    if found is None or found[0] != cfg:
        assert cfg.initial is not None and cfg.min is not None and cfg.max is not None
        assert cfg.decrease is not None and cfg.rate_decrease is not None
        assert cfg.min_rate is not None
        made = AimdLimiter(
            cfg.initial,
            min=cfg.min,
            max=cfg.max,
            decrease=cfg.decrease,
            rate_decrease=cfg.rate_decrease,
            min_rate=cfg.min_rate,
        )
        found = held.setdefault(key, (cfg, made)) if found is None else (cfg, made)
        held[key] = found
    return found[1]


def limiters() -> dict[str, AimdLimiter]:
    """This process's limiters by endpoint (to read their counters)."""
    return {host: found[1] for host, found in list(_LIMITERS.get(_held).items())}


def retry_after_seconds(value: str | None) -> float | None:
    """The seconds of a ``Retry-After`` header given as a number (its HTTP-date form and
    anything unreadable give None: the retry policy's backoff applies)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None
