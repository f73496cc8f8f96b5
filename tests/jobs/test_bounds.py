"""What a job holds and imports: memory per task bounded by a shard, not by the dataset; Ray
imported only when the ray engine or wds_cloud.ray's functions run; the dSort hook."""

from __future__ import annotations

import json
import subprocess
import sys

from wds_cloud.jobs.reshard import dsort_hook

_MEMORY_SCRIPT = r"""
import json, os, resource, sys
from wds_cloud.jobs import map_shards, reshard
from wds_cloud.writing.shardwriter import ShardWriter

root = sys.argv[1]
with ShardWriter(root + "/in-%02d.tar", maxcount=40) as w:  # 8 shards of 40 x 250 kB = 80 MB
    for i in range(320):
        w.write({"__key__": f"k{i:04d}", "bin": os.urandom(250_000)})
inputs = [root + f"/in-{i:02d}.tar" for i in range(8)]
import gc; gc.collect()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
reshard(inputs, root + "/r/%03d.tar", maxcount=20, shuffle=True, seed=1)
after_reshard = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
map_shards(inputs, root + "/m/%03d.tar", lambda s: s)
after_map = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"base": base, "reshard": after_reshard, "map": after_map}))
"""


def test_memory_per_task_is_bounded_by_a_shard_not_the_dataset(tmp_path):
    """An 80 MB dataset, output shards of 5 MB: the job's peak RSS grows by far less than the
    dataset (a task holds one output shard's spans at most; map streams one sample)."""
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    rss = json.loads(out.stdout.strip().splitlines()[-1])  # kB
    dataset_kb = 320 * 250_000 // 1024
    assert rss["reshard"] - rss["base"] < dataset_kb // 3, rss
    assert rss["map"] - rss["base"] < dataset_kb // 3, rss


def test_importing_wds_cloud_and_its_ray_module_does_not_import_ray():
    code = (
        "import sys, wds_cloud, wds_cloud.jobs, wds_cloud.ray, wds_cloud.cli.jobs;"
        "print(sorted(m for m in ('ray', 'pyarrow', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_dsort_hook_only_for_an_ais_reshard_dsort_can_run():
    size = {"maxcount": None, "maxsize": 1e6, "nshards": None}
    assert dsort_hook(["s3://b/a.tar"], "ais://b/out-%03d.tar", **size) is None
    assert dsort_hook(["ais://b/a.tar"], "s3://b/out-%03d.tar", **size) is None
    assert dsort_hook("ais://b/in-{000..009}.tar", "ais://c/out-%03d.tar", **size) is not None
    for other in ({"maxcount": 10}, {"maxsize": None, "nshards": 4}):
        assert dsort_hook(["ais://b/a.tar"], "ais://c/o-%03d.tar", **{**size, **other}) is None
