"""``USE_AIS_FOR``: read ``s3://`` (and ``gs://``) URLs through an AIStore cluster.

webdataset 1.0.2 sends the URL schemes listed in ``USE_AIS_FOR`` (colon-separated, e.g.
``s3:gs``) to the ``ais`` command line, so a cluster that has the cloud bucket behind it
serves the reads and keeps a copy (its cache). wds_cloud does the same with the ``aistore`` SDK:
with ``USE_AIS_FOR=s3`` and ``AIS_ENDPOINT`` set, ``s3://b/k`` is read as
``ais://b/k?provider=aws`` (``gs://`` and ``gcs://`` as ``provider=gcp``), listed too, and every
URL handed back (listing, errors, ``__url__``) is the user's ``s3://`` URL.

The variable is read each time the registry looks up an opener (:meth:`OpenerRegistry.get`),
never at import. Writes are not routed: ``create()`` goes to the scheme's own opener, so shards
are written straight to S3 or GCS (webdataset's ``gopen`` pipes writes to ``ais put`` instead;
see ``docs/aistore.md``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from wds_cloud.errors import ConfigError, ShardError
from wds_cloud.openers.ais.config import AIS_SETTINGS
from wds_cloud.openers.capabilities import RangeRequest
from wds_cloud.openers.s3.config import split_s3_url
from wds_cloud.urls import parse_object_url

if TYPE_CHECKING:
    from typing import Self

    from typing_extensions import Buffer

__all__ = ["ROUTES", "USE_AIS_FOR", "AisRoute", "ais_url", "require_endpoint", "routed_provider"]

USE_AIS_FOR = "USE_AIS_FOR"
#: names ``USE_AIS_FOR`` takes -> (the URL schemes they route, the AIStore provider)
ROUTES: dict[str, tuple[tuple[str, ...], str]] = {
    "s3": (("s3",), "aws"),
    "gs": (("gs", "gcs"), "gcp"),
    "gcs": (("gs", "gcs"), "gcp"),
}
#: names accepted and ignored: webdataset's docstring example is ``USE_AIS_FOR=aws:gs:s3``,
#: and no URL has the scheme ``aws``
_IGNORED = ("aws",)
_SAFE = "/-_.~!$&'()*+,;=:@"  # as the ais:// opener writes names into URLs


@functools.lru_cache(maxsize=8)
def _providers(text: str) -> dict[str, str]:
    """URL scheme -> provider for a ``USE_AIS_FOR`` value."""
    routed: dict[str, str] = {}
    for raw in text.split(":"):
        name = raw.strip().lower()
        if not name or name in _IGNORED:
            continue
        if name not in ROUTES:
            raise ConfigError(
                f"{USE_AIS_FOR}={text!r}: {name!r} is not a scheme wds_cloud can read through "
                f"AIStore; use a colon-separated list of {sorted(ROUTES)}"
            )
        schemes, provider = ROUTES[name]
        routed.update(dict.fromkeys(schemes, provider))
    return routed


def routed_provider(scheme: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The AIStore provider that ``scheme`` is read through (``"aws"``, ``"gcp"``), or None
    when ``USE_AIS_FOR`` (in ``environ``, default ``os.environ``) does not list it.

    Raises:
        ConfigError: ``USE_AIS_FOR`` names something other than ``s3``, ``gs``, ``gcs``
            (``aws`` is accepted and means nothing).
    """
    text = (os.environ if environ is None else environ).get(USE_AIS_FOR, "")
    return _providers(text).get(scheme.lower()) if text.strip() else None


def require_endpoint(url_scheme: str, environ: Mapping[str, str] | None = None) -> None:
    """Raise unless the environment names the cluster (``AIS_ENDPOINT`` or
    ``WDS_CLOUD_AIS_ENDPOINT``): a routed read must not silently go to ``localhost:8080``.

    Raises:
        ConfigError: neither variable is set; the message names both and ``USE_AIS_FOR``.
    """
    env = os.environ if environ is None else environ
    names = AIS_SETTINGS.variables("endpoint")
    if not any((env.get(name) or "").strip() for name in names):
        raise ConfigError(
            f"{USE_AIS_FOR}={env.get(USE_AIS_FOR, '')!r} reads {url_scheme}:// URLs through "
            f"AIStore, but no cluster is named: set {' or '.join(reversed(names))} "
            "(or unset USE_AIS_FOR to read them directly)"
        )


