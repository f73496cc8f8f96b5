"""Starting, waiting for and aborting dSort jobs through the ``aistore`` SDK (``extra: ais``).

Unless a ``client`` is given, requests go through the AIStore opener's client
(:class:`~wds_cloud.openers.ais.opener.AisOpener`), so its configuration applies: the AuthN token
(``AisConfig.token`` or ``AIS_AUTHN_TOKEN``), timeouts and retries.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wds_cloud.aistore.cluster import JobOptions, cluster_time, error_text, sdk_errors
from wds_cloud.aistore.dsort.spec import DsortSpec, load_spec
from wds_cloud.aistore.dsort.validate import validate
from wds_cloud.errors import DsortSpecError, WdsCloudError
from wds_cloud.redact import redact_text

if TYPE_CHECKING:
    from wds_cloud.openers.ais.opener import AisConfig


#: Sent when a spec names no ``dsorter_type``: AIStore 5.0's proxy cannot choose one itself (it
#: asks each target for its free memory over intra-control without the sender headers its
#: targets require, and the start fails with "stats.NodeStatus.Status: ReadString: ..."), so
#: wds_cloud names the type the proxy falls back to when memory is not known to suffice.
DEFAULT_DSORTER_TYPE = "dsort_general"


class DsortJobError(WdsCloudError, RuntimeError):
    """A dSort job failed, was aborted, or the cluster refused it.

    Attributes:
        job_id: the job id (``srt-...``), when known.
        result: the job summary at the time of failure, when known.
    """

    def __init__(
        self, message: str, *, job_id: str | None = None, result: DsortResult | None = None
    ) -> None:
        super().__init__(message + (f" [job={job_id}]" if job_id else ""))
        self.reason = redact_text(message)
        self.job_id = job_id
        self.result = result


class DsortTimeoutError(DsortJobError, TimeoutError):
    """The job did not finish within the ``timeout`` given to :func:`wait`."""


@dataclass(frozen=True)
class DsortResult:
    """Summary of a dSort job, summed over all targets.

    Attributes:
        job_id: the job id (``srt-...``).
        success: finished on every target, not aborted, no errors.
        aborted: the job was aborted (by :func:`abort` or by an error).
        finished: shard creation finished on every target.
        shards_created: output shards written.
        shards_to_create: output shards planned.
        input_shards: input shards extracted.
        members: tar members (files) extracted; AIStore's ``extracted_record_count``, which
            counts every file of a record, not the records (samples) they form.
        extracted_bytes: record bytes extracted.
        elapsed_s: job duration from the cluster's start/finish times, when both are known.
        errors: error messages reported by targets.
        warnings: warning messages reported by targets.
        targets: number of targets that reported.
    """

    job_id: str
    success: bool
    aborted: bool
    finished: bool
    shards_created: int
    shards_to_create: int
    input_shards: int
    members: int
    extracted_bytes: int
    elapsed_s: float | None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    targets: int = 0

    @property
    def records(self) -> int:
        """Deprecated: :attr:`members` (it always counted tar members, not records)."""
        warnings.warn(
            "DsortResult.records is DsortResult.members: AIStore counts the tar members "
            "extracted, not the records (samples) they form",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.members


def _translate(exc: Exception, job_id: str | None, action: str) -> Exception:
    status = getattr(exc, "status_code", None)
    text = error_text(exc)
    if action == "start" and status == 400:
        m = re.search(r'parse-spec: "([a-z_]+)"', text)
        field_name = m.group(1) if m else None
        return DsortSpecError(f"AIStore rejected the spec: {text}", field=field_name)
    if action == "start" and status == 404:
        return DsortSpecError(f"AIStore: {text}", field="input_bck")
    if status == 404:
        return DsortJobError(f"no such dSort job on the cluster: {text}", job_id=job_id)
    return DsortJobError(f"dSort {action} failed: {text}", job_id=job_id)


def start(
    spec: DsortSpec | Mapping[str, Any] | str | os.PathLike[str],
    client: Any = None,
    endpoint: str | None = None,
    config: AisConfig | None = None,
) -> str:
    """Validates a spec and starts the dSort job through the AIStore SDK.

    The SDK's ``Dsort.start`` takes a file path, so the spec is written to a temporary JSON file.
    A spec without ``dsorter_type`` is sent with :data:`DEFAULT_DSORTER_TYPE` (AIStore 5.0
    cannot pick one itself).

    Args:
        spec: a :class:`DsortSpec`, a spec dict, or a path to a JSON/YAML spec file.
        client: an ``aistore.sdk.Client``; by default the AIStore opener's client is used.
        endpoint: the AIStore URL (default: ``config``'s, else ``AIS_ENDPOINT``).
        config: an :class:`~wds_cloud.openers.ais.opener.AisConfig` (token, timeouts, retries);
            default: one from the environment (``AIS_ENDPOINT``, ``AIS_AUTHN_TOKEN``).

    Returns:
        The job id (``srt-...``).

    Raises:
        DsortSpecError: the spec is invalid here or on the server (``field`` names the key),
            or the input bucket does not exist.
        DsortJobError: the cluster could not start the job.
        MissingDependencyError: the ``aistore`` SDK is not installed.
    """
    return start_job(spec, JobOptions(client=client, endpoint=endpoint, config=config))


def start_job(
    spec: DsortSpec | Mapping[str, Any] | str | os.PathLike[str], options: JobOptions
) -> str:
    """:func:`start` with the cluster given as :class:`JobOptions`."""
    if isinstance(spec, DsortSpec):
        data = spec.to_dict()
    elif isinstance(spec, (str, os.PathLike)):
        data = load_spec(spec)
    else:
        data = validate(spec)
    if not data.get("dsorter_type"):
        data["dsorter_type"] = DEFAULT_DSORTER_TYPE
    ais = options.sdk_client()
    with tempfile.TemporaryDirectory(prefix="wds-dsort-") as tmp:
        path = Path(tmp) / "spec.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        try:
            job_id = ais.dsort().start(str(path))
        except sdk_errors() as exc:
            raise _translate(exc, None, "start") from exc
    return str(job_id).strip()


def abort(
    job_id: str,
    client: Any = None,
    endpoint: str | None = None,
    config: AisConfig | None = None,
) -> None:
    """Aborts a running dSort job (``client``, ``endpoint``, ``config`` as for :func:`start`).

    Raises:
        DsortJobError: unknown job or the request failed.
    """
    ais = JobOptions(client=client, endpoint=endpoint, config=config).sdk_client()
    try:
        ais.dsort(job_id).abort()
    except sdk_errors() as exc:
        raise _translate(exc, job_id, "abort") from exc


def _summary(job_id: str, infos: Mapping[str, Any]) -> DsortResult:
    def total(phase: str, name: str) -> int:
        return sum(int(getattr(getattr(i.metrics, phase), name) or 0) for i in infos.values())

    values = list(infos.values())
    starts = [cluster_time(i.started_time) for i in values]
    ends = [cluster_time(i.finish_time) for i in values]
    finished = bool(values) and all(i.metrics.shard_creation.finished for i in values)
    aborted = any(bool(i.metrics.aborted) or i.aborted for i in values)
    errors = [e for i in values for e in (i.metrics.errors or []) if e]
    elapsed = None
    if finished and all(s is not None for s in starts) and all(e is not None for e in ends):
        elapsed = max(e for e in ends if e is not None) - min(s for s in starts if s is not None)
    return DsortResult(
        job_id=job_id,
        success=finished and not aborted and not errors,
        aborted=aborted,
        finished=finished,
        shards_created=total("shard_creation", "created_count"),
        shards_to_create=total("shard_creation", "to_create"),
        input_shards=total("local_extraction", "extracted_count"),
        members=total("local_extraction", "extracted_record_count"),
        extracted_bytes=total("local_extraction", "extracted_size"),
        elapsed_s=elapsed,
        errors=errors,
        warnings=[w for i in values for w in (i.metrics.warnings or []) if w],
        targets=len(values),
    )


def wait(
    job_id: str,
    timeout: float = 300.0,
    progress: bool = True,
    client: Any = None,
    endpoint: str | None = None,
    poll_interval: float = 1.0,
    config: AisConfig | None = None,
) -> DsortResult:
    """Polls a job until it finishes, showing created/to-create shards in a tqdm bar.

    Args:
        job_id: the id returned by :func:`start`.
        timeout: seconds to wait before giving up (the job keeps running).
        progress: show a progress bar on stderr.
        client: an ``aistore.sdk.Client``; by default the AIStore opener's client is used.
        endpoint: the AIStore URL (default: ``config``'s, else ``AIS_ENDPOINT``).
        poll_interval: seconds between status requests.
        config: an :class:`~wds_cloud.openers.ais.opener.AisConfig`, as for :func:`start`.

    Returns:
        The job summary, on success.

    Raises:
        DsortJobError: the job was aborted or reported errors (``.result`` holds the summary),
            or the job is unknown.
        DsortTimeoutError: still running after ``timeout`` seconds.
    """
    options = JobOptions(
        client=client,
        endpoint=endpoint,
        config=config,
        timeout=timeout,
        progress=progress,
        poll_interval=poll_interval,
    )
    return wait_job(job_id, options)


def wait_job(job_id: str, options: JobOptions) -> DsortResult:
    """:func:`wait` with the cluster and the waiting given as :class:`JobOptions`."""
    from tqdm.auto import tqdm

    dsort = options.sdk_client().dsort(job_id)
    timeout = options.timeout
    deadline = time.monotonic() + timeout
    disable = not options.progress
    with tqdm(desc=f"dSort {job_id}", unit="shard", total=None, disable=disable) as bar:
        while True:
            try:
                infos = dsort.get_job_info()
            except sdk_errors() as exc:
                raise _translate(exc, job_id, "status") from exc
            result = _summary(job_id, infos) if infos else None
            if result is not None:
                if result.shards_to_create and bar.total != result.shards_to_create:
                    bar.total = result.shards_to_create
                bar.n = result.shards_created
                bar.refresh()
                if result.aborted or result.errors:
                    why = "; ".join(result.errors) or "aborted"
                    raise DsortJobError(f"dSort job failed: {why}", job_id=job_id, result=result)
                if result.finished:
                    return result
            if time.monotonic() >= deadline:
                raise DsortTimeoutError(
                    f"dSort job still running after {timeout:g}s", job_id=job_id, result=result
                )
            time.sleep(options.poll_interval)
