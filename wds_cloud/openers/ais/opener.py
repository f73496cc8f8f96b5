"""AIStore backend: ``ais://bucket/object`` through the ``aistore`` SDK (extra ``ais``).

URLs::

    ais://bucket/shard-000.tar                       an object in an AIS bucket
    ais://bucket/shard-000.tar?provider=aws          an AIS-fronted cloud bucket (aws|gcp|azure|oci)
    ais://bucket/shard-000.tar?etl=upper-etl         inline ETL by name (transformed server-side)
    ais://bucket/shard-000.tar?etl=x&etl_args=...    ... with arguments (sent verbatim)

The object name is the URL path, percent-decoded (``%20`` is a space, ``%3F`` a ``?``); names
returned by :meth:`AisOpener.list` are encoded the same way, so they round-trip.

Environment (read by :meth:`AisConfig.resolve` when an :class:`AisOpener` is created, never at
import): ``WDS_CLOUD_AIS_<FIELD>`` for every field, then ``AIS_ENDPOINT`` (the SDK itself does
not read it; default ``http://localhost:8080``), ``AIS_AUTHN_TOKEN``, ``AIS_CONNECT_TIMEOUT``
and ``AIS_READ_TIMEOUT`` (:data:`~wds_cloud.openers.ais.config.AIS_SETTINGS`). The SDK's TLS
variables (``AIS_SKIP_VERIFY_CRT``, ``AIS_CLIENT_CA``, ``AIS_CRT``/``AIS_CRT_KEY``) and
``AIS_MAX_CONN_POOL`` apply as usual.

Reads go through :class:`~wds_cloud.openers.streams.resumable.ResumableReader` on an SDK client of their
own that makes one attempt per request (the read loop retries with ``retries``/``backoff``);
its socket reads wait at most ``min(read timeout, stall_timeout)``. A read that gets no new
byte for ``stall_timeout`` seconds (default 60) raises :class:`ShardReadError` ("stalled"), at
most :meth:`AisOpener.stall_bound` seconds (103 with the SDK's default timeouts) after its
last byte.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote, unquote

from wds_cloud.errors import ConfigError, MissingDependencyError, ShardError
from wds_cloud.openers.ais.batch import read_batch
from wds_cloud.openers.ais.config import (
    AIS_SETTINGS,
    DEFAULT_ENDPOINT,
    PROVIDERS,
    URL_OPTIONS,
    AisConfig,
    AisTarget,
    etl_args_text,
    provider_name,
)
from wds_cloud.openers.ais.errors import translate_error
from wds_cloud.openers.clients import ProcessLocal
from wds_cloud.openers.streams.backoff import RetryPolicy, stall_bound
from wds_cloud.openers.streams.prefetch import PREFETCH_OPTIONS
from wds_cloud.openers.streams.resumable import ResumableReader, read_span
from wds_cloud.openers.streams.stream import ReadStream
from wds_cloud.openers.streams.throttle import limiter_for
from wds_cloud.settings import reject_unknown_options
from wds_cloud.urls import parse_object_url

try:
    import aistore
    import urllib3

    from wds_cloud.openers.ais.read import (
        AisAccess,
        Fetcher,
        make_read_client,
        read_timeouts,
    )
    from wds_cloud.openers.ais.write import AisWriter
except ImportError:  # pragma: no cover - exercised only without the extra
    aistore = None

SCHEMES = ("ais",)
__all__ = ["DEFAULT_ENDPOINT", "PROVIDERS", "SCHEMES", "AisConfig", "AisOpener", "AisTarget"]

OPEN_OPTIONS = ("etl", "etl_args")  # keyword options of open() and open_at()
_SAFE = "/-_.~!$&'()*+,;=:@"


def _watched_environment() -> tuple[str | None, ...]:
    """The values of the variables an opener's endpoint and token come from."""
    names = (*AIS_SETTINGS.variables("endpoint"), *AIS_SETTINGS.variables("token"))
    return tuple(os.environ.get(name) for name in names)


