"""Stage times add up to the wall time, and each known stage gets its known time.

The sampler charges every stretch of a watched thread's time to one stage, so per thread the
stages sum to its watched time exactly; the tolerance on each stage (30 %, also across worker
processes) is the sampler's: a look every 1 ms (``conftest.TEST_PERIOD``) over about a second
of known sleeps, on a loaded two-core machine."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

import wds_cloud as wds
from tests.observe.helpers import SLOW_A, SLOW_B, slow_a, slow_b
from tests.support.http_server import HttpFileServer
from wds_cloud.pytorch.builder import make_loader

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from latency_proxy import LatencyProxy  # noqa: E402  (benchmarks/ is not a package)

CONSUMER_SLEEP = 0.006


def test_main_process_stages_add_up_and_match_known_sleeps(local_urls: list[str]) -> None:
    ds = wds.WebDataset(local_urls[:3], shardshuffle=False).map(slow_a).map(slow_b).profile()
    start = time.perf_counter()
    n = 0
    slept = {"a": 0.0, "b": 0.0, "consumer": 0.0}
    for sample in ds:
        slept["a"] += sample["slept_a"]
        slept["b"] += sample["slept_b"]
        t = time.perf_counter()
        time.sleep(CONSUMER_SLEEP)
        slept["consumer"] += time.perf_counter() - t
        n += 1
    wall = time.perf_counter() - start
    report = ds.profile_report()
    main = report.main
    assert main is not None and not report.workers
    assert n == 120
    assert sum(main.stages.values()) == pytest.approx(main.wall, rel=1e-9)
    assert main.wall == pytest.approx(wall, rel=0.05)
    assert slept["a"] >= n * SLOW_A and slept["b"] >= n * SLOW_B
    assert main.stages["map(slow_a)"] == pytest.approx(slept["a"], rel=0.3)
    assert main.stages["map(slow_b)"] == pytest.approx(slept["b"], rel=0.3)
    assert main.stages["consumer"] == pytest.approx(slept["consumer"], rel=0.3)
    assert report.consumer_wait == pytest.approx(wall - main.stages["consumer"], rel=0.05)


def test_worker_stages_are_aggregated_in_the_main_process(local_urls: list[str]) -> None:
    loader = make_loader(
        local_urls, batch_size=8, num_workers=2, shuffle_buffer=0, map=slow_a, profile=True
    )
    start = time.perf_counter()
    n = 0
    slept = 0.0
    for batch in loader:
        n += len(batch["__key__"])
        slept += float(batch["slept_a"].sum())
    wall = time.perf_counter() - start
    report = loader.profile_report()
    assert n == 160
    assert {p.role for p in report.workers} == {"worker 0", "worker 1"}
    for proc in report.processes:
        assert sum(proc.stages.values()) == pytest.approx(proc.wall, rel=1e-9)
    assert report.stages(True)["map(slow_a)"] == pytest.approx(slept, rel=0.3)
    assert report.main is not None
    assert report.main.wall == pytest.approx(wall, rel=0.05)
    # every batch the training loop got was timed: the wait is exact
    assert report.timer("consumer wait").count == report.items == 20
    assert report.timer("worker batch").count >= 20


def test_network_wait_is_measured_behind_a_latency_proxy(http_server: HttpFileServer) -> None:
    with LatencyProxy(http_server.port, delay=0.02, rate=0.5e6) as proxy:
        urls = [f"{proxy.url}/shard-{i:02d}.tar" for i in range(4)]
        ds = wds.WebDataset(urls, shardshuffle=False).profile()
        start = time.perf_counter()
        n = sum(1 for _ in ds)
        wall = time.perf_counter() - start
    report = ds.profile_report()
    assert n == 160
    waited = sum(report.timer(name).seconds for name in ("open", "first byte", "read wait (http)"))
    shard_bytes = sum(
        (Path(http_server.root) / f"shard-{i:02d}.tar").stat().st_size for i in range(4)
    )
    assert (
        report.timer("read wait (http)").nbytes + report.timer("first byte").nbytes == shard_bytes
    )
    # four shards at 0.5 MB/s after a 20 ms delay each: the network is nearly all of it
    assert waited >= 0.8 * (shard_bytes / 0.5e6 + 4 * 0.02)
    assert waited <= wall
    main = report.main
    assert main is not None
    sampled = main.stages.get("read wait", 0.0) + main.stages.get("open", 0.0)
    assert sampled == pytest.approx(waited, rel=0.25)


def test_a_pass_shorter_than_the_period_is_unsampled(
    local_urls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No time goes missing: a pass that ends before the first look is ``unsampled``, and
    the verdict does not guess from it."""
    monkeypatch.setenv("WDS_CLOUD_PROFILE_PERIOD", "100")
    ds = wds.WebDataset(local_urls[:1], shardshuffle=False).profile()
    start = time.perf_counter()
    assert sum(1 for _ in ds) == 40
    wall = time.perf_counter() - start
    report = ds.profile_report()
    assert report.main is not None and set(report.main.stages) == {"unsampled"}
    assert 0 < report.main.wall <= wall
    assert report.verdict() == "no loader work measured yet: iterate longer"
