"""Dataset jobs at scale (``docs/jobs.md``): convert, reshard, map, index and verify, run by an
interchangeable engine: ``"local"`` (this process) or ``"ray"`` (``pip install
'wds_cloud[ray]'``; Ray is imported only when the ray engine runs).

Every shard-writing job is planned by the driver into tasks; task ``i`` writes exactly the
shard ``output % i``, committed atomically, from an input fixed by the plan. So names and bytes
depend only on the inputs and parameters (and the seed), a retried task replaces its own output,
and a manifest of committed tasks lets the same command resume an interrupted job.
"""

from __future__ import annotations

from wds_cloud.jobs.convert import convert
from wds_cloud.jobs.engines import LocalEngine, RayEngine
from wds_cloud.jobs.indexjob import index_job, verify_job
from wds_cloud.jobs.mapjob import map_shards
from wds_cloud.jobs.reshard import reshard
from wds_cloud.jobs.summary import JobSummary, TaskResult

__all__ = [
    "JobSummary",
    "LocalEngine",
    "RayEngine",
    "TaskResult",
    "convert",
    "index_job",
    "map_shards",
    "reshard",
    "verify_job",
]
