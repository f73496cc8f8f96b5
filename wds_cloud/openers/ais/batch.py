"""``read_batch`` of the ``ais://`` opener: many byte ranges in one AIStore GetBatch request.

GetBatch (``GET /v1/ml/moss``, AIStore's ``docs/get_batch.md``) takes a JSON list of entries
(object, bucket, provider, ``start``/``length``) and streams one TAR archive holding one member
per entry, in the order asked (:mod:`wds_cloud.openers.ais.batchtar` parses it). How wds_cloud
uses it:

- **Streaming, continue on error.** Every request sets ``"strm": true`` and ``"coer": true``:
  AIStore then answers an entry it cannot read (object or bucket missing) with an empty
  member named ``__404__/<bucket>/<object>`` and goes on. (Without ``coer`` AIStore 5.0 ends
  the archive early at the first missing entry, after a 20 s wait, with status 200.) Such an
  entry raises :class:`ShardReadError` naming its URL, offset and length, unless ``handler``
  says to skip it: ``handler(exc)`` returning True leaves ``b""`` in its place (the handler
  counts it, e.g. ``ContinueHandler``); False or raising stops the batch with the error.
  A bucket that does not exist fails the whole request (404): a HEAD of each bucket of the
  batch finds which; its entries raise :class:`ShardNotFoundError` or are skipped the same way,
  and the rest is sent again.
- **Checked member by member.** Each member's name must be ``<bucket>/<object>`` of its entry
  and its size the entry's length. AIStore 5.0 answers a range that runs past the object's
  end with the whole object (after ~20 s) and may answer the entries after it wrongly, so on
  any mismatch, and when the archive ends before the last entry, the entry is read again with
  one ranged GET (:meth:`AisOpener.read_range`: its bytes, or the error that names the URL and
  offset, e.g. "the object ended before byte N"), and the rest of the batch is sent again.
- **Cut into pieces.** At most ``batch_entries`` entries and ``batch_bytes`` bytes per request
  (:class:`~wds_cloud.openers.ais.config.AisConfig`); the pieces are sent one after the other.
- **Resumed.** A connection that drops mid-answer is retried from the first entry not yet
  complete, with the read loop's :class:`~wds_cloud.openers.streams.backoff.Backoff` (the
  same ``retries``, ``backoff`` and ``stall_timeout``; a complete entry is progress). An
  entry that fails a second time in a row is read with a ranged GET, which has its own
  resumable loop.
- **Throttled with the other reads.** Each request takes a slot (and, while pacing, waits for
  its start) from the cluster's limiter (:mod:`wds_cloud.openers.streams.throttle`), shared
  with the ranged and streaming reads of that endpoint, and holds it until its answer is read.
  An answer 429 or 503 (AIStore, or a proxy in front of it) cuts the limiter and the request
  is sent again from the same entry like a resume, by the same rules as the read loop: it does
  not use up ``retries`` (only ``stall_timeout`` ends it) nor count as a failed entry, so no
  entry is lost, read twice or read with a ranged GET for it. ``WDS_CLOUD_THROTTLE=0``: a
  throttled answer is retried like any other failure.
- The read client carries the AuthN token and timeouts of every other read; an URL through an
  inline ETL is refused (offsets describe stored objects), as in ``read_range``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from wds_cloud.errors import ConfigError, ShardError, ShardReadError
from wds_cloud.openers.ais.batchtar import BatchTarError, TarMemberReader, TruncatedArchive
from wds_cloud.openers.ais.config import AisConfig, AisTarget
from wds_cloud.openers.capabilities import RangeRequest
from wds_cloud.openers.streams.backoff import Backoff, RetryPolicy
from wds_cloud.openers.streams.resumable import (
    NETWORK_ERRORS,
    RetryableError,
    ThrottledError,
    Urllib3Body,
    transient_error,
)
from wds_cloud.openers.streams.throttle import limiter_for
from wds_cloud.settings import reject_unknown_options

if TYPE_CHECKING:
    from wds_cloud.openers.ais.read import AisAccess

__all__ = ["MISSING_PREFIX", "BatchStats", "member_name", "pieces", "read_batch"]

#: The directory AIStore puts the empty members of entries it could not read in (``coer``).
MISSING_PREFIX = "__404__/"
_TRANSIENT = (429, 500, 502, 503, 504)
BATCH_OPTIONS = ("handler", "stats")


class BatchOpener(Protocol):
    """What :func:`read_batch` uses of :class:`~wds_cloud.openers.ais.opener.AisOpener`."""

    config: AisConfig

    def target(self, url: str) -> AisTarget: ...

    def access(self) -> AisAccess: ...

    def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes: ...


@dataclass
class BatchStats:
    """What :func:`read_batch` did, added up over the calls it is passed to.

    Attributes:
        requests: GetBatch requests sent (retries included).
        entries: entries read (zero-length ones, answered without a request, excluded).
        resumes: requests sent again after a dropped or refused answer (throttled included).
        throttled: answers that said "slow down" (429, 503).
        rereads: entries read with a ranged GET after a GetBatch answer did not match them.
        skipped: entries that could not be read and that the handler skipped.
    """

    requests: int = 0
    entries: int = 0
    resumes: int = 0
    throttled: int = 0
    rereads: int = 0
    skipped: int = 0


@dataclass(frozen=True)
class _Entry:
    index: int  # position in the caller's list
    url: str
    bucket: str
    provider: str
    name: str
    offset: int
    length: int

    @property
    def member(self) -> str:
        return member_name(self.bucket, self.name)


def member_name(bucket: str, name: str) -> str:
    """The TAR member name AIStore gives an entry (``onob`` off): ``<bucket>/<object>``."""
    return f"{bucket}/{name}"


def pieces(lengths: Sequence[int], max_entries: int, max_bytes: int) -> list[range]:
    """Consecutive index ranges of ``lengths``, each at most ``max_entries`` long and
    ``max_bytes`` in total (an entry larger than ``max_bytes`` alone)."""
    out: list[range] = []
    start = total = 0
    for i, length in enumerate(lengths):
        if i > start and (i - start >= max_entries or total + length > max_bytes):
            out.append(range(start, i))
            start, total = i, 0
        total += length
    if start < len(lengths):
        out.append(range(start, len(lengths)))
    return out


def read_batch(
    opener: BatchOpener, requests: Sequence[RangeRequest], **options: Any
) -> list[bytes]:
    """The bytes of every request, in order, with as few GetBatch requests as the limits allow.

    Args:
        opener: the ``ais://`` opener (this is its ``read_batch`` method).
        requests: ``(url, offset, length)`` of each range; URLs of any buckets and providers.
        **options: ``handler`` (called with the error of an entry that cannot be read: True
            skips it, leaving ``b""``; False re-raises) and ``stats`` (a :class:`BatchStats`
            to add to).

    Raises:
        ShardReadError: an entry missing or shorter than asked (URL, offset), or the answer
            failed after the retries.
        ShardNotFoundError: an entry's bucket does not exist (URL, offset).
        ShardError: what a ranged GET raised for an entry read again (not found, denied).
        ConfigError: a negative offset or length, an URL through an inline ETL, an unknown
            option.
    """
    reject_unknown_options(options, BATCH_OPTIONS, "ais read_batch()")
    handler: Callable[[BaseException], bool] | None = options.get("handler")
    stats: BatchStats = options.get("stats") or BatchStats()
    results: list[bytes] = [b""] * len(requests)
    entries: list[_Entry] = []
    for i, req in enumerate(requests):
        if req.offset < 0 or req.length < 0:
            raise ConfigError(
                f"read_batch() entry {i}: offset and length must be >= 0, got {req.offset} "
                f"and {req.length} for {req.url!r}"
            )
        target = opener.target(req.url)
        if target.etl:
            raise ConfigError(
                f"cannot read a byte range through the inline ETL {target.etl!r} "
                f"({req.url!r}): offsets describe the stored object"
            )
        if req.length:  # AIStore reads a zero length as "the whole object": answered here
            entries.append(
                _Entry(
                    i, req.url, target.bucket, target.provider, target.name, req.offset, req.length
                )
            )
    if not entries:
        return results
    cfg = opener.config
    run = _BatchRun(opener, opener.access(), results, handler, stats)
    for span in pieces(
        [e.length for e in entries], int(cfg.batch_entries or 1), int(cfg.batch_bytes or 1)
    ):
        run.piece(entries[span.start : span.stop])
    return results


class _BucketMissing(Exception):
    """AIStore refused a whole GetBatch request with 404 (a bucket of it does not exist)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class _BatchRun:
    """The requests of one :func:`read_batch` call; fills ``results``."""

    def __init__(
        self,
        opener: BatchOpener,
        access: AisAccess,
        results: list[bytes],
        handler: Callable[[BaseException], bool] | None,
        stats: BatchStats,
    ) -> None:
        import requests
        import urllib3

        self.opener = opener
        self.access = access
        self.results = results
        self.handler = handler
        self.stats = stats
        self.reached = 0  # entries of the current piece stored so far
        self.policy = RetryPolicy.from_config(access.config)
        self.limiter = limiter_for(str(opener.config.endpoint))
        self.retry_on: tuple[type[BaseException], ...] = (
            *NETWORK_ERRORS,
            requests.RequestException,
            urllib3.exceptions.HTTPError,
        )
        self.end_errors: tuple[type[BaseException], ...] = (BatchTarError, *self.retry_on)

    def piece(self, entries: list[_Entry]) -> None:
        """Read ``entries`` with one request, more only after a failure."""
        backoff = Backoff(self.policy)
        pos = 0
        failed_at = -1  # the entry the last failed attempt stopped at
        while pos < len(entries):
            try:
                new = self._request(entries, pos, backoff)
            except _BucketMissing as missing:  # the whole request was refused
                entries = entries[:pos] + self._without_missing_buckets(entries[pos:], missing)
                failed_at = -1
                continue
            except ShardError:
                raise
            except self.retry_on as exc:
                if self.reached > pos:  # complete entries before the failure are kept
                    pos, failed_at = self.reached, -1
                if pos >= len(entries):
                    break
                if isinstance(exc, ThrottledError) and self.limiter is not None:
                    self._throttled(exc, entries[pos], backoff)
                    continue
                if failed_at == pos:  # twice in a row on this entry: one ranged GET
                    self._reread(entries[pos])
                    pos, failed_at = pos + 1, -1
                    continue
                failed_at = pos
                reason = backoff.retry()
                if reason is not None:
                    entry = entries[pos]
                    raise ShardReadError(
                        f"{reason}: {self._explain(exc, entry)}",
                        url=entry.url,
                        offset=entry.offset,
                    ) from exc
                self.stats.resumes += 1
                continue
            if new < len(entries):  # the answer did not match entry `new`: a ranged GET
                self._reread(entries[new])
                new += 1
            pos, failed_at = new, -1

    def _throttled(self, exc: ThrottledError, entry: _Entry, backoff: Backoff) -> None:
        """A request refused with "slow down": wait as the read loop would (for a paced start,
        ``Retry-After`` or the backoff), not counting a retry nor a failed entry.

        Raises:
            ShardReadError: the stall deadline passed (no complete entry for that long).
        """
        assert self.limiter is not None
        self.stats.throttled += 1
        reason = backoff.throttled(exc.retry_after, paced=self.limiter.paces())
        if reason is not None:
            raise ShardReadError(f"{reason}: {exc}", url=entry.url, offset=entry.offset) from exc
        self.stats.resumes += 1

    def _without_missing_buckets(
        self, entries: list[_Entry], missing: _BucketMissing
    ) -> list[_Entry]:
        """``entries`` less those in buckets that do not exist (a HEAD of each bucket says
        which), each of those raised or skipped through the handler, in order.

        Raises:
            ShardError: the refusal translated, when every bucket exists after all.
        """
        gone: dict[tuple[str, str], BaseException] = {}
        first: dict[tuple[str, str], _Entry] = {}
        for e in entries:
            first.setdefault((e.bucket, e.provider), e)
        for (bucket, provider), entry in first.items():
            try:
                self.access.client.bucket(bucket, provider=provider).head()
            except Exception as exc:
                if getattr(exc, "status_code", None) != 404:
                    raise self.access.translate(exc, url=entry.url, action="HEAD") from exc
                gone[bucket, provider] = exc
        if not gone:
            error = missing.error
            raise self.access.translate(error, url=entries[0].url, action="GetBatch") from error
        kept = []
        for e in entries:
            refused = gone.get((e.bucket, e.provider))
            if refused is None:
                kept.append(e)
            else:
                self._skip_or_raise(
                    self.access.translate(refused, url=e.url, offset=e.offset, action="GetBatch")
                )
        return kept

    def _explain(self, exc: BaseException, entry: _Entry) -> str:
        if isinstance(exc, RetryableError | TruncatedArchive):
            return str(exc)
        return self.access.translate(exc, url=entry.url, action="GetBatch").reason

    def _send(self, entries: list[_Entry]) -> Any:
        from aistore.sdk import errors as ais_errors

        batch = self.access.read_client.batch(cont_on_err=True, streaming_get=True)
        for e in entries:
            batch.add(e.name, bck=e.bucket, provider=e.provider, start=e.offset, length=e.length)
        self.stats.requests += 1
        try:
            return batch.get(raw=True)
        except self.retry_on:
            raise
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if status in _TRANSIENT and isinstance(exc, ais_errors.AISError):
                raise transient_error(f"AIStore answered {status}: {exc}", status) from exc
            if status == 404:
                raise _BucketMissing(exc) from exc
            raise self.access.translate(exc, url=entries[0].url, action="GetBatch") from exc

    def _request(self, entries: list[_Entry], pos: int, backoff: Backoff) -> int:
        """Send ``entries[pos:]`` and store what the answer holds; the index of the first
        entry it did not answer as asked (``len(entries)`` when all were).

        :attr:`reached` follows the entries stored, for a failure in the middle.
        """
        self.reached = pos
        limiter = self.limiter
        taken = limiter.acquire() if limiter is not None else 0
        try:
            raw = self._send(entries[pos:])
        except BaseException as exc:
            if limiter is not None:
                if isinstance(exc, ThrottledError):
                    limiter.throttled(taken, exc.retry_after)
                limiter.release()
            raise
        if limiter is not None:
            limiter.accept()
        body = Urllib3Body(raw)
        reader = TarMemberReader(body)
        try:
            while pos < len(entries):
                try:
                    member = reader.next_member()
                except BatchTarError as exc:
                    entry = entries[pos]
                    raise ShardReadError(
                        f"GetBatch answered a malformed archive: {exc}",
                        url=entry.url,
                        offset=entry.offset,
                    ) from exc
                if member is None:
                    return pos
                if not self._store(entries[pos], *member):
                    return pos
                pos += 1
                self.reached = pos
                backoff.progress()
            try:
                reader.next_member()  # the end blocks, so that the connection is reused
            except self.end_errors:
                pass
            return pos
        finally:
            body.close()
            if limiter is not None:
                limiter.release()

    def _store(self, entry: _Entry, name: str, data: bytes) -> bool:
        """Keep one member's bytes; False when it is not what ``entry`` asked for."""
        if name == MISSING_PREFIX + entry.member:
            if entry.provider not in ("", "ais"):
                # AIStore 5.0's GetBatch does not fetch a remote bucket's object that is not in
                # the cluster yet (cold): one ranged GET does, and names a truly missing one
                self._reread(entry)
                return True
            self._skip_or_raise(
                ShardReadError(
                    f"AIStore GetBatch could not read {entry.length} bytes of "
                    f"{entry.member!r} (object or bucket missing)",
                    url=entry.url,
                    offset=entry.offset,
                )
            )
            return True
        if name != entry.member or len(data) != entry.length:
            return False
        self.results[entry.index] = data
        self.stats.entries += 1
        return True

    def _reread(self, entry: _Entry) -> None:
        self.stats.rereads += 1
        try:
            data = self.opener.read_range(entry.url, entry.offset, entry.length)
        except ShardError as exc:
            self._skip_or_raise(exc)
            return
        self.results[entry.index] = data
        self.stats.entries += 1

    def _skip_or_raise(self, exc: ShardError) -> None:
        if self.handler is None or not self.handler(exc):
            raise exc
        self.stats.skipped += 1
