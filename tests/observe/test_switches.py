"""How profiling is switched on (and that off, nothing of it exists), and reading the report
at any time."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import wds_cloud as wds
from tests.observe.helpers import run_python
from wds_cloud.errors import ConfigError
from wds_cloud.observe.profile import profile_enabled, recorders_created
from wds_cloud.pytorch.builder import DevicePrefetcher, make_loader

OFF = """
import json, sys, threading
from tests.observe.helpers import assert_no_recorder
from wds_cloud.observe.profile import recorders_created
from wds_cloud.pytorch.builder import make_loader
import wds_cloud as wds

urls = sys.argv[1:]
loader = make_loader(urls, batch_size=8, num_workers=2, map=assert_no_recorder)
n = sum(len(b["__key__"]) for b in loader)
n += sum(1 for _ in wds.WebDataset(urls).map(assert_no_recorder))
print(json.dumps({
    "samples": n,
    "recorders": recorders_created(),
    "profiling": loader.profiling,
    "samplers": [t.name for t in threading.enumerate() if t.name == "wds_cloud-profile"],
}))
"""

ON = """
import json, sys
from wds_cloud.pytorch.builder import make_loader

loader = make_loader(sys.argv[1:], batch_size=8, num_workers=2)
n = sum(len(b["__key__"]) for b in loader)
report = loader.profile_report()
print(json.dumps({"samples": n, "profiling": loader.profiling,
                  "workers": sorted(p.role for p in report.workers), "items": report.items}))
"""


def _run(code: str, urls: list[str], **env: str) -> dict[str, object]:
    done = run_python("-c", code, *urls, **env)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_off_no_recorder_is_made_anywhere(local_urls: list[str]) -> None:
    """Off (the default), no recorder exists in the main process or a worker (the workers'
    user stage fails if one does), and no sampler thread runs."""
    out = _run(OFF, local_urls)
    assert out == {"samples": 320, "recorders": 0, "profiling": False, "samplers": []}


SAMPLER = """
import json, os, sys, threading, time
import wds_cloud as wds
from wds_cloud.observe.profile import reset

def sampler_threads():  # the OS thread ids of this process's sampler threads
    return [t.native_id for t in threading.enumerate() if t.name == "wds_cloud-profile"]

def lingers(native):  # still in /proc after 5 s (an ended thread leaves it shortly after)
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/self/task/{native}") and time.monotonic() < deadline:
        time.sleep(0.01)
    return os.path.exists(f"/proc/self/task/{native}")

ds = wds.WebDataset(sys.argv[1:], shardshuffle=False).profile()
it = iter(ds)
next(it)
during = sampler_threads()
exists = [os.path.isdir(f"/proc/self/task/{native}") for native in during]
n = 1 + sum(1 for _ in it)
between = sampler_threads()  # it idles between passes
n += sum(1 for _ in ds)
again = sampler_threads()  # the next pass starts no other
pid = os.fork()
if pid == 0:
    os._exit(10 + len(sampler_threads()))
child = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) - 10
reset()
print(json.dumps({"during": len(during), "exists": exists, "same": during == between == again,
                  "child": child, "after": sampler_threads(), "ended": not lingers(during[0]),
                  "n": n}))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads /proc/self/task")
def test_one_sampler_thread_a_process_until_reset(local_urls: list[str]) -> None:
    """The sampler is one OS thread (seen in ``/proc``) from the first profiled pass to
    ``reset()``, idle between passes and ended by it; a forked child has none."""
    out = _run(SAMPLER, local_urls)
    assert out == {
        "during": 1,
        "exists": [True],
        "same": True,
        "child": 0,
        "after": [],
        "ended": True,
        "n": 320,
    }


def test_wds_cloud_profile_switches_it_on_for_every_loader(local_urls: list[str]) -> None:
    out = _run(ON, local_urls, WDS_CLOUD_PROFILE="1")
    assert out == {
        "samples": 160,
        "profiling": True,
        "workers": ["worker 0", "worker 1"],
        "items": 20,
    }
    out = _run(ON, local_urls, WDS_CLOUD_PROFILE="0")
    assert out["profiling"] is False and out["workers"] == []


def test_the_setting_is_read_as_a_boolean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WDS_CLOUD_PROFILE", "yes please")
    with pytest.raises(ConfigError, match="WDS_CLOUD_PROFILE"):
        profile_enabled()
    assert profile_enabled(False) is False


def test_webloader_profile_aggregates_its_workers(shard_dir: Path) -> None:
    spec = str(shard_dir / "shard-{00..03}.tar")
    dataset = wds.WebDataset(spec).to_tuple("txt", "cls").batched(10)
    loader = wds.WebLoader(dataset, batch_size=None, num_workers=2).profile()
    assert loader.profiling and dataset.profiling and dataset.profile_dump
    assert sum(len(batch[1]) for batch in loader) == 160
    report = loader.profile_report()
    assert {p.role for p in report.workers} == {"worker 0", "worker 1"}
    assert report.timer("worker batch").count >= 16
    assert report.timer("consumer wait").count == report.items == 16  # batches: timed
    assert report.timer("list shards").count == 1  # the brace spec, once, in the main process


def test_the_report_can_be_read_at_any_time(local_urls: list[str]) -> None:
    ds = wds.WebDataset(local_urls, shardshuffle=False).to_tuple("txt", "cls").batched(4)
    before = recorders_created()
    it = iter(ds.profile())
    assert recorders_created() == before + 1
    for _ in range(5):
        next(it)
    early = ds.profile_report()
    assert early.items == 5 and early.wall > 0
    assert "profile:" in early.table() and "verdict:" in early.table()
    rest = sum(1 for _ in it)
    late = ds.profile_report()
    assert rest == 35 and late.items == 40 and late.wall >= early.wall
    assert json.loads(json.dumps(late.to_dict()))["items"] == 40


def test_device_prefetcher_on_cpu_reports_its_loader(local_urls: list[str]) -> None:
    batches = make_loader(local_urls, batch_size=8, num_workers=0, profile=True)
    prefetcher = DevicePrefetcher(batches, "cpu")
    assert sum(len(b["__key__"]) for b in prefetcher) == 160
    report = prefetcher.profile_report()
    assert report.items == 20 and report.timer("consumer wait").count == 20
