"""Offline ETL on AIStore: transform a bucket, a prefix or a list of objects server-side.

AIStore runs a named ETL (initialised on the cluster beforehand, see ``docs/etl.md``) on every
selected object and writes each result into a destination bucket, without the data leaving
the cluster. This module starts such a job through the ``aistore`` SDK (``extra: ais``),
follows it with a progress bar (objects done / selected) and reports each object the ETL
failed on::

    from wds_cloud.aistore import transform

    result = ais_transform.transform("ais://raw", "ais://decoded", "decode-etl", prefix="train/")
    result.done, result.failed, [f.name for f in result.failures]

* A whole bucket or a ``prefix`` is one ``etl-bck`` job (the SDK's ``Bucket.transform``);
  a list of ``objects`` is one ``etl-listrange`` job (``bucket.objects(obj_names=...)
  .transform``). The destination bucket is created by the cluster when missing.
* ``ext={"tar": "out.tar"}`` renames the last extension, ``prepend="v2/"`` prefixes the names
  (AIStore's ``TCBMsg.ToName``); :func:`plan_transform` shows the names without running.
* Failed objects: the job goes on (``continue_on_error=True``, AIStore's ``coer``) and each
  failure is read back from the ETL's per-job error list (``GET /v1/etl/<name>?uuid=<job>``).
  AIStore keeps at most 128 errors per job and target; when more objects failed, ``failed``
  still counts them all (objects selected minus objects transformed).

Unless a ``client`` is given, requests go through the AIStore opener's client, so its
configuration applies (``endpoint=``/``config=``, ``AIS_ENDPOINT``, ``AIS_AUTHN_TOKEN``).

This module plans and starts jobs; following a started one (:func:`transform_status`,
:func:`wait_transform`, the job and result types) is :mod:`wds_cloud.aistore.transform_watch`,
whose public names are exported here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from wds_cloud.aistore.cluster import JobOptions, error_text, sdk_errors
from wds_cloud.aistore.transform_watch import (
    BUCKET_JOB,
    LIST_JOB,
    ObjectFailure,
    TransformError,
    TransformJob,
    TransformResult,
    bucket_url,
    transform_status,
    wait_transform,
    wait_transform_job,
)
from wds_cloud.errors import ConfigError

if TYPE_CHECKING:
    from wds_cloud.openers.ais.opener import AisConfig

__all__ = [
    "ObjectFailure",
    "TransformError",
    "TransformJob",
    "TransformResult",
    "destination_name",
    "plan_transform",
    "start_transform",
    "transform",
    "transform_status",
    "wait_transform",
]

#: The cluster's per-object ETL timeout unless ``request_timeout=`` says (a Go duration).
REQUEST_TIMEOUT = "5m"

# ------------------------------------------------------------------------------------- helpers


def _bucket_spec(spec: str, what: str) -> tuple[str, str]:
    """``(provider, name)`` of ``NAME``, ``ais://NAME`` or ``s3://NAME`` (an AIS-fronted bucket)."""
    from wds_cloud.openers.ais.opener import PROVIDERS

    if "://" not in spec:
        name, provider = spec, "ais"
    else:
        parts = urlsplit(spec)
        provider = PROVIDERS.get(parts.scheme.lower(), "")
        if not provider:
            raise ConfigError(
                f"{what} {spec!r}: unknown provider {parts.scheme!r}; use one of {sorted(PROVIDERS)}"
            )
        if parts.path.strip("/") or parts.query:
            raise ConfigError(
                f"{what} {spec!r} names more than a bucket; give the bucket and select "
                "objects with prefix= (--prefix) or objects= (--objects-file)"
            )
        name = parts.netloc
    if not name or "/" in name:
        raise ConfigError(f"{what} {spec!r}: expected a bucket name such as ais://images")
    return provider, name