def ais_url(url: str, provider: str) -> str:
    """The ``ais://`` URL that reads ``url`` (``s3://b/k``, ``gs://b/k``) from the cluster's
    ``provider`` bucket ``b``.

    Raises:
        ConfigError: not an ``s3://``/``gs://``/``gcs://`` URL, no bucket, or query options on a
            ``gs://`` URL (``?generation=`` cannot be sent through AIStore).
    """
    if provider == "aws":
        bucket, key = split_s3_url(url)  # S3 keys are verbatim, "?" included
    else:
        parsed = parse_object_url(url, schemes=("gs", "gcs"))
        if parsed.query:
            raise ConfigError(
                f"URL {url!r}: options {sorted(parsed.query)} cannot be read through AIStore "
                f"({USE_AIS_FOR}); drop them or unset {USE_AIS_FOR}"
            )
        bucket, key = parsed.bucket, parsed.key
    return f"ais://{bucket}/{quote(key, safe=_SAFE)}?provider={provider}"


def _user_url(scheme: str, routed: str) -> str:
    """``ais://b/<quoted name>?provider=..`` (from the ais:// lister) -> ``scheme://b/name``."""
    rest = routed[len("ais://") :].split("?", 1)[0]
    bucket, _, name = rest.partition("/")
    return f"{scheme}://{bucket}/{unquote(name)}"


