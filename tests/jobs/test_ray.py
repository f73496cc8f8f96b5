"""Jobs on a real local Ray (2 CPUs): same bytes as the local engine, exactly once when worker
processes are SIGKILLed mid-job, Ray Data interop."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.jobs import helpers
from tests.jobs.helpers import digests, listing, multiset, read_samples, write_inputs
from tests.support.ownership import descendants
from wds_cloud.index.build import build_index
from wds_cloud.index.format import idx_url
from wds_cloud.jobs import RayEngine, convert, index_job, map_shards, reshard, verify_job
from wds_cloud.listing import resolve_shards

pytestmark = pytest.mark.slow


def _running_task_workers() -> list[int]:
    """PIDs of this test's Ray workers now executing ``run_task`` (their process title)."""
    pids = []
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().startswith(b"ray::run_task"):
                    pids.append(pid)
        except OSError:
            continue
    return pids


def test_ray_writes_the_bytes_the_local_engine_writes(ray_session, tmp_path):
    inputs = resolve_shards(write_inputs(tmp_path / "in", 6, 11))
    for engine in ("local", "ray"):
        reshard(
            inputs,
            str(tmp_path / engine / "r-%03d.tar"),
            maxcount=9,
            shuffle=True,
            seed=11,
            map=helpers.upper,
            engine=engine,
        )
        convert(inputs, str(tmp_path / engine / "c-%03d.tar"), maxsize=9000, engine=engine)
    local, ray = digests(tmp_path / "local"), digests(tmp_path / "ray")
    assert len(local) == 8 + len([n for n in local if n.startswith("c-")]) and local == ray


@pytest.mark.s3
def test_files_and_parquet_from_s3_on_ray_write_the_local_engines_bytes(
    ray_session, s3_endpoint, raw_client, bucket, tmp_path
):
    """Files under an s3:// prefix cut by maxsize (their sizes asked on the Ray workers) and a
    Parquet prefix read by ranged reads in Ray tasks: the local engine's bytes."""
    from tests.jobs.test_files_maxsize import write_tree
    from tests.jobs.test_parquet_remote import write_dataset
    from tests.s3.conftest import make_config
    from wds_cloud.openers.registry import OpenerRegistry
    from wds_cloud.openers.s3.opener import S3Opener

    write_tree(tmp_path / "src", seed=5, samples=150)
    write_dataset(tmp_path / "pq", seed=6)
    for root, prefix in ((tmp_path / "src", "raw/"), (tmp_path / "pq", "pq/")):
        for path in sorted(root.rglob("*")):
            if path.is_file():
                key = prefix + path.relative_to(root).as_posix()
                raw_client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    registry = OpenerRegistry()
    registry.register("s3", S3Opener(make_config(s3_endpoint)), override=True)
    for engine in ("local", "ray"):
        files = convert(f"s3://{bucket}/raw/", str(tmp_path / engine / "f-%03d.tar"),
                        maxsize=12000, registry=registry, engine=engine)  # fmt: skip
        table = convert(f"s3://{bucket}/pq/", str(tmp_path / engine / "p-%03d.tar"),
                        maxcount=30, registry=registry, engine=engine)  # fmt: skip
        assert len(files.shards) > 10 and len(table.shards) > 5
    assert digests(tmp_path / "local") == digests(tmp_path / "ray")


def test_killed_workers_leave_every_sample_exactly_once(ray_session, tmp_path):
    """SIGKILL Ray workers while they run tasks, several times; Ray reruns the tasks and the
    output is the input (mapped) sample for sample, byte for byte the local engine's output,
    with no partial shard and no temporary file left."""
    inputs = resolve_shards(write_inputs(tmp_path / "in", 8, 10))
    out = tmp_path / "ray"
    kills: list[int] = []
    stop = threading.Event()

    def killer() -> None:
        while not stop.is_set() and len(kills) < 4:
            pids = _running_task_workers()
            if pids:
                time.sleep(0.15)  # let it get into writing its shard
                try:
                    os.kill(pids[0], signal.SIGKILL)
                    kills.append(pids[0])
                except ProcessLookupError:
                    continue
                stop.wait(0.5)
            else:
                stop.wait(0.02)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        summary = reshard(
            inputs,
            str(out / "k-%03d.tar"),
            maxcount=4,
            shuffle=True,
            seed=5,
            map=helpers.slow_upper,
            engine=RayEngine(max_retries=20),
        )
    finally:
        stop.set()
        thread.join()
    assert len(kills) >= 3, kills
    expected = [helpers.upper(s) for s in read_samples(inputs)]
    assert multiset(read_samples(summary.shards)) == multiset(expected)
    assert summary.samples_out == len(expected) == 80
    assert listing(out) == [f"k-{i:03d}.tar" for i in range(20)] + ["k-N.tar.manifest.json"]
    reshard(
        inputs,
        str(tmp_path / "local" / "k-%03d.tar"),
        maxcount=4,
        shuffle=True,
        seed=5,
        map=helpers.upper,
    )
    assert digests(out) == digests(tmp_path / "local")


def test_map_index_verify_on_ray(ray_session, tmp_path):
    inputs = resolve_shards(write_inputs(tmp_path / "in", 4, 9))
    summary = map_shards(inputs, str(tmp_path / "m" / "m-%02d.tar"), helpers.broken, engine="ray")
    kept = [helpers.upper(s) for s in read_samples(inputs) if s["cls"] not in (b"3", b"5")]
    assert read_samples(summary.shards) == kept
    assert summary.skipped["map returned None"] == 5
    built = index_job(summary.shards, engine="ray")
    assert built.extra["failed"] == [] and built.samples_in == len(kept)
    stored = [Path(idx_url(u)).read_bytes() for u in summary.shards]
    build_index(summary.shards, json=False)
    assert [Path(idx_url(u)).read_bytes() for u in summary.shards] == stored
    assert verify_job(summary.shards, engine="ray").extra["corrupt"] == []


def test_ray_data_read_and_write(ray_session, tmp_path):
    from wds_cloud.ray import read_dataset, write_dataset

    inputs = resolve_shards(write_inputs(tmp_path / "in", 3, 7))
    ds = read_dataset(inputs)
    rows = ds.take_all()
    assert len(rows) == 21 and {r["__url__"] for r in rows} == set(inputs)
    shards = write_dataset(ds, str(tmp_path / "out" / "w-%04d.tar"), num_shards=2)
    assert shards == [str(tmp_path / "out" / f"w-{i:04d}.tar") for i in range(2)]
    assert multiset(read_samples(shards)) == multiset(read_samples(inputs))
    assert [n for n in listing(tmp_path / "out") if n.startswith(".")] == []


def test_cli_on_an_existing_cluster_by_address(ray_session, tmp_path):
    """`wds-cloud job ... --engine ray --address` joins the running cluster as a new driver."""
    import json
    import subprocess
    import sys

    inputs = resolve_shards(write_inputs(tmp_path / "in", 3, 6))
    address = ray_session.get_runtime_context().gcs_address
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "wds_cloud.cli",
            "job",
            "reshard",
            *inputs,
            "-o",
            str(tmp_path / "out"),
            "--nshards",
            "2",
            "--shuffle",
            "--engine",
            "ray",
            "--address",
            address,
            "--json",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["samples_out"] == 18 and len(report["shards"]) == 2
    assert multiset(read_samples(report["shards"])) == multiset(read_samples(inputs))
