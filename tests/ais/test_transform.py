"""Offline ETL (bucket transform) through the real aistore SDK against the emulator.

The ETL is ``etl_upper.py`` (a real hpush server process): it upper-cases ``.txt`` members of
a tar and fails (HTTP 500) on anything that is not a tar. Expected outputs are computed with
its own ``transform_tar`` on the source bytes, so each test checks the bytes written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.ais.conftest import make_shard
from tests.ais.etl_upper import transform_tar
from tests.emulators.ais.server import AisEmulator
from wds_cloud.aistore import transform as at
from wds_cloud.errors import ConfigError

pytestmark = pytest.mark.ais

FAST = {"poll_interval": 0.02, "progress": False, "timeout": 60}


def fill(emu: AisEmulator, bucket: str, names: list[str], bad: tuple[str, ...] = ()) -> dict:
    """Store a distinct small tar under each name (and junk under ``bad``); name -> bytes."""
    emu.store.create_bucket(bucket, exist_ok=True)
    out = {}
    for i, name in enumerate(names):
        data = b"not a tar: " + name.encode() if name in bad else make_shard(i, 3 + i % 4)[0]
        emu.store.put_object(bucket, name, data)
        out[name] = data
    return out


def stored(emu: AisEmulator, bucket: str) -> dict[str, bytes]:
    return {o.name: o.data for o in emu.store.list_objects(bucket)}


def test_whole_bucket(ais_emulator: AisEmulator, ais_client: Any, upper_etl: str) -> None:
    src = fill(ais_emulator, "raw", [f"train/shard-{i:04d}.tar" for i in range(5)] + ["x.tar"])
    result = at.transform("ais://raw", "ais://upper", upper_etl, client=ais_client, **FAST)
    assert result.success and result.finished and not result.aborted
    assert (result.kind, result.total, result.done, result.failed) == ("etl-bck", 6, 6, 0)
    assert result.failures == []
    expected = {n: transform_tar(d, "") for n, d in src.items()}
    assert stored(ais_emulator, "upper") == expected
    assert result.bytes == sum(len(d) for d in expected.values())
    assert stored(ais_emulator, "raw") == src  # the source is untouched


def test_prefix_with_ext_and_prepend(
    ais_emulator: AisEmulator, ais_client: Any, upper_etl: str
) -> None:
    names = [f"train/s{i}.tar" for i in range(3)] + [f"val/s{i}.tar" for i in range(4)]
    src = fill(ais_emulator, "raw", names)
    plan = at.plan_transform(
        "raw", prefix="val/", ext={"tar": "up.tar"}, prepend="v2/", client=ais_client
    )
    assert plan == [(f"val/s{i}.tar", f"v2/val/s{i}.up.tar") for i in range(4)]
    job = at.start_transform(
        "raw",
        "ais://out",
        upper_etl,
        prefix="val/",
        ext={"tar": "up.tar"},
        prepend="v2/",
        client=ais_client,
    )
    assert (job.kind, job.total, job.src, job.dst) == ("etl-bck", 4, "ais://raw", "ais://out")
    result = at.wait_transform(job, client=ais_client, **FAST)
    assert result.success and result.done == 4
    assert stored(ais_emulator, "out") == {d: transform_tar(src[s], "") for s, d in plan}


def test_object_list_reports_missing_names(
    ais_emulator: AisEmulator, ais_client: Any, upper_etl: str
) -> None:
    src = fill(ais_emulator, "raw", [f"s{i}.tar" for i in range(6)])
    ais_emulator.xactions.idle_finish_s = 0.1
    with pytest.raises(at.TransformError) as info:
        at.transform(
            "raw",
            "out",
            upper_etl,
            objects=["s1.tar", "s4.tar", "gone.tar"],
            client=ais_client,
            **FAST,
        )
    result = info.value.result
    assert result is not None and result.kind == "etl-listrange" and result.finished
    assert (result.total, result.done, result.failed) == (3, 2, 1)
    assert [(f.url, f.name, f.code) for f in result.failures] == [
        ("ais://raw/gone.tar", "gone.tar", 404)
    ]
    assert "ais://raw/gone.tar" in str(info.value)
    assert stored(ais_emulator, "out") == {
        n: transform_tar(src[n], "") for n in ("s1.tar", "s4.tar")
    }


def test_failing_objects_are_reported_and_others_written(
    ais_emulator: AisEmulator, ais_client: Any, upper_etl: str
) -> None:
    names = [f"s{i}.tar" for i in range(6)]
    bad = ("s1.tar", "s4.tar")
    src = fill(ais_emulator, "raw", names, bad=bad)
    with pytest.raises(at.TransformError) as info:
        at.transform("raw", "out", upper_etl, client=ais_client, **FAST)
    result = info.value.result
    assert result is not None and result.finished and not result.aborted and not result.success
    assert (result.done, result.failed) == (4, 2)
    assert sorted(f.name for f in result.failures) == list(bad)
    assert all(f.code == 500 and f.url == f"ais://raw/{f.name}" for f in result.failures)
    assert all(f"ais://raw/{n}" in str(info.value) for n in bad)
    good = {n: transform_tar(d, "") for n, d in src.items() if n not in bad}
    assert stored(ais_emulator, "out") == good


def test_stop_on_error_aborts(ais_emulator: AisEmulator, ais_client: Any, upper_etl: str) -> None:
    fill(ais_emulator, "raw", [f"s{i}.tar" for i in range(6)], bad=("s2.tar",))
    job = at.start_transform("raw", "out", upper_etl, continue_on_error=False, client=ais_client)
    with pytest.raises(at.TransformError, match="aborted") as info:
        at.wait_transform(job, client=ais_client, **FAST)
    result = info.value.result
    assert result is not None and result.aborted and "ais://raw/s2.tar" in result.error
    assert [f.name for f in result.failures] == ["s2.tar"]
    assert sorted(stored(ais_emulator, "out")) == ["s0.tar", "s1.tar"]  # stopped at s2


def test_refusals_name_the_problem(
    ais_emulator: AisEmulator, ais_client: Any, upper_etl: str
) -> None:
    fill(ais_emulator, "raw", ["a.tar"])
    with pytest.raises(at.TransformError, match="no-such-etl"):
        at.start_transform("raw", "out", "no-such-etl", client=ais_client)
    with pytest.raises(at.TransformError, match="ais://missing"):
        at.start_transform("missing", "out", upper_etl, client=ais_client, count=False)
    with pytest.raises(ConfigError, match="same bucket"):
        at.start_transform("raw", "ais://raw", upper_etl, client=ais_client)
    with pytest.raises(ConfigError, match="more than a bucket"):
        at.start_transform("ais://raw/train/", "out", upper_etl, client=ais_client)
    with pytest.raises(ConfigError, match="not both"):
        at.start_transform("raw", "out", upper_etl, prefix="a", objects=["a.tar"])
    assert not ais_emulator.store.has_bucket("out")


# ------------------------------------------------------------------------------ the real CLI


def cli(emu: AisEmulator, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AIS_ENDPOINT": emu.url}
    return subprocess.run(
        [sys.executable, "-m", "wds_cloud.cli", "ais", *args],
        capture_output=True,
        text=True,
        input=stdin,
        env=env,
        timeout=120,
        check=False,
    )


def test_cli_failed_objects_exit_nonzero_naming_them(
    ais_emulator: AisEmulator, upper_etl: str
) -> None:
    src = fill(ais_emulator, "raw", [f"s{i}.tar" for i in range(5)], bad=("s0.tar", "s3.tar"))
    run = cli(
        ais_emulator, "transform", "raw", "out", "--etl", upper_etl, "--poll-interval", "0.05"
    )
    assert run.returncode == 1, run.stderr
    failed = [line for line in run.stderr.splitlines() if ": failed: " in line]
    assert [line.split()[4] for line in failed] == ["ais://raw/s0.tar", "ais://raw/s3.tar"]
    assert all("(500)" in line for line in failed)
    assert "3/5 objects transformed" in run.stdout and "2 failed" in run.stdout
    good = {n: transform_tar(d, "") for n, d in src.items() if n not in ("s0.tar", "s3.tar")}
    assert stored(ais_emulator, "out") == good


def test_cli_objects_file_and_json(ais_emulator: AisEmulator, upper_etl: str) -> None:
    src = fill(ais_emulator, "raw", [f"s{i}.tar" for i in range(4)])
    ais_emulator.xactions.idle_finish_s = 0.1
    args = ["transform", "ais://raw", "ais://out", "--etl", upper_etl, "--objects-file", "-"]
    run = cli(ais_emulator, *args, "--json", "--poll-interval", "0.05", stdin="s3.tar\n\ns0.tar\n")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["success"] and report["kind"] == "etl-listrange"
    assert (report["total"], report["done"], report["failed"]) == (2, 2, 0)
    assert stored(ais_emulator, "out") == {
        n: transform_tar(src[n], "") for n in ("s0.tar", "s3.tar")
    }


def test_cli_dry_run_starts_nothing(ais_emulator: AisEmulator, upper_etl: str) -> None:
    fill(ais_emulator, "raw", ["a/x.tar", "a/y.tar", "b/z.tar"])
    run = cli(
        ais_emulator,
        "transform",
        "raw",
        "out",
        "--etl",
        upper_etl,
        "--prefix",
        "a/",
        "--ext",
        "tar=up.tar",
        "--dry-run",
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["a/x.tar -> a/x.up.tar", "a/y.tar -> a/y.up.tar"]
    assert not ais_emulator.store.has_bucket("out")
    assert not ais_emulator.xactions.by_id


def test_cli_no_wait_then_status(ais_emulator: AisEmulator, upper_etl: str) -> None:
    src = fill(ais_emulator, "raw", [f"s{i}.tar" for i in range(3)])
    ais_emulator.xactions.hold()
    run = cli(ais_emulator, "transform", "raw", "out", "--etl", upper_etl, "--no-wait")
    assert run.returncode == 0, run.stderr
    job = run.stdout.strip()
    assert job in ais_emulator.xactions.by_id
    running = cli(ais_emulator, "status", job, "--etl", upper_etl)
    assert running.returncode == 0, running.stderr
    assert " running" in running.stdout and "0 objects transformed" in running.stdout
    ais_emulator.xactions.release()
    done = cli(ais_emulator, "status", job, "--etl", upper_etl, "--wait", "--poll-interval", "0.05")
    assert done.returncode == 0, done.stderr
    assert " finished" in done.stdout and "3 objects transformed" in done.stdout
    assert stored(ais_emulator, "out") == {n: transform_tar(d, "") for n, d in src.items()}
    unknown = cli(ais_emulator, "status", "nosuchjob", "--etl", upper_etl)
    assert unknown.returncode == 1 and "no such job" in unknown.stderr


def test_failures_beyond_what_the_cluster_names_are_counted(
    ais_emulator: AisEmulator, ais_client: Any, upper_etl: str
) -> None:
    names = [f"b{i:03d}.bin" for i in range(131)] + ["good.tar"]
    fill(ais_emulator, "raw", names, bad=tuple(names[:131]))
    job = at.start_transform("raw", "out", upper_etl, client=ais_client)
    with pytest.raises(at.TransformError) as info:
        at.wait_transform(job, client=ais_client, **FAST)
    result = info.value.result
    assert result is not None and (result.total, result.done, result.failed) == (132, 1, 131)
    assert len(result.failures) == 128  # AIStore's etl.MaxObjErr
    assert {f.name for f in result.failures} < set(names[:131])
    # without the listing there is no total: only the named failures are counted
    uncounted = at.start_transform("raw", "out2", upper_etl, count=False, client=ais_client)
    assert uncounted.total is None
    with pytest.raises(at.TransformError) as info:
        at.wait_transform(uncounted, client=ais_client, **FAST)
    assert info.value.result is not None and info.value.result.failed == 128


def test_a_job_aborted_on_the_cluster_is_reported(
    ais_emulator: AisEmulator, ais_client: Any, upper_etl: str
) -> None:
    fill(ais_emulator, "raw", [f"s{i}.tar" for i in range(3)])
    ais_emulator.xactions.hold()
    job = at.start_transform("raw", "out", upper_etl, client=ais_client)
    running = at.transform_status(job.job_id, etl=upper_etl, client=ais_client)
    assert (running.kind, running.src, running.dst) == ("etl-bck", "ais://raw", "ais://out")
    assert not running.finished and running.done == 0
    ais_client.job(job.job_id).abort()  # the SDK's Job.abort: PUT /v1/cluster "stop"
    with pytest.raises(at.TransformError, match="aborted") as info:
        at.wait_transform(job, client=ais_client, **FAST)
    assert info.value.result is not None and info.value.result.aborted
    assert ais_emulator.store.list_objects("out") == []


def test_a_failed_status_request_is_a_transform_error(ais_client: Any, upper_etl: str) -> None:
    """A job the cluster does not know, given as a :class:`TransformJob` (not looked up first):
    the status request itself fails, for one look and for waiting alike."""
    job = at.TransformJob("nosuchjob", "etl-bck", upper_etl, "ais://raw", "ais://out")
    with pytest.raises(at.TransformError, match="status failed") as info:
        at.transform_status(job, client=ais_client)
    assert info.value.job_id == "nosuchjob"
    with pytest.raises(at.TransformError, match="status failed"):
        at.wait_transform(job, client=ais_client, **FAST)


def test_transform_with_an_endpoint_only(ais_emulator: AisEmulator, upper_etl: str) -> None:
    """No client given: one is made from the endpoint and both starting and waiting use it."""
    src = fill(ais_emulator, "raw", ["a.tar", "b.tar"])
    result = at.transform("ais://raw", "ais://upper", upper_etl, endpoint=ais_emulator.url, **FAST)
    assert result.success and (result.total, result.done) == (2, 2)
    assert stored(ais_emulator, "upper") == {n: transform_tar(d, "") for n, d in src.items()}