class AisRoute:
    """The opener a registry gives for a scheme that ``USE_AIS_FOR`` lists: reads, ranged
    reads and listings of ``scheme://b/k`` go to ``ais`` (an ``ais://`` opener) as
    ``ais://b/k?provider=<provider>``; ``create()`` goes to ``direct()``, the scheme's own
    opener. Errors keep their class and name both URLs and the cluster.

    Args:
        ais: the ``ais://`` opener (the registry's, so its endpoint and token apply).
        scheme: the routed scheme (``s3``, ``gs``, ``gcs``).
        provider: the AIStore provider of that scheme's buckets (``aws``, ``gcp``).
        direct: returns the scheme's own opener (called only to write).
    """

    remote = True  # streams come over a network: the registry reads them ahead

    def __init__(self, ais: Any, scheme: str, provider: str, direct: Callable[[], Any]) -> None:
        self.ais = ais
        self.scheme = scheme
        self.provider = provider
        self._direct = direct

    def __repr__(self) -> str:
        return f"AisRoute({self.scheme}:// via {self.endpoint()} provider={self.provider})"

    def endpoint(self) -> str:
        """The cluster's URL, as the ``ais://`` opener has it."""
        return str(getattr(getattr(self.ais, "config", None), "endpoint", "(unknown endpoint)"))

    def route(self, url: str) -> str:
        """The ``ais://`` URL that reads ``url``."""
        return ais_url(url, self.provider)

    def explain(self, exc: ShardError, url: str) -> ShardError:
        """``exc`` again (same class), about ``url``, its message naming the AIStore route."""
        detail = (
            f"{exc.reason} (read through AIStore at {self.endpoint()} as "
            f"{self.route(url)}, because {USE_AIS_FOR}={os.environ.get(USE_AIS_FOR, '')!r})"
        )
        return type(exc)(detail, url=url, offset=exc.offset, member=exc.member)

    # reads -----------------------------------------------------------------------------------
    def open(self, url: str, **options: Any) -> RoutedStream:
        """Open ``url`` for streaming from the cluster (see the ``ais://`` opener's ``open``).

        Raises:
            ShardNotFoundError, ShardOpenError: as the ``ais://`` opener, naming ``url`` and
                the route.
            ConfigError: a URL that cannot be routed, an option the ``ais://`` opener lacks.
        """
        try:
            stream = self.ais.open(self.route(url), **options)
        except ShardError as exc:
            raise self.explain(exc, url) from exc
        return RoutedStream(stream, self, url)

    def open_at(self, url: str, offset: int, **options: Any) -> RoutedStream:
        """Open ``url`` from byte ``offset`` (one ranged GET to the cluster)."""
        try:
            stream = self.ais.open_at(self.route(url), offset, **options)
        except ShardError as exc:
            raise self.explain(exc, url) from exc
        return RoutedStream(stream, self, url)

    def byte_addressable(self, url: str) -> bool:
        """True: the cluster serves the stored object's bytes (no ETL on a routed URL)."""
        return True

    def read_range(self, url: str, offset: int, length: int, **options: Any) -> bytes:
        """Bytes ``offset .. offset + length`` of ``url``, one ranged GET to the cluster."""
        try:
            return bytes(self.ais.read_range(self.route(url), offset, length, **options))
        except ShardError as exc:
            raise self.explain(exc, url) from exc

    def read_batch(self, requests: Sequence[RangeRequest], **options: Any) -> list[bytes]:
        """Every range of ``requests``, in order, with the cluster's GetBatch (the ``ais://``
        opener's ``read_batch``); an error names the user's URL and the route."""
        routed = [RangeRequest(self.route(r.url), r.offset, r.length) for r in requests]
        users = {via.url: r.url for via, r in zip(routed, requests, strict=True)}
        try:
            return list(self.ais.read_batch(routed, **options))
        except ShardError as exc:
            raise self.explain(exc, users.get(exc.url or "", requests[0].url)) from exc

    def stall_bound(self) -> float:
        """The ``ais://`` opener's bound on a read without a new byte."""
        return float(self.ais.stall_bound())

    # listing ---------------------------------------------------------------------------------
    def list_sizes(self, url: str) -> list[tuple[str, int | None]]:
        """``(scheme://b/key, size)`` of every object under the prefix ``url``, listed by the
        cluster (which asks the cloud bucket), sorted; on ``s3`` keys ending in ``/``
        (directory markers) are left out, as the ``s3://`` lister does.

        Raises:
            ShardNotFoundError: the bucket does not exist (naming ``url`` and the route).
            ShardOpenError: the cluster cannot be reached or refuses.
        """
        try:
            listed = self.ais.list_sizes(self.route(url))
        except ShardError as exc:
            raise self.explain(exc, url) from exc
        out = [(_user_url(self.scheme, routed), size) for routed, size in listed]
        if self.scheme == "s3":
            out = [(u, size) for u, size in out if not u.endswith("/")]
        return sorted(out, key=lambda item: item[0])

    def list(self, url: str) -> list[str]:
        """Every object under the prefix ``url`` as ``scheme://`` URLs (see :meth:`list_sizes`)."""
        return [u for u, _ in self.list_sizes(url)]

    # writes ----------------------------------------------------------------------------------
    def create(self, url: str) -> Any:
        """A writer from the scheme's own opener: writes go straight to the cloud bucket."""
        return self._direct().create(url)


class RoutedStream:
    """A stream from the cluster whose errors name the user's URL and the route; every other
    attribute (``tell``, ``read1``, ``position``...) is the inner stream's."""

    def __init__(self, inner: Any, route: AisRoute, url: str) -> None:
        self._inner = inner
        self._route = route
        self.url = url

    def read(self, size: int = -1, /) -> bytes:
        try:
            return bytes(self._inner.read(size))
        except ShardError as exc:
            raise self._route.explain(exc, self.url) from exc

    def readinto(self, buffer: Buffer, /) -> int:
        try:
            return int(self._inner.readinto(buffer))
        except ShardError as exc:
            raise self._route.explain(exc, self.url) from exc

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._inner.close()

    @property
    def closed(self) -> bool:
        return bool(self._inner.closed)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_inner", "_route"):
            raise AttributeError(name)
        return getattr(self._inner, name)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> None:
        self.close()
