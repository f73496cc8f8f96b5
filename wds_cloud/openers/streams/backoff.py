"""When to try a network request again, how long to wait, and when to give up: one place.

Every network read (the first request of a stream, each resume after a drop, each S3 prefetch
chunk) counts its failures with a :class:`Backoff` built from a :class:`RetryPolicy`:

- **Progress resets everything.** ``retries`` bounds *consecutive* attempts that delivered no
  new byte; an attempt that delivered bytes, however few, starts the count again.
- **The stall deadline bounds time.** When no new byte has arrived for ``stall_timeout``
  seconds the read gives up at its next failure, whatever the retry count. Each socket read
  waits at most ``min(read_timeout, stall_timeout)``, so a silent server is noticed, and a
  read fails at most :func:`stall_bound` seconds after its last byte.
- **Backoff** doubles from ``backoff`` up to ``max_backoff`` and never sleeps past the
  deadline.

The clock and the sleep function are injectable (tests pass a fake clock; the S3 prefetch
threads pass an event's ``wait`` so ``close()`` interrupts their backoff).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from wds_cloud.errors import ConfigError
from wds_cloud.settings import INT, SECONDS, Field, above, at_least

#: Default seconds without a new byte before a read gives up (every network backend).
DEFAULT_STALL_TIMEOUT = 60.0
#: Default seconds one socket read may wait (S3, GCS, HTTP; AIStore keeps its SDK's 20 s).
DEFAULT_READ_TIMEOUT = 20.0


class RetrySettings(Protocol):
    """What :meth:`RetryPolicy.from_config` reads: a backend config (``S3Config``, ``GcsConfig``,
    ``HttpConfig``, ``AisConfig``) with :func:`retry_fields` and a class attribute
    ``max_backoff``."""

    @property
    def max_backoff(self) -> float: ...

    @property
    def retries(self) -> int | None: ...

    @property
    def backoff(self) -> float | None: ...

    @property
    def stall_timeout(self) -> float | None: ...


@dataclass(frozen=True)
class RetryPolicy:
    """How a network read retries; see the module docstring.

    Attributes:
        retries: consecutive attempts without progress allowed after the first.
        backoff: first delay in seconds, doubled per failed attempt.
        max_backoff: longest single delay.
        stall_timeout: seconds without a new byte before giving up.
    """

    retries: int = 5
    backoff: float = 0.2
    max_backoff: float = 5.0
    stall_timeout: float = DEFAULT_STALL_TIMEOUT

    def __post_init__(self) -> None:
        if self.retries < 0 or self.backoff < 0 or self.max_backoff < 0:
            raise ConfigError(f"retries and backoff must be >= 0: {self}")
        if not self.stall_timeout > 0:
            raise ConfigError(f"stall_timeout must be > 0 seconds, got {self.stall_timeout}")

    @classmethod
    def from_config(cls, config: RetrySettings) -> RetryPolicy:
        """The policy of a resolved backend config: its ``retries``, ``backoff`` and
        ``stall_timeout`` fields and its class's ``max_backoff`` (the one way every backend
        builds its read loop's policy).

        Raises:
            ConfigError: a field is unresolved (None) or out of range.
        """
        if config.retries is None or config.backoff is None or config.stall_timeout is None:
            raise ConfigError(f"resolve the config before building its retry policy: {config}")
        return cls(
            retries=config.retries,
            backoff=config.backoff,
            max_backoff=config.max_backoff,
            stall_timeout=config.stall_timeout,
        )

    def read_timeout(self, read_timeout: float | None) -> float:
        """The socket read timeout to use: ``read_timeout`` clipped to the stall deadline."""
        if read_timeout is None or read_timeout <= 0:  # "no limit" still may not hang
            return self.stall_timeout
        return min(read_timeout, self.stall_timeout)


def stall_bound(stall_timeout: float, connect_timeout: float, read_timeout: float) -> float:
    """The longest a read can go without a new byte before it raises, in seconds.

    The deadline is checked when an attempt fails; the attempt that crosses it may have begun
    just before and then spend one connect timeout and two read timeouts (response headers,
    then the first body read), each read timeout clipped to ``stall_timeout``.
    """
    read = min(read_timeout, stall_timeout) if read_timeout > 0 else stall_timeout
    return stall_timeout + connect_timeout + 2 * read


def retry_fields(*, retries: int, backoff: float) -> tuple[Field, ...]:
    """The settings every network backend's config has for its read loop, with its defaults:
    ``retries`` (an integer >= 0), ``backoff`` (seconds) and ``stall_timeout`` (seconds > 0,
    default :data:`DEFAULT_STALL_TIMEOUT`)."""
    return (
        Field("retries", INT, retries, checks=(at_least(0),)),
        Field("backoff", SECONDS, backoff),
        Field("stall_timeout", SECONDS, DEFAULT_STALL_TIMEOUT, checks=(above(0),)),
    )


class Backoff:
    """Counts failed attempts of one read and decides between waiting and giving up.

    Args:
        policy: the limits.
        clock: monotonic seconds (``time.monotonic``).
        sleep: waits a number of seconds (``time.sleep``).

    Attributes:
        failures: consecutive failed attempts since the last progress.
        throttles: consecutive throttled attempts that waited, since the last progress
            (:meth:`throttled`).
    """

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        self.policy = policy
        self._clock = clock
        self._sleep = sleep
        self.failures = 0
        self.throttles = 0
        self._since = clock()

    def progress(self) -> None:
        """New bytes arrived: the retry counts and the stall clock start again."""
        self.failures = 0
        self.throttles = 0
        self._since = self._clock()

    def touch(self) -> None:
        """Restart only the stall clock: bytes arrived that are not new (re-read and skipped),
        or a new read began after the caller paused (time spent outside the read is no stall).
        """
        self._since = self._clock()

    def idle(self) -> float:
        """Seconds since the last new byte, or since the clock was last restarted."""
        return self._clock() - self._since

    def retry(self) -> str | None:
        """Record a failed attempt; wait and return None to try again, or return why to stop.

        Returns:
            None after the backoff delay, or the reason to give up: ``"giving up after N
            retries without progress"`` or ``"stalled: no new data for S s (stall_timeout T
            s)"``; the caller adds what failed.
        """
        self.failures += 1
        idle = self.idle()
        limit = self.policy.stall_timeout
        if idle >= limit:
            return f"stalled: no new data for {idle:.1f} s (stall_timeout {limit:g} s)"
        if self.failures > self.policy.retries:
            return f"giving up after {self.policy.retries} retries without progress"
        delay = self.policy.backoff * 2 ** (self.failures - 1)
        self._sleep(max(0.0, min(delay, self.policy.max_backoff, limit - idle)))
        return None

    def throttled(self, retry_after: float | None = None, *, paced: bool = False) -> str | None:
        """Record a throttled attempt (the server said "slow down"): it does not count
        against ``retries``; wait and return None, or return why to stop (only the stall
        deadline stops a throttled read).

        The wait is ``retry_after`` when the server gave one; else nothing when ``paced``
        (the endpoint's limiter has every slot taken: the attempt waits for one instead),
        else the backoff of the throttled attempts in a
        row (doubling from ``backoff`` up to ``max_backoff``); never past the deadline.
        """
        idle = self.idle()
        limit = self.policy.stall_timeout
        if idle >= limit:
            return f"stalled: throttled, no new data for {idle:.1f} s (stall_timeout {limit:g} s)"
        if retry_after is None and paced:
            return None
        self.throttles += 1
        if retry_after is None:
            delay = min(
                self.policy.backoff * 2 ** min(self.throttles - 1, 30), self.policy.max_backoff
            )
        else:
            delay = retry_after
        self._sleep(max(0.0, min(delay, limit - idle)))
        return None