def _require_sdk() -> None:
    if aistore is None:
        raise MissingDependencyError("the ais:// backend needs the 'aistore' SDK", extra="ais")


class AisOpener:
    """Opener for ``ais://`` URLs (read with optional inline ETL, list, write).

    Args:
        config: an :class:`AisConfig`; a default one (environment) when None.
        **overrides: fields replacing those of ``config`` (``endpoint=``, ``etl=``, ...).
    """

    remote: bool = True  # streams come over a network: the registry reads them ahead

    def __init__(self, config: AisConfig | None = None, **overrides: Any) -> None:
        self._environ = _watched_environment()
        self.config = (config or AisConfig()).resolve(overrides)
        # per process, never pickled: an unpickled opener carries its config only
        self._client: ProcessLocal[Any] = ProcessLocal()
        self._read_client: ProcessLocal[Any] = ProcessLocal()

    def environment_changed(self) -> bool:
        """Whether the endpoint or token variables (``AIS_ENDPOINT``, ``AIS_AUTHN_TOKEN`` and
        their ``WDS_CLOUD_AIS_*`` twins) changed since this opener was made. A registry makes
        a new built-in opener when they did (AuthN tokens expire and get refreshed); an
        opener keeps the configuration it was made with."""
        return _watched_environment() != self._environ

    # client and errors -----------------------------------------------------------------------
    def client(self) -> Any:
        """The SDK ``Client`` of this process (created on first use after a fork/unpickle)."""
        _require_sdk()
        return self._client.get(self._make_client)

    def _make_client(self) -> Any:
        from aistore.sdk import Client
        from aistore.sdk.retry_config import NETWORK_RETRY_EXCEPTIONS, RetryConfig
        from tenacity import (
            Retrying,
            retry_if_exception_type,
            stop_after_attempt,
            wait_exponential,
        )

        cfg = self.config
        retry = RetryConfig(
            http_retry=urllib3.Retry(
                total=cfg.retries,
                backoff_factor=float(cfg.backoff or 0),
                status_forcelist=[429, 500, 502, 503, 504],
                connect=0,
                read=0,
            ),
            network_retry=Retrying(
                stop=stop_after_attempt(int(cfg.retries or 0) + 1),
                wait=wait_exponential(multiplier=cfg.backoff or 0, max=cfg.max_backoff),
                retry=retry_if_exception_type(NETWORK_RETRY_EXCEPTIONS),
                reraise=True,
            ),
        )
        return Client(str(cfg.endpoint), timeout=cfg.timeout, retry_config=retry, token=cfg.token)

    def read_client(self) -> Any:
        """The SDK ``Client`` of this process for object reads: no SDK retries (the read loop
        retries) and the read timeout clipped to the stall deadline."""
        _require_sdk()
        return self._read_client.get(lambda: make_read_client(self.config))

    def stall_bound(self) -> float:
        """Seconds a read can go without a new byte before it raises (with these settings)."""
        _require_sdk()
        connect, read = read_timeouts(self.config)
        return stall_bound(float(self.config.stall_timeout or 0), connect, read)

    def translate_error(
        self,
        exc: BaseException,
        /,
        *,
        url: str,
        offset: int | None = None,
        action: str = "GET",
        etl: str | None = None,
    ) -> ShardError:
        """:func:`wds_cloud.openers.ais.errors.translate_error` with this opener's endpoint."""
        endpoint = self.config.endpoint
        return translate_error(
            exc, url=url, offset=offset, endpoint=endpoint, action=action, etl=etl
        )

    def access(self) -> AisAccess:
        """The clients, settings and error translation a reader gets from this opener."""
        return AisAccess(self.client(), self.read_client(), self.config, self.translate_error)

    # URLs ------------------------------------------------------------------------------------
    def target(
        self, url: str, etl: str | None = None, etl_args: str | dict[str, Any] | None = None
    ) -> AisTarget:
        """Parse ``url``; URL query options win over arguments, which win over the config.

        Raises:
            ConfigError: not ``ais://``, no bucket, an unknown query option or provider.
        """
        if "#" in url:
            raise ConfigError(f"URL {url!r}: encode '#' in object names as %23")
        parsed = parse_object_url(url, schemes=SCHEMES)
        unknown = sorted(set(parsed.query) - set(URL_OPTIONS))
        if unknown:
            raise ConfigError(
                f"URL {url!r}: unknown option(s) {unknown}; known: {list(URL_OPTIONS)}"
            )
        q = parsed.query
        provider = (
            provider_name(q["provider"], url) if "provider" in q else str(self.config.provider)
        )
        etl_name = q.get("etl") or etl or self.config.etl
        args = q["etl_args"] if "etl_args" in q else etl_args_text(etl_args)
        if args is None:
            args = self.config.etl_args  # type: ignore[assignment]
        query = url.split("?", 1)[1] if "?" in url else ""
        return AisTarget(
            url=url,
            bucket=parsed.bucket,
            name=unquote(parsed.key),
            provider=provider,
            etl=etl_name or None,
            etl_args=args if etl_name else None,
            query=query,
        )

    def object(self, target: AisTarget) -> Any:
        """The SDK ``Object`` of ``target`` on :meth:`client` (SDK retries)."""
        return self.client().bucket(target.bucket, provider=target.provider).object(target.name)

    # read ------------------------------------------------------------------------------------
    def open(
        self,
        url: str,
        *,
        etl: str | None = None,
        etl_args: str | dict[str, Any] | None = None,
        **options: Any,
    ) -> ReadStream:
        """Open an object for streaming, through an inline ETL when one is named.

        The first GET happens here, so a missing object fails at once. A dropped stream is
        resumed with ``Range: bytes=<offset>-`` (the object's checksum is pinned), or, through
        an ETL (AIStore ignores ``Range`` there), by re-requesting and skipping the bytes
        already delivered.

        Args:
            url: ``ais://bucket/object[?provider=..&etl=..&etl_args=..]``.
            etl: inline ETL name (the URL's ``?etl=`` wins).
            etl_args: ETL arguments; a dict is sent as compact JSON.
            **options: ``prefetch``/``prefetch_chunk`` override the config for this call.

        Raises:
            ShardNotFoundError: bucket or object missing.
            ShardOpenError: unknown ETL, unreachable endpoint, other AIStore errors.
            MissingDependencyError: the ``aistore`` SDK is not installed.
            ConfigError: bad URL or unknown option.
        """
        reject_unknown_options(options, (*OPEN_OPTIONS, *PREFETCH_OPTIONS), "ais open()")
        cfg = self.config.resolve(options, environ={}) if options else self.config
        if cfg.prefetch:
            _require_sdk()
            from wds_cloud.openers.ais.prefetch import open_prefetching

            stream = open_prefetching(self.access(), cfg, self.target(url, etl, etl_args))
            if stream is not None:
                return stream
        return self._reader(url, 0, etl, etl_args)

    def open_at(
        self,
        url: str,
        offset: int,
        *,
        etl: str | None = None,
        etl_args: str | dict[str, Any] | None = None,
        **options: Any,
    ) -> ResumableReader:
        """Open an object for streaming from byte ``offset``: one GET with
        ``Range: bytes=<offset>-``, resumed like :meth:`open`. Resumable loading reads shard
        tails with it.

        Through an inline ETL the output is not byte-addressable (AIStore ignores ``Range``
        there and the transformed object has offsets of its own): the transformed object is
        requested from its start and the bytes before ``offset`` are read and dropped.

        Raises:
            ConfigError: a negative offset, bad URL or unknown option.
            ShardOpenError: ``offset`` beyond the end of the object (its size from a HEAD);
                as :meth:`open`.
            ShardNotFoundError: bucket or object missing.
        """
        reject_unknown_options(options, OPEN_OPTIONS, "ais open_at()")
        if offset < 0:
            raise ConfigError(f"open_at() offset must be >= 0, got {offset} for {url!r}")
        return self._reader(url, offset, etl, etl_args)

    def _reader(
        self, url: str, offset: int, etl: str | None, etl_args: str | dict[str, Any] | None
    ) -> ResumableReader:
        _require_sdk()
        target = self.target(url, etl, etl_args)
        fetcher = Fetcher(self.access(), target)
        reader = ResumableReader(
            fetcher,
            url=url,
            policy=RetryPolicy.from_config(self.config),
            retry_on=fetcher.retry_on,
            explain=fetcher.explain,
            limiter=limiter_for(str(self.config.endpoint)),
        )
        reader.position = offset
        return reader.start()

    def byte_addressable(self, url: str) -> bool:
        """False for a URL through an inline ETL: offsets in what it reads are the transformed
        stream's, which :meth:`read_range` cannot fetch (resume then reads such a shard from its
        start)."""
        return not self.target(url).etl

    def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes:
        """Bytes ``offset .. offset + length`` of an object with one ranged GET (resumed like a
        streaming read if the connection drops).

        Raises:
            ConfigError: the URL names an inline ETL (offsets describe the stored object, not
                the ETL's output), or an unknown option.
            ShardNotFoundError: bucket or object missing.
            ShardReadError: the object is shorter, or the read failed.
        """
        reject_unknown_options(options, (), "ais read_range()")
        _require_sdk()
        target = self.target(url)
        if target.etl:
            raise ConfigError(
                f"cannot read a byte range through the inline ETL {target.etl!r} ({url!r}): "
                "index offsets describe the stored object; read without ?etl= and transform "
                "the samples yourself"
            )
        fetcher = Fetcher(self.access(), target)
        return read_span(
            fetcher.span,
            url=url,
            offset=offset,
            length=length,
            policy=RetryPolicy.from_config(self.config),
            retry_on=fetcher.retry_on,
            explain=fetcher.explain,
            limiter=limiter_for(str(self.config.endpoint)),
        )

    read_batch = read_batch  # many ranges in one GetBatch request (openers/ais/batch.py)

    # list ------------------------------------------------------------------------------------
    def list_sizes(self, url: str) -> list[tuple[str, int | None]]:
        """``(url, size in bytes)`` of every object under ``ais://bucket/prefix``, sorted by
        name, all pages; the sizes come with the listing (``props="name,size"``). Through an
        inline ETL (``?etl=``) the size is None: the listing gives the stored object's size,
        not the size of what the ETL will return.

        The URL's query (``?provider=..&etl=..``) is kept on every returned URL.

        Raises:
            ShardNotFoundError: the bucket does not exist.
            ShardOpenError: endpoint or other AIStore errors.
        """
        _require_sdk()
        target = self.target(url)
        bucket = self.client().bucket(target.bucket, provider=target.provider)
        suffix = f"?{target.query}" if target.query else ""
        try:
            entries = bucket.list_objects_iter(
                prefix=target.name, props="name,size", page_size=self.config.page_size
            )
            named = [(e.name, int(e.size or 0)) for e in entries]
        except Exception as exc:
            raise self.translate_error(exc, url=target.url, action="list", etl=target.etl) from exc
        urls = [f"ais://{target.bucket}/{quote(n, safe=_SAFE)}{suffix}" for n, _ in named]
        if target.etl:
            return [(u, None) for u in urls]
        return [(u, size) for u, (_, size) in zip(urls, named, strict=True)]

    def list(self, url: str) -> list[str]:
        """Every object under ``ais://bucket/prefix`` as full URLs, sorted, all pages.

        See :meth:`list_sizes`, which this is without the sizes.
        """
        return [u for u, _ in self.list_sizes(url)]

    # write -----------------------------------------------------------------------------------
    def create(self, url: str) -> AisWriter:
        """A writable stream for ``url``: ``close()`` commits, ``abort()`` discards.

        Raises:
            ConfigError: the URL names an ETL (writes are never transformed).
        """
        _require_sdk()
        target = self.target(url)
        if target.etl:
            raise ConfigError(f"cannot write through an ETL: {url!r}")
        part_size = int(self.config.part_size or 1)
        endpoint = str(self.config.endpoint)
        return AisWriter(self.object(target), target.url, part_size=part_size, endpoint=endpoint)
