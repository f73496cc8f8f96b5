"""Following an offline ETL job on AIStore: its status, its failures, waiting for its end.

:func:`~wds_cloud.aistore.transform.start_transform` starts the job and returns a
:class:`TransformJob`; :func:`transform_status` takes one look at it (counters, failures so far,
whether it ended) and :func:`wait_transform` polls it to its end with a progress bar, raising
:class:`TransformError` when objects failed or the job aborted. Both also take a job id with the
ETL's name. :mod:`wds_cloud.aistore.transform` documents the whole feature and exports these names.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wds_cloud.aistore.cluster import JobOptions, cluster_time, error_text, sdk_errors
from wds_cloud.errors import ConfigError, WdsCloudError

if TYPE_CHECKING:
    from wds_cloud.openers.ais.opener import AisConfig

BUCKET_JOB = "etl-bck"
LIST_JOB = "etl-listrange"


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


def bucket_url(provider: str, name: str) -> str:
    """``provider://name``, as :class:`TransformJob` names its buckets."""
    return f"{provider}://{name}"


def _failures(ais: Any, etl: str, job_id: str) -> list[ObjectFailure]:
    details = ais.etl(etl).view(job_id=job_id)
    out = []
    for err in details.obj_errors or []:
        url = str(err.obj_name)
        name = url.split("://", 1)[-1].split("/", 1)[-1] if "://" in url else url
        out.append(ObjectFailure(url=url, name=name, message=str(err.msg), code=int(err.ecode)))
    return out


def _poll(ais: Any, job: TransformJob, idle_polls: int) -> tuple[TransformResult, bool]:
    """One look at the job: ``(result, idle)``; ``finished`` needs the caller's idle count.

    Raises:
        TransformError: a request failed, or the cluster has no record of the job.
    """
    try:
        snaps = ais.job(job.job_id, job.kind).get_details().list_snapshots()
        failures = _failures(ais, job.etl, job.job_id) if snaps else []
    except sdk_errors() as exc:
        raise TransformError(f"status failed: {error_text(exc)}", job_id=job.job_id) from exc
    if not snaps:
        raise TransformError("the cluster has no record of this job", job_id=job.job_id)
    done = sum(int(s.stats.objects) for s in snaps if s.stats)
    written = sum(int(s.stats.bytes) for s in snaps if s.stats)
    aborted = any(s.aborted for s in snaps)
    error = next((s.abort_err for s in snaps if s.abort_err), "")
    ended = all(cluster_time(s.end_time) is not None for s in snaps)
    idle = all(s.is_idle for s in snaps)
    accounted = job.total is not None and done + len(failures) >= job.total
    # a list job idles instead of ending: done once idle twice in a row with every object
    # accounted for (the SDK's ``Job.wait`` waits for the same double idle)
    quiet = job.kind == LIST_JOB and idle_polls >= 1 and idle
    finished = ended or aborted or (quiet and (accounted or job.total is None))
    failed = len(failures)
    if finished and not aborted and job.total is not None:
        failed = max(failed, job.total - done)
    starts = [t for t in (cluster_time(s.start_time) for s in snaps) if t is not None]
    ends = [t for t in (cluster_time(s.end_time) for s in snaps) if t is not None]
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
        src=bucket_url(src.provider, src.name) if src else "",
        dst=bucket_url(dst.provider, dst.name) if dst else "",
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
    ais = JobOptions(client=client, endpoint=endpoint, config=config).sdk_client()
    return _poll(ais, _job(job, etl, ais), 0)[0]


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
    options = JobOptions(
        client=client,
        endpoint=endpoint,
        config=config,
        timeout=timeout,
        progress=progress,
        poll_interval=poll_interval,
    )
    return wait_transform_job(job, etl, options)


def wait_transform_job(
    job: TransformJob | str, etl: str | None, options: JobOptions
) -> TransformResult:
    """:func:`wait_transform` with the cluster and the waiting given as :class:`JobOptions`."""
    from tqdm.auto import tqdm

    ais = options.sdk_client()
    spec = _job(job, etl, ais)
    timeout = options.timeout
    deadline = time.monotonic() + timeout
    idle_polls = 0
    disable = not options.progress
    bar = tqdm(desc=f"ETL {spec.etl}", unit="obj", total=spec.total, disable=disable)
    with bar:
        while True:
            result, idle = _poll(ais, spec, idle_polls)
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
            time.sleep(options.poll_interval)
