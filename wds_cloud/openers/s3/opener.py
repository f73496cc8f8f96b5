"""Amazon S3 (and S3-compatible servers) through boto3: ``s3://bucket/key``.

SDK: ``boto3`` (``pip install 'wds_cloud[s3]'``). Credentials come from boto3's standard chain
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, ``AWS_PROFILE``, the
shared config files, instance/container roles) unless given explicitly in :class:`S3Config`.

Configuration is resolved when an :class:`S3Config` is built: explicit value >
``WDS_CLOUD_S3_<FIELD>`` (e.g. ``WDS_CLOUD_S3_ENDPOINT_URL``, ``WDS_CLOUD_S3_PREFETCH``) > the
AWS variables ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``,
``AWS_DEFAULT_REGION``, ``AWS_PROFILE`` > defaults. Reads stream one ``GetObject`` through
:class:`~wds_cloud.openers.streams.resumable.ResumableReader` (a dropped connection resumes with
``Range: bytes=<offset>-`` pinned to the first response's ETag), or, with ``prefetch=N``, run N
ranged GETs of ``prefetch_chunk`` bytes in parallel threads (:mod:`wds_cloud.openers.streams.prefetch`),
each chunk its own resumable read. Writes (:meth:`S3Opener.create`) are multipart uploads
(:mod:`wds_cloud.openers.s3.write`).

Reads use a second boto3 client of their own that makes one attempt per request
(``max_attempts`` applies to listing and writes): the read loop retries instead, with
``retries``/``backoff`` and the stall deadline ``stall_timeout`` (``WDS_CLOUD_S3_STALL_TIMEOUT``,
default 60 s; socket reads wait at most ``read_timeout``, default 20 s), so a stalled read fails
with :class:`ShardReadError` at most :meth:`S3Opener.stall_bound` seconds (110 by default)
after its last byte.
"""

from __future__ import annotations

from typing import Any

from wds_cloud.errors import ConfigError, MissingDependencyError, ShardError
from wds_cloud.openers.clients import ProcessLocal
from wds_cloud.openers.s3.config import MIN_PART_SIZE, S3Access, S3Config, split_s3_url
from wds_cloud.openers.s3.errors import read_errors, s3_request, translate_error
from wds_cloud.openers.s3.read import ObjectFetch
from wds_cloud.openers.streams.backoff import RetryPolicy, stall_bound
from wds_cloud.openers.streams.batchread import RangeBatchReads, batch_connections
from wds_cloud.openers.streams.resumable import ResumableReader, read_span
from wds_cloud.openers.streams.stream import ReadStream
from wds_cloud.openers.streams.throttle import limiter_for
from wds_cloud.redact import redact_url
from wds_cloud.settings import reject_unknown_options

try:
    import boto3
    import botocore.config
except ImportError:  # pragma: no cover - exercised only without the extra
    boto3 = None

SCHEMES = ("s3",)

__all__ = ["MIN_PART_SIZE", "SCHEMES", "S3Config", "S3Opener", "split_s3_url", "translate_error"]


