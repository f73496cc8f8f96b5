"""The manifest of a job's committed outputs: one JSON, rewritten atomically by the driver.

It names the job (a fingerprint of its inputs, parameters and outputs) and holds the result of
every task whose shard is committed. Rerunning the same job reads it and skips those tasks; a
different job writing to the same place is refused rather than mixed in. A task that committed
its shard but was not yet recorded (the driver died in between) simply runs again: it writes
the same bytes under the same name.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from wds_cloud.errors import ConfigError, ShardNotFoundError
from wds_cloud.jobs.summary import TaskResult
from wds_cloud.openers.registry import OpenerRegistry, default_registry
from wds_cloud.redact import redact_url

FORMAT = "wds_cloud.jobs.manifest/1"


def fingerprint(description: Any) -> str:
    """SHA-256 of a job description's canonical JSON."""
    text = json.dumps(description, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def load_manifest(
    url: str, job: str, registry: OpenerRegistry | None = None
) -> dict[int, TaskResult]:
    """The committed tasks recorded at ``url`` for job ``job`` (empty when there is none).

    Raises:
        ConfigError: the manifest belongs to another job, or is not a manifest.
    """
    registry = registry or default_registry()
    try:
        stream = registry.open(url)
    except (FileNotFoundError, ShardNotFoundError):
        return {}
    try:
        data = json.loads(stream.read())
    except ValueError as exc:
        raise ConfigError(f"{redact_url(url)}: not a job manifest ({exc})") from exc
    finally:
        stream.close()
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f"{redact_url(url)}: not a wds_cloud job manifest")
    if data.get("job") != job:
        raise ConfigError(
            f"{redact_url(url)} records another job ({data.get('kind')} "
            f"{str(data.get('job'))[:12]}); this one is {job[:12]}: write to another output "
            "or remove the old outputs and the manifest"
        )
    return {int(k): TaskResult.from_json(v) for k, v in data.get("tasks", {}).items()}


def save_manifest(
    url: str,
    job: str,
    kind: str,
    tasks: dict[int, TaskResult],
    registry: OpenerRegistry | None = None,
    *,
    complete: bool = False,
) -> None:
    """Write the manifest atomically (the target's committing writer)."""
    from wds_cloud.openers.registry import open_sink

    data = {
        "format": FORMAT,
        "job": job,
        "kind": kind,
        "complete": complete,
        "tasks": {str(i): tasks[i].to_json() for i in sorted(tasks)},
    }
    with open_sink(url, registry) as sink:
        sink.write(json.dumps(data, indent=1, sort_keys=True).encode())


__all__ = ["fingerprint", "load_manifest", "save_manifest"]
