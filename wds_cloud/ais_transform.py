"""Offline ETL on AIStore: transform a bucket, a prefix or a list of objects server-side.

AIStore runs a named ETL (initialised on the cluster beforehand, see ``docs/etl.md``) on every
selected object and writes each result into a destination bucket, without the data leaving
the cluster. This module starts such a job through the ``aistore`` SDK (``extra: ais``),
follows it with a progress bar (objects done / selected) and reports each object the ETL
failed on::

    from wds_cloud import ais_transform

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
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from wds_cloud.dsort.job import error_text, sdk_client, sdk_errors
from wds_cloud.errors import ConfigError, WdsCloudError

if TYPE_CHECKING:
    from wds_cloud.openers.ais import AisConfig

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

BUCKET_JOB = "etl-bck"
LIST_JOB = "etl-listrange"
GO_ZERO_TIME = "0001-01-01T00:00:00Z"


class TransformError(WdsCloudError, RuntimeError):
    """The cluster refused a transform, or the job failed objects, aborted or timed out.

    Attributes:
        job_id: the job id, when the job started.
        result: the job's state when it ended (or when waiting gave up), when known.
    """

    def __init__(
        self, message: str, *, job_id: str | None = None, result: TransformResult | None = None
    ) -> None:
        super().__init__(message + (f" [job={job_id}]" if job_id else ""))
        self.job_id = job_id
        self.result = result


@dataclass(frozen=True)
class ObjectFailure:
    """One object the ETL failed on, as the cluster reported it.

    Attributes:
        url: the source object, ``ais://bucket/name``.
        name: the object name in the source bucket.
        message: the error (the ETL server's reply, or ``object not found``).
        code: the HTTP status behind the error.
    """

    url: str
    name: str
    message: str
    code: int

    @property
    def brief(self) -> str:
        """The message on one line, HTML markup of an ETL server's error page dropped."""
        text = re.sub(r"<[^>]*>", " ", self.message) if "</" in self.message else self.message
        text = " ".join(text.split())
        return text if len(text) <= 300 else text[:297] + "..."


@dataclass(frozen=True)
class TransformJob:
    """A started offline transform: what :func:`wait_transform` needs.

    Attributes:
        job_id: the cluster's job (xaction) id.
        kind: ``etl-bck`` (bucket or prefix) or ``etl-listrange`` (list of objects).
        etl: the ETL name.
        src: source bucket (``ais://name``).
        dst: destination bucket.
        total: objects selected, when counted (None otherwise).
    """

    job_id: str
    kind: str
    etl: str
    src: str
    dst: str
    total: int | None = None


@dataclass(frozen=True)
class TransformResult:
    """State of an offline transform, summed over the cluster's targets.

    Attributes:
        job_id, kind, etl, src, dst, total: as in :class:`TransformJob`.
        finished: the job ended (or, for a list job, went idle with every object accounted for).
        aborted: the job was aborted (by a request, or by a failure without continue-on-error).
        done: objects transformed and written.
        bytes: bytes written.
        failed: objects that failed (at least ``len(failures)``; see the module docs).
        failures: the failed objects the cluster names.
        error: the job's abort error, if any.
        elapsed_s: from the job's start to its end (or to now, while running).
    """

    job_id: str
    kind: str
    etl: str
    src: str
    dst: str
    total: int | None
    finished: bool
    aborted: bool
    done: int
    bytes: int
    failed: int
    failures: list[ObjectFailure] = field(default_factory=list)
    error: str = ""
    elapsed_s: float | None = None

    @property
    def success(self) -> bool:
        """Finished, not aborted, and no object failed."""
        return self.finished and not self.aborted and self.failed == 0 and not self.error


# ------------------------------------------------------------------------------------- helpers


def _bucket_spec(spec: str, what: str) -> tuple[str, str]:
    """``(provider, name)`` of ``NAME``, ``ais://NAME`` or ``s3://NAME`` (an AIS-fronted bucket)."""
    from wds_cloud.openers.ais import PROVIDERS

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


def _uri(provider: str, name: str) -> str:
    return f"{provider}://{name}"


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
        bucket = sdk_client(client, endpoint, config).bucket(name, provider=provider)
        names = _list_names(bucket, prefix, _uri(provider, name) + "/" + prefix)
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
    request_timeout: str = "5m",
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
        config: an :class:`~wds_cloud.openers.ais.AisConfig` (token, timeouts, retries).

    Returns:
        The started job.

    Raises:
        ConfigError: malformed buckets or selection, or ``src`` == ``dst``.
        TransformError: the cluster refused the job (unknown ETL, missing source bucket...).
        MissingDependencyError: the ``aistore`` SDK is not installed.
    """
    if not etl:
        raise ConfigError("no ETL name given")
    names = _check_selection(prefix, objects)
    src_p, src_n = _bucket_spec(src, "source bucket")
    dst_p, dst_n = _bucket_spec(dst, "destination bucket")
    if (src_p, src_n) == (dst_p, dst_n):
        raise ConfigError(f"source and destination are the same bucket {_uri(src_p, src_n)}")
    ais = sdk_client(client, endpoint, config)
    try:
        ais.etl(etl)  # the SDK checks the name's syntax
    except ValueError as exc:
        raise ConfigError(f"invalid ETL name {etl!r}: {exc}") from exc
    bucket, to_bck = ais.bucket(src_n, provider=src_p), ais.bucket(dst_n, provider=dst_p)
    total = len(names) if names is not None else None
    if names is None and count:
        total = len(_list_names(bucket, prefix, f"{_uri(src_p, src_n)}/{prefix}"))
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
            f"AIStore refused to transform {_uri(src_p, src_n)} with ETL {etl!r}: {error_text(exc)}"
        ) from exc
    return TransformJob(
        job_id=str(job_id).strip(),
        kind=kind,
        etl=etl,
        src=_uri(src_p, src_n),
        dst=_uri(dst_p, dst_n),
        total=total,
    )


def _parse_time(value: str | None) -> float | None:
    if not value or value.startswith(GO_ZERO_TIME[:10]):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _failures(ais: Any, etl: str, job_id: str) -> list[ObjectFailure]:
    details = ais.etl(etl).view(job_id=job_id)
    out = []
    for err in details.obj_errors or []:
        url = str(err.obj_name)
        name = url.split("://", 1)[-1].split("/", 1)[-1] if "://" in url else url
        out.append(ObjectFailure(url=url, name=name, message=str(err.msg), code=int(err.ecode)))
    return out


def _poll(ais: Any, job: TransformJob, idle_polls: int) -> tuple[TransformResult, bool]:
    """One look at the job: ``(result, idle)``; ``finished`` needs the caller's idle count."""
    snaps = ais.job(job.job_id, job.kind).get_details().list_snapshots()
    if not snaps:
        raise TransformError("the cluster has no record of this job", job_id=job.job_id)
    done = sum(int(s.stats.objects) for s in snaps if s.stats)
    written = sum(int(s.stats.bytes) for s in snaps if s.stats)
    aborted = any(s.aborted for s in snaps)
    error = next((s.abort_err for s in snaps if s.abort_err), "")
    ended = all(_parse_time(s.end_time) is not None for s in snaps)
    idle = all(s.is_idle for s in snaps)
    failures = _failures(ais, job.etl, job.job_id)
    accounted = job.total is not None and done + len(failures) >= job.total
    # a list job idles instead of ending: done once idle twice in a row with every object
    # accounted for (the SDK's ``Job.wait`` waits for the same double idle)
    quiet = job.kind == LIST_JOB and idle_polls >= 1 and idle
    finished = ended or aborted or (quiet and (accounted or job.total is None))
    failed = len(failures)
    if finished and not aborted and job.total is not None:
        failed = max(failed, job.total - done)
    starts = [t for t in (_parse_time(s.start_time) for s in snaps) if t is not None]
    ends = [t for t in (_parse_time(s.end_time) for s in snaps) if t is not None]
    end = max(ends) if ended and ends else time.time()
    result = TransformResult(
        job_id=job.job_id,
        kind=job.kind,
        etl=job.etl,
        src=job.src,
        dst=job.dst,
        total=job.total,
        finished=finished,
        aborted=aborted,
        done=done,
        bytes=written,
        failed=failed,
        failures=failures,
        error=error,
        elapsed_s=end - min(starts) if starts else None,
    )
    return result, idle


def _job(job: TransformJob | str, etl: str | None, ais: Any) -> TransformJob:
    if isinstance(job, TransformJob):
        return job
    if not etl:
        raise ConfigError(f"job {job!r}: give the ETL name (etl=) to read its object errors")
    try:
        snaps = ais.job(job).get_details().list_snapshots()
    except sdk_errors() as exc:
        raise TransformError(f"no such job on the cluster: {error_text(exc)}", job_id=job) from exc
    kind = next((s.kind for s in snaps if s.kind), "")
    if kind not in (BUCKET_JOB, LIST_JOB):
        raise TransformError(f"not an offline ETL job (kind {kind!r})", job_id=job)
    src = next((s.source_bck for s in snaps if s.source_bck), None)
    dst = next((s.destination_bck for s in snaps if s.destination_bck), None)
    return TransformJob(
        job_id=job,
        kind=kind,
        etl=etl,
        src=_uri(src.provider, src.name) if src else "",
        dst=_uri(dst.provider, dst.name) if dst else "",
    )


def transform_status(
    job: TransformJob | str,
    *,
    etl: str | None = None,
    client: Any = None,
    endpoint: str | None = None,
    config: AisConfig | None = None,
) -> TransformResult:
    """One look at a transform job: counters, failures so far, whether it ended.

    Args:
        job: a :class:`TransformJob`, or a job id (then ``etl`` is required).
        etl: the ETL name, when ``job`` is an id.
        client, endpoint, config: as for :func:`start_transform`.

    Raises:
        TransformError: unknown job, or not an offline ETL job.
        ConfigError: a job id without ``etl``.
    """
    ais = sdk_client(client, endpoint, config)
    spec = _job(job, etl, ais)
    try:
        return _poll(ais, spec, 0)[0]
    except sdk_errors() as exc:
        raise TransformError(f"status failed: {error_text(exc)}", job_id=spec.job_id) from exc


def _summary(result: TransformResult, limit: int = 5) -> str:
    names = ", ".join(f"{f.url} ({f.brief})" for f in result.failures)
    if len(result.failures) > limit:
        names = ", ".join(f.url for f in result.failures[:limit]) + ", ..."
    what = f"{result.failed} object(s) failed" if result.failed else "aborted"
    if result.aborted and result.error:
        what = f"aborted: {result.error.splitlines()[0]}"
    return f"transform with ETL {result.etl!r} {what}" + (f": {names}" if names else "")


def wait_transform(
    job: TransformJob | str,
    *,
    etl: str | None = None,
    timeout: float = 3600.0,
    progress: bool = True,
    poll_interval: float = 1.0,
    client: Any = None,
    endpoint: str | None = None,
    config: AisConfig | None = None,
) -> TransformResult:
    """Polls a transform job until it ends, with a tqdm bar of objects done (and failed).

    Args:
        job: a :class:`TransformJob` (from :func:`start_transform`), or a job id with ``etl``.
        etl: the ETL name, when ``job`` is an id.
        timeout: seconds to wait before giving up (the job keeps running).
        progress: show a progress bar on stderr.
        poll_interval: seconds between status requests.
        client, endpoint, config: as for :func:`start_transform`.

    Returns:
        The result, when every object was transformed.

    Raises:
        TransformError: objects failed or the job aborted (``.result`` lists the failures,
            the message names them), the job is unknown, or ``timeout`` passed.
    """
    from tqdm.auto import tqdm

    ais = sdk_client(client, endpoint, config)
    spec = _job(job, etl, ais)
    deadline = time.monotonic() + timeout
    idle_polls = 0
    bar = tqdm(desc=f"ETL {spec.etl}", unit="obj", total=spec.total, disable=not progress)
    with bar:
        while True:
            try:
                result, idle = _poll(ais, spec, idle_polls)
            except sdk_errors() as exc:
                raise TransformError(
                    f"status failed: {error_text(exc)}", job_id=spec.job_id
                ) from exc
            idle_polls = idle_polls + 1 if idle else 0
            bar.n = result.done + len(result.failures)
            bar.set_postfix(failed=len(result.failures), refresh=False)
            bar.refresh()
            if result.finished:
                if not result.success:
                    raise TransformError(_summary(result), job_id=spec.job_id, result=result)
                return result
            if time.monotonic() >= deadline:
                raise TransformError(
                    f"transform still running after {timeout:g}s ({result.done} objects done)",
                    job_id=spec.job_id,
                    result=result,
                )
            time.sleep(poll_interval)


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
    ais = sdk_client(client, endpoint, config)
    job = start_transform(
        src,
        dst,
        etl,
        prefix=prefix,
        objects=objects,
        ext=ext,
        prepend=prepend,
        continue_on_error=continue_on_error,
        count=count,
        client=ais,
    )
    return wait_transform(
        job, timeout=timeout, progress=progress, poll_interval=poll_interval, client=ais
    )