class S3Opener(RangeBatchReads):
    """Opens, lists and creates ``s3://bucket/key`` objects.

    Args:
        config: base settings; None means all from the environment/defaults.
        **overrides: :class:`S3Config` fields that replace those of ``config``.

    Raises:
        ConfigError: an unknown setting or an invalid value.
    """

    remote: bool = True  # streams come over a network: the registry reads them ahead

    def __init__(self, config: S3Config | None = None, **overrides: Any) -> None:
        self.config = (config or S3Config()).resolve(overrides)
        # per process, never pickled: an unpickled opener carries its config only
        self._client: ProcessLocal[Any] = ProcessLocal()
        self._read_client: ProcessLocal[Any] = ProcessLocal()

    def __repr__(self) -> str:
        endpoint = self.config.endpoint_url
        shown = redact_url(endpoint) if endpoint else endpoint
        return f"S3Opener(endpoint_url={shown!r}, region={self.config.region!r})"

    # -- client ----------------------------------------------------------------------------

    def client(self) -> Any:
        """The boto3 S3 client of this process (created on first use, re-created after fork).

        Requests are retried by botocore (``max_attempts``); used for listing and writes.

        Raises:
            MissingDependencyError: boto3 is not installed.
        """
        cfg = self.config
        return self._client.get(
            lambda: self._make_client(int(cfg.max_attempts or 1), cfg.read_timeout)
        )

    def read_client(self) -> Any:
        """The boto3 client for object reads of this process: one attempt per request (the
        read loop retries) and socket reads clipped to the stall deadline.

        Raises:
            MissingDependencyError: boto3 is not installed.
        """
        return self._read_client.get(self._make_read_client)

    def _make_read_client(self) -> Any:
        timeout = RetryPolicy.from_config(self.config).read_timeout(self.config.read_timeout)
        # botocore's ``max_attempts`` counts retries after the first attempt: 0, one attempt
        # (with 1 botocore retried a 503 SlowDown itself, hidden from the read loop's limiter)
        return self._make_client(0, timeout)

    def _make_client(self, attempts: int, read_timeout: float | None) -> Any:
        if boto3 is None:
            raise MissingDependencyError("the s3:// backend needs boto3", extra="s3")
        cfg = self.config
        session = boto3.session.Session(
            profile_name=cfg.profile,
            aws_access_key_id=cfg.access_key_id,
            aws_secret_access_key=cfg.secret_access_key,
            aws_session_token=cfg.session_token,
        )
        bcfg = botocore.config.Config(
            region_name=cfg.region,
            retries={"max_attempts": attempts, "mode": "standard"},
            s3={"addressing_style": cfg.addressing_style},
            connect_timeout=cfg.connect_timeout,
            read_timeout=read_timeout,
            max_pool_connections=max(10, 2 * (cfg.prefetch or 0) + 4, batch_connections()),
        )
        return session.client("s3", endpoint_url=cfg.endpoint_url, config=bcfg)

    def stall_bound(self) -> float:
        """Seconds a read can go without a new byte before it raises (with these settings)."""
        cfg = self.config
        return stall_bound(
            float(cfg.stall_timeout or 0),
            float(cfg.connect_timeout or 0),
            float(cfg.read_timeout or 0),
        )

    def translate_error(
        self, exc: BaseException, /, *, url: str, offset: int | None = None
    ) -> ShardError:
        """:func:`wds_cloud.openers.s3.errors.translate_error` with this opener's endpoint."""
        return translate_error(exc, url=url, offset=offset, endpoint=self.config.endpoint_url)

    def access(self, *, read: bool = True) -> S3Access:
        """The client (:meth:`read_client` or :meth:`client`), request arguments and error
        translation that readers and writers get from this opener."""
        client = self.read_client() if read else self.client()
        return S3Access(client, self.config.request_args(), self.translate_error)

    # -- reading ---------------------------------------------------------------------------

    def open(self, url: str, **options: Any) -> ReadStream:
        """Open ``s3://bucket/key`` for streaming reads.

        Args:
            url: the object URL.
            **options: per-call overrides of ``prefetch``, ``prefetch_chunk``, ``retries``,
                ``backoff``, ``stall_timeout``.

        Returns:
            A :class:`~wds_cloud.openers.streams.stream.ReadStream`: a ``PrefetchReader`` or a
            ``ResumableReader``.

        Raises:
            ShardNotFoundError: no such object or bucket.
            ShardOpenError: access denied, endpoint unreachable, other request failures, no
                answer within the stall deadline.
            ConfigError: an unknown option.
            MissingDependencyError: boto3 is not installed.
        """
        allowed = {"prefetch", "prefetch_chunk", "retries", "backoff", "stall_timeout"}
        reject_unknown_options(options, allowed, "s3 open()")
        cfg = self.config.resolve(options, environ={}) if options else self.config
        bucket, key = split_s3_url(url)
        if not key:
            raise ConfigError(f"URL {url!r} names a bucket, not an object")
        client = self.read_client()
        if cfg.prefetch:
            from wds_cloud.openers.s3.prefetch import open_prefetching

            stream = open_prefetching(self.access(), cfg, url, bucket, key)
            if stream is not None:
                return stream
        return self._open_sequential(client, cfg, url, bucket, key)

    def _open_sequential(
        self, client: Any, cfg: S3Config, url: str, bucket: str, key: str
    ) -> ResumableReader:
        fetch = ObjectFetch(self.access(), url, bucket, key)
        reader = ResumableReader(
            fetch,
            url=url,
            policy=RetryPolicy.from_config(cfg),
            retry_on=read_errors(),
            explain=fetch.explain,
            limiter=limiter_for(cfg.throttle_endpoint(bucket)),
        )
        return reader.start()

    def open_at(self, url: str, offset: int, **options: Any) -> ResumableReader:
        """Open ``s3://bucket/key`` for streaming reads from byte ``offset`` (one ranged
        ``GetObject``; resumed like :meth:`open`). Resumable loading reads shard tails with it.

        ``offset`` equal to the object's size gives an empty stream.

        Raises:
            As :meth:`open`; :class:`ShardOpenError` naming the size for an offset past the end;
            ConfigError for a negative offset.
        """
        allowed = {"prefetch", "prefetch_chunk", "retries", "backoff", "stall_timeout"}
        reject_unknown_options(options, allowed, "s3 open_at()")
        if offset < 0:
            raise ConfigError(f"open_at() offset must be >= 0, got {offset} for {url!r}")
        options = {k: v for k, v in options.items() if k not in ("prefetch", "prefetch_chunk")}
        cfg = self.config.resolve(options, environ={}) if options else self.config
        bucket, key = split_s3_url(url)
        if not key:
            raise ConfigError(f"URL {url!r} names a bucket, not an object")
        fetch = ObjectFetch(self.access(), url, bucket, key)
        reader = ResumableReader(
            fetch,
            url=url,
            policy=RetryPolicy.from_config(cfg),
            retry_on=read_errors(),
            explain=fetch.explain,
            limiter=limiter_for(cfg.throttle_endpoint(bucket)),
        )
        reader.position = offset
        return reader.start()

    def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes:
        """Bytes ``offset .. offset + length`` of ``s3://bucket/key`` with one ranged
        ``GetObject`` (resumed like a streaming read if the connection drops).

        Args:
            url: the object URL.
            offset: first byte.
            length: number of bytes.
            **options: per-call ``retries``, ``backoff``, ``stall_timeout``.

        Raises:
            ShardNotFoundError: no such object or bucket.
            ShardReadError: the object is shorter, or the read failed.
            ShardOpenError: access denied, endpoint unreachable.
        """
        allowed = {"retries", "backoff", "stall_timeout"}
        reject_unknown_options(options, allowed, "s3 read_range()")
        cfg = self.config.resolve(options, environ={}) if options else self.config
        bucket, key = split_s3_url(url)
        if not key:
            raise ConfigError(f"URL {url!r} names a bucket, not an object")
        fetch = ObjectFetch(self.access(), url, bucket, key)
        return read_span(
            fetch.span,
            url=url,
            offset=offset,
            length=length,
            policy=RetryPolicy.from_config(cfg),
            retry_on=read_errors(),
            explain=fetch.explain,
            limiter=limiter_for(cfg.throttle_endpoint(bucket)),
        )

    # -- listing ---------------------------------------------------------------------------

    def list_sizes(self, url: str, *, page_size: int | None = None) -> list[tuple[str, int]]:
        """``(url, size in bytes)`` of every object under the prefix ``url``, sorted by URL
        (the sizes come with the listing: no request per object).

        ``s3://bucket/dir/`` lists a "directory" recursively, ``s3://bucket/dir/train-`` every key
        starting with that prefix, ``s3://bucket`` the whole bucket. All pages are read; keys
        ending in ``/`` (directory markers) are left out.

        Raises:
            ShardNotFoundError: the bucket does not exist.
            ShardOpenError: access denied, endpoint unreachable.
        """
        bucket, prefix = split_s3_url(url)
        size = page_size or self.config.list_page_size
        paginator = self.client().get_paginator("list_objects_v2")
        out: list[tuple[str, int]] = []
        with s3_request(self.translate_error, url=url):
            pages = paginator.paginate(
                Bucket=bucket,
                Prefix=prefix,
                PaginationConfig={"PageSize": size},
                **self.config.request_args(),
            )
            for page in pages:
                for item in page.get("Contents", ()):
                    if not item["Key"].endswith("/"):
                        out.append((f"s3://{bucket}/{item['Key']}", int(item["Size"])))
        out.sort()
        return out

    def list(self, url: str, *, page_size: int | None = None) -> list[str]:
        """Every object under the prefix ``url`` as full ``s3://bucket/key`` URLs, sorted.

        See :meth:`list_sizes`, which this is without the sizes.
        """
        return [u for u, _ in self.list_sizes(url, page_size=page_size)]

    # -- writing ---------------------------------------------------------------------------

    def create(self, url: str) -> Any:
        """A writable stream to ``url``: ``close()`` commits, ``abort()`` discards.

        See :class:`wds_cloud.openers.s3.write.S3Writer`.
        """
        from wds_cloud.openers.s3.write import S3Writer

        bucket, key = split_s3_url(url)
        if not key:
            raise ConfigError(f"URL {url!r} names a bucket, not an object")
        chunk = int(self.config.multipart_chunksize or 0)
        return S3Writer(self.access(read=False), url, bucket, key, chunk_size=chunk)