def destination_name(name: str, ext: Mapping[str, str] | None = None, prepend: str = "") -> str:
    """The destination name AIStore gives ``name`` (``TCBMsg.ToName``).

    The last extension (after the last dot) is replaced when ``ext`` maps it
    (``{"tar": "out.tar"}``: ``a/s.tar`` -> ``a/s.out.tar``), then ``prepend`` is added.
    """
    if ext:
        dot = name.rfind(".")
        if dot >= 0 and name[dot + 1 :] in ext:
            name = name[: dot + 1] + ext[name[dot + 1 :]].lstrip(".")
    return prepend + name


def _check_selection(prefix: str, objects: Sequence[str] | None) -> list[str] | None:
    if objects is None:
        return None
    if isinstance(objects, str):
        raise ConfigError("objects= takes a list of object names, not one string")
    if prefix:
        raise ConfigError("give prefix= or objects=, not both")
    names = [str(n) for n in objects]
    if not names:
        raise ConfigError("objects= is empty: nothing to transform")
    bad = [n for n in names if not n or n.startswith("/")]
    if bad:
        raise ConfigError(f"objects=: invalid object name(s) {bad[:5]} (no leading '/')")
    return names


def _list_names(bucket: Any, prefix: str, where: str) -> list[str]:
    try:
        return [e.name for e in bucket.list_objects_iter(prefix=prefix, props="name")]
    except sdk_errors() as exc:
        raise TransformError(f"cannot list {where}: {error_text(exc)}") from exc


# -------------------------------------------------------------------------------------- public


def plan_transform(
    src: str,
    *,
    prefix: str = "",
    objects: Sequence[str] | None = None,
    ext: Mapping[str, str] | None = None,
    prepend: str = "",
    client: Any = None,
    endpoint: str | None = None,
    config: AisConfig | None = None,
) -> list[tuple[str, str]]:
    """What a transform would do, without running it: ``(source name, destination name)``.

    A ``prefix`` (or the whole bucket) is listed; ``objects`` are taken as given.

    Raises:
        ConfigError: a malformed bucket or selection.
        TransformError: the source bucket cannot be listed.
    """
    provider, name = _bucket_spec(src, "source bucket")
    names = _check_selection(prefix, objects)
    if names is None:
        ais = JobOptions(client=client, endpoint=endpoint, config=config).sdk_client()
        bucket = ais.bucket(name, provider=provider)
        names = _list_names(bucket, prefix, bucket_url(provider, name) + "/" + prefix)
    return [(n, destination_name(n, ext, prepend)) for n in names]


def start_transform(
    src: str,
    dst: str,
    etl: str,
    *,
    prefix: str = "",
    objects: Sequence[str] | None = None,
    ext: Mapping[str, str] | None = None,
    prepend: str = "",
    continue_on_error: bool = True,
    count: bool = True,
    request_timeout: str = REQUEST_TIMEOUT,
    client: Any = None,
    endpoint: str | None = None,
    config: AisConfig | None = None,
) -> TransformJob:
    """Starts an offline transform of ``src`` into ``dst`` with the ETL called ``etl``.

    Args:
        src: source bucket: ``NAME``, ``ais://NAME`` (or ``s3://NAME``... for a cloud bucket
            behind AIStore).
        dst: destination bucket (created by the cluster when missing); not ``src``.
        etl: name of an ETL running on the cluster.
        prefix: only objects whose names start with it (default: the whole bucket).
        objects: exactly these object names instead (an ``etl-listrange`` job).
        ext: last-extension renames for the destination names (``{"jpg": "png"}``).
        prepend: prefix added to every destination name.
        continue_on_error: go on past failed objects (reported at the end); False aborts the
            job at the first failure.
        count: list the selected objects first so progress has a total and every failure is
            counted (one listing of the prefix); a list of ``objects`` is always counted.
        request_timeout: per-object ETL timeout on the cluster (Go duration, ``"5m"``).
        client: an ``aistore.sdk.Client``; default: the AIStore opener's client.
        endpoint: the AIStore URL (default: ``config``'s, else ``AIS_ENDPOINT``).
        config: an :class:`~wds_cloud.openers.ais.opener.AisConfig` (token, timeouts, retries).

    Returns:
        The started job.

    Raises:
        ConfigError: malformed buckets or selection, or ``src`` == ``dst``.
        TransformError: the cluster refused the job (unknown ETL, missing source bucket...).
        MissingDependencyError: the ``aistore`` SDK is not installed.
    """
    return _start_transform(
        src,
        dst,
        etl,
        prefix=prefix,
        objects=objects,
        ext=ext,
        prepend=prepend,
        continue_on_error=continue_on_error,
        count=count,
        request_timeout=request_timeout,
        options=JobOptions(client=client, endpoint=endpoint, config=config),
    )


