"""Backing off when a server says "slow down": one AIMD limit of requests in flight per endpoint.

Every backend translates its throttling answers into :class:`ThrottledError` (a
:class:`~wds_cloud.openers.streams.resumable.RetryableError`): S3 ``SlowDown`` (and the other
throttling codes) and 503, GCS 429 and 503, AIStore 429 and 503, HTTP 429 and 503, with the
answer's ``Retry-After`` when it has one. The one retry loop
(:class:`~wds_cloud.openers.streams.resumable.ResumableReader`) reads through an
:class:`AimdLimiter` shared by every reader of the same endpoint in the process:

- **Slots.** A request takes a slot before it is sent and gives it back when its answer has
  been read (parallel ranged reads, batch reads: readers driven by a worker thread) or when the
  answer's headers arrived (a stream the consumer reads at its own pace, such as the next shard
  opened early by read-ahead), so slots never wait on the consumer.
- **Multiplicative decrease.** A throttled answer multiplies the limit by ``decrease`` (0.5),
  at most once per round: answers to requests sent before the last decrease do not cut again
  (the TCP rule), so a burst of 503s from one round is one cut, not a collapse to ``min``.
- **Additive increase.** Each accepted request while every slot is taken adds ``1 / limit``:
  one slot per round. A limit that is not the bottleneck does not grow. The slots are the
  limit rounded up.
- **Throttled is not failed.** The throttled request gives its slot back and is sent again by
  the same loop when it gets one: without a backoff while its retry leaves no slot free and the
  limit is above ``min`` (the cut limit is the pacing), else after the retry policy's backoff (a
  lone request, or the limit at ``min``), and never before the answer's ``Retry-After``. It does not use up ``retries``; only the stall deadline
  (``stall_timeout`` without a new byte) bounds it, so a throttled shard is read whole, late,
  never skipped or read twice.

Settings (:data:`THROTTLE_SETTINGS`; ``WDS_CLOUD_THROTTLE`` = ``0`` switches it off, and the
retry loop then treats throttling answers as any other failure), read when a reader is made:
``WDS_CLOUD_THROTTLE_INITIAL`` (64), ``..._MIN`` (1), ``..._MAX`` (512) slots,
``..._DECREASE`` (0.5). See ``docs/openers.md`` ("Throttling").
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
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
    """

    enabled: bool | None = None
    initial: int | None = None
    min: int | None = None
    max: int | None = None
    decrease: float | None = None

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
    """Requests in flight to one endpoint, limited by additive increase and multiplicative
    decrease; see the module docstring. Thread-safe; no clock.

    Args:
        initial: the starting limit (slots).
        min: the lowest limit.
        max: the highest limit.
        decrease: the factor of a cut.

    Attributes:
        limit: the current limit (a float; :meth:`allowed` slots).
        in_flight: slots taken.
        lowest: the lowest limit reached.
        highest: the highest limit reached.
        throttles: throttled answers reported.
        cuts: decreases made (at most one per round).
        accepted: accepted answers reported.
    """

    def __init__(
        self,
        initial: int = DEFAULT_INITIAL,
        *,
        min: int = DEFAULT_MIN,
        max: int = DEFAULT_MAX,
        decrease: float = DEFAULT_DECREASE,
    ) -> None:
        if not 1 <= min <= initial <= max or not 0 < decrease < 1:
            raise ConfigError(
                f"AimdLimiter needs 1 <= min <= initial <= max and 0 < decrease < 1, got "
                f"min={min} initial={initial} max={max} decrease={decrease}"
            )
        self.min = min
        self.max = max
        self.decrease = decrease
        self.limit = float(initial)
        self.lowest = self.highest = self.limit
        self.in_flight = 0
        self.throttles = 0
        self.cuts = 0
        self.accepted = 0
        self._round = 0  # bumped by each cut; a slot remembers the round it was taken in
        self._cond = threading.Condition()

    def allowed(self) -> int:
        """Slots that may be taken at once now: the limit rounded up (a limit of 1.5 lets
        two requests go while the next cut or increase is decided)."""
        return math.ceil(self.limit)

    def paces(self) -> bool:
        """Whether a throttled request (its slot given back) may retry without a backoff:
        once it takes a slot again every slot is taken (the cut limit is then what spaces
        the requests out) and the limit is above ``min`` (at the minimum the store still
        says "slow down": only time helps)."""
        with self._cond:
            return self.limit > self.min and self.in_flight + 1 >= math.ceil(self.limit)

    def acquire(self) -> int:
        """Wait for a free slot and take it; returns the round it was taken in (for
        :meth:`throttled`). Slots are given back by requests that end on their own, so the
        wait ends."""
        with self._cond:
            while self.in_flight >= math.ceil(self.limit):
                self._cond.wait()
            self.in_flight += 1
            return self._round

    def release(self) -> None:
        """Give a slot back."""
        with self._cond:
            self.in_flight -= 1
            self._cond.notify()

    def accept(self) -> None:
        """A request holding a slot was answered (not throttled): one slot more per round,
        only while every slot is taken (a limit that is not the bottleneck does not grow)."""
        with self._cond:
            self.accepted += 1
            if self.in_flight >= math.ceil(self.limit) and self.limit < self.max:
                self.limit = min(float(self.max), self.limit + 1.0 / self.limit)
                self.highest = max(self.highest, self.limit)
                self._cond.notify()

    def throttled(self, taken_in: int) -> None:
        """A request whose slot was taken in round ``taken_in`` was throttled: cut the limit,
        unless a cut already happened since that request was sent."""
        with self._cond:
            self.throttles += 1
            if taken_in == self._round:
                self._round += 1
                self.cuts += 1
                self.limit = max(float(self.min), self.limit * self.decrease)
                self.lowest = min(self.lowest, self.limit)

    def __repr__(self) -> str:
        return (
            f"AimdLimiter(limit={self.limit:.2f}, in_flight={self.in_flight}, "
            f"lowest={self.lowest:.2f}, throttles={self.throttles}, cuts={self.cuts})"
        )


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
        assert cfg.decrease is not None
        made = AimdLimiter(cfg.initial, min=cfg.min, max=cfg.max, decrease=cfg.decrease)
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
