"""The verdict names the right bottleneck on three constructed cases (a slow decode, a slow
network behind the latency proxy, a slow training step), and its rules on plain reports."""

from __future__ import annotations

import importlib.util
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import wds_cloud as wds
from tests.observe.helpers import slow_decoder
from tests.support.http_server import HttpFileServer
from wds_cloud.core.threadworkers import THREAD_PREFIX
from wds_cloud.observe.report import ProcessTimes, ProfileReport, Timer
from wds_cloud.observe.verdict import READER_THREADS, decode_hint, thread_hint
from wds_cloud.pytorch.builder import make_loader

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from latency_proxy import LatencyProxy  # noqa: E402  (benchmarks/ is not a package)


def _slow_decode_verdict(urls: list[str], **kw: Any) -> str:
    """The verdict of a profiled pass over ``urls`` whose decode is :func:`slow_decoder`."""
    loader = make_loader(
        urls,
        batch_size=8,
        shuffle_buffer=0,
        decode=slow_decoder,
        to_tuple=("txt", "cls"),
        profile=True,
        **kw,
    )
    assert sum(len(batch[1]) for batch in loader) == 160
    verdict: str = loader.profile_report().verdict()
    return verdict


def test_slow_decode_in_the_workers_is_decode_bound(local_urls: list[str]) -> None:
    verdict = _slow_decode_verdict(local_urls, num_workers=2)
    assert verdict.startswith("decode-bound: "), verdict
    assert "of worker time in decode(slow_decoder)" in verdict
    found = re.search(r"num_workers=(\d+)", verdict)
    assert found is not None and int(found.group(1)) > 2, verdict  # more than the 2 it had
    assert verdict.endswith(decode_hint(int(found.group(1)))), verdict


def test_the_decode_hint_names_the_fast_path_only_where_it_is_missing() -> None:
    assert decode_hint(8, fast_jpeg=False) == (
        "try num_workers=8 or the fast JPEG path (pip install 'wds_cloud[jpeg]')"
    )
    assert decode_hint(8, fast_jpeg=True) == 'try num_workers=8 or make_loader(executor="threads")'
    installed = importlib.util.find_spec("simplejpeg") is not None
    assert decode_hint(4) == decode_hint(4, fast_jpeg=installed)


def test_a_decode_bound_thread_loader_is_pointed_at_cores_not_at_threads(
    local_urls: list[str],
) -> None:
    """The thread executor's readers decoding: the hint is about reader threads and cores,
    never "use executor='threads'" (it is in use)."""
    verdict = _slow_decode_verdict(local_urls, num_workers=1, executor="threads")
    assert verdict.startswith("decode-bound: ") and "decode(slow_decoder)" in verdict, verdict
    assert verdict.endswith(thread_hint(1)), verdict
    assert "executor" not in verdict


def test_the_thread_hint() -> None:
    assert READER_THREADS == THREAD_PREFIX  # how the verdict tells the reader threads
    assert thread_hint(1, cores=4) == "try num_workers=4 (reader threads; 1 now, 4 cores)"
    assert thread_hint(2, cores=2) == (
        "2 reader threads decode on 2 cores: the machine's decode limit; smaller images or "
        "more cores"
    )


def test_slow_network_is_network_bound(http_server: HttpFileServer) -> None:
    with LatencyProxy(http_server.port, delay=0.02, rate=0.5e6) as proxy:
        urls = [f"{proxy.url}/shard-{i:02d}.tar" for i in range(4)]
        ds = wds.WebDataset(urls, shardshuffle=False).to_tuple("txt", "cls").profile()
        assert sum(1 for _ in ds) == 160
    verdict = ds.profile_report().verdict()
    assert verdict.startswith("network-bound: "), verdict
    assert "waiting on http reads at" in verdict and "MB/s per stream" in verdict


def test_slow_training_step_is_consumer_bound(local_urls: list[str]) -> None:
    loader = make_loader(local_urls, batch_size=8, num_workers=2, shuffle_buffer=0, profile=True)
    for _ in loader:
        time.sleep(0.05)  # the training step: long, so the workers keep ahead on a busy machine
    report = loader.profile_report()
    verdict = report.verdict()
    assert verdict.startswith("consumer-bound: the training step is the bottleneck"), verdict
    assert report.loader_idle > 0.75
    assert f"(loader idle {report.loader_idle:.0%})" in verdict