def _start_transform(
    src: str,
    dst: str,
    etl: str,
    *,
    prefix: str,
    objects: Sequence[str] | None,
    ext: Mapping[str, str] | None,
    prepend: str,
    continue_on_error: bool,
    count: bool,
    request_timeout: str,
    options: JobOptions,
) -> TransformJob:
    if not etl:
        raise ConfigError("no ETL name given")
    names = _check_selection(prefix, objects)
    src_p, src_n = _bucket_spec(src, "source bucket")
    dst_p, dst_n = _bucket_spec(dst, "destination bucket")
    src_url = bucket_url(src_p, src_n)
    if (src_p, src_n) == (dst_p, dst_n):
        raise ConfigError(f"source and destination are the same bucket {src_url}")
    ais = options.sdk_client()
    try:
        ais.etl(etl)  # the SDK checks the name's syntax
    except ValueError as exc:
        raise ConfigError(f"invalid ETL name {etl!r}: {exc}") from exc
    bucket, to_bck = ais.bucket(src_n, provider=src_p), ais.bucket(dst_n, provider=dst_p)
    total = len(names) if names is not None else None
    if names is None and count:
        total = len(_list_names(bucket, prefix, f"{src_url}/{prefix}"))
    ext_map = dict(ext) if ext else None
    try:
        if names is None:
            kind = BUCKET_JOB
            job_id = bucket.transform(
                etl,
                to_bck,
                timeout=request_timeout,
                prefix_filter=prefix,
                prepend=prepend,
                ext=ext_map,
                cont_on_err=continue_on_error,
            )
        else:
            kind = LIST_JOB
            job_id = bucket.objects(obj_names=names).transform(
                to_bck,
                etl,
                timeout=request_timeout,
                prepend=prepend,
                ext=ext_map,
                continue_on_error=continue_on_error,
            )
    except sdk_errors() as exc:
        raise TransformError(
            f"AIStore refused to transform {src_url} with ETL {etl!r}: {error_text(exc)}"
        ) from exc
    return TransformJob(
        job_id=str(job_id).strip(),
        kind=kind,
        etl=etl,
        src=src_url,
        dst=bucket_url(dst_p, dst_n),
        total=total,
    )


def transform(
    src: str,
    dst: str,
    etl: str,
    *,
    prefix: str = "",
    objects: Sequence[str] | None = None,
    ext: Mapping[str, str] | None = None,
    prepend: str = "",
    continue_on_error: bool = True,
    count: bool = True,
    timeout: float = 3600.0,
    progress: bool = True,
    poll_interval: float = 1.0,
    client: Any = None,
    endpoint: str | None = None,
    config: AisConfig | None = None,
) -> TransformResult:
    """Starts a transform and waits for it: :func:`start_transform` (same selection, naming,
    ``continue_on_error`` and ``count``), then :func:`wait_transform`.

    Raises:
        TransformError: refused, objects failed (named in the message, listed in
            ``.result.failures``), aborted, or still running after ``timeout`` seconds.
        ConfigError: malformed buckets or selection.
    """
    options = JobOptions(
        client=client,
        endpoint=endpoint,
        config=config,
        timeout=timeout,
        progress=progress,
        poll_interval=poll_interval,
    ).connected()
    job = _start_transform(
        src,
        dst,
        etl,
        prefix=prefix,
        objects=objects,
        ext=ext,
        prepend=prepend,
        continue_on_error=continue_on_error,
        count=count,
        request_timeout=REQUEST_TIMEOUT,
        options=options,
    )
    return wait_transform_job(job, None, options)