def _report(
    main: dict[str, float], workers: dict[str, float], wait: float, nworkers: int = 2
) -> ProfileReport:
    def proc(role: str, worker: int, stages: dict[str, float], timers: dict[str, Timer]) -> Any:
        return ProcessTimes(role, 100 + worker, 0, worker, sum(stages.values()), stages, timers, 10)

    timers = {"consumer wait": Timer(wait, 10), "read wait (s3)": Timer(2.0, 10, 76_000_000)}
    procs = [proc("main", -1, main, timers)]
    if workers:
        procs += [proc(f"worker {i}", i, workers, {}) for i in range(nworkers)]
    return ProfileReport(tuple(procs))


def test_verdict_rules_on_plain_reports() -> None:
    consumer = _report({"consumer": 8.0, "transfer": 2.0}, {"idle": 9.0, "map(f)": 1.0}, 2.0)
    assert consumer.verdict() == (
        "consumer-bound: the training step is the bottleneck (loader idle 80%)"
    )
    network = _report({"consumer": 1.0, "transfer": 9.0}, {"read wait": 6.4, "tar parse": 3.6}, 9.0)
    assert network.verdict() == (
        "network-bound: 64% of worker time waiting on s3 reads at 38 MB/s per stream; "
        "try prefetch=16"
    )
    decode = _report({"consumer": 1.0, "transfer": 9.0}, {"decode(rgb)": 7.1, "idle": 2.9}, 9.0)
    assert decode.verdict().startswith("decode-bound: 71% of worker time in decode(rgb); try ")
    main_bound = _report({"consumer": 1.0, "batched": 6.0, "transfer": 3.0}, {"idle": 10.0}, 9.0)
    assert main_bound.verdict().startswith(
        "main-process-bound: 60% of main-process time in batched"
    )
    assert ProfileReport(()).verdict().startswith("no measurements yet")


def test_the_readme_verdict_examples_are_what_the_verdict_says() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("The verdict names the bottleneck from the measurements")[1]
    examples = block.split("```")[1].strip().splitlines()
    reports = [
        _report({"consumer": 1.0, "transfer": 9.0}, {"decode(rgb)": 7.1, "idle": 2.9}, 9.0, 4),
        _report({"consumer": 1.0, "transfer": 9.0}, {"read wait": 6.4, "tar parse": 3.6}, 9.0),
        _report({"consumer": 8.0, "transfer": 2.0}, {"idle": 9.0, "map(f)": 1.0}, 2.0),
    ]
    said = [r.verdict() for r in reports]
    # the README shows the verdict where simplejpeg is installed ([torch] and [all] bring it)
    installed = importlib.util.find_spec("simplejpeg") is not None
    said[0] = said[0].replace(decode_hint(8, installed), decode_hint(8, fast_jpeg=True))
    assert examples == said
    note = block.split("```")[2]
    assert "pip install 'wds_cloud[jpeg]'" in note  # what it says where simplejpeg is missing


def test_verdict_of_global_order_batch_reads() -> None:
    """``make_loader(order="global")``: workers waiting on their batch reads are
    network-bound, with the read speed of the ``batch read`` timer and its own knob."""
    report = _report({"consumer": 1.0, "transfer": 9.0}, {"batch read": 7.0, "idle": 3.0}, 9.0)
    main = report.processes[0]
    timers = {**main.timers, "batch read": Timer(4.0, 20, 200_000_000)}
    report = ProfileReport((replace(main, timers=timers), *report.processes[1:]))
    assert report.verdict() == (
        "network-bound: 70% of worker time reading batches at 50 MB/s per reader; "
        "try batches_in_flight=4 or more num_workers"
    )


def test_several_ranks_add_up() -> None:
    """Two ranks' reports merged: walls, items and waits add up, the rate is the sum of the
    ranks', ``rank(r)`` is one rank's part, and the verdict reads the ratio over both."""
    one = _report({"consumer": 1.0, "transfer": 9.0}, {"decode(rgb)": 7.1, "idle": 2.9}, 9.0)
    two = ProfileReport(
        tuple(replace(p, rank=1, pid=p.pid + 1000) for p in one.processes)
    )  # the same numbers on rank 1
    both = ProfileReport(one.processes + two.processes, ranks=(0, 1))
    assert both.wall == 2 * one.wall and both.items == 2 * one.items
    assert both.consumer_wait == 2 * one.consumer_wait
    assert both.rate == 2 * one.rate and both.loader_idle == one.loader_idle
    assert both.rank(1).processes == two.processes and both.rank(1).ranks == (1,)
    assert both.verdict() == one.verdict()
    assert both.table().startswith("profile on 2 ranks: 20.00 s watched, 20 items (2.0/s)")
