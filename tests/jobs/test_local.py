"""Jobs on the local engine: what each job writes, skips and reports; names, bytes, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.jobs import helpers
from tests.jobs.helpers import listing, multiset, read_samples, write_inputs
from wds_cloud.errors import ConfigError
from wds_cloud.index.build import build_index
from wds_cloud.index.format import idx_url
from wds_cloud.jobs import LocalEngine, convert, index_job, map_shards, reshard, verify_job
from wds_cloud.jobs.sources import ShardSource
from wds_cloud.jobs.task import Ops, Task, run_task
from wds_cloud.listing import resolve_shards


@pytest.fixture
def inputs(tmp_path: Path) -> list[str]:
    return resolve_shards(write_inputs(tmp_path / "in", 5, 13))


def test_reshard_keeps_order_and_cuts_by_count(inputs, tmp_path):
    out = str(tmp_path / "out" / "r-%04d.tar")
    summary = reshard(inputs, out, maxcount=10)
    assert summary.shards == [out % i for i in range(7)]
    assert [len(read_samples([u])) for u in summary.shards] == [10] * 6 + [5]
    assert read_samples(summary.shards) == read_samples(inputs)
    assert (summary.samples_in, summary.samples_out, summary.skipped) == (65, 65, {})
    assert sorted(listing(tmp_path / "out")) == sorted(
        [f"r-{i:04d}.tar" for i in range(7)] + ["r-N.tar.manifest.json"]
    )


def test_reshard_by_size_and_count(inputs, tmp_path):
    out = str(tmp_path / "o-%d.tar")
    summary = reshard(inputs, out, maxsize=8000, manifest=False)
    assert all(os.path.getsize(u) <= 8000 for u in summary.shards)
    assert read_samples(summary.shards) == read_samples(inputs)
    summary = reshard(inputs, str(tmp_path / "n-%d.tar"), nshards=4, manifest=False)
    assert [len(read_samples([u])) for u in summary.shards] == [17, 16, 16, 16]


def test_shuffle_mixes_across_shards_and_is_seeded(inputs, tmp_path):
    a = reshard(inputs, str(tmp_path / "a" / "%d.tar"), maxcount=13, shuffle=True, seed=7)
    b = reshard(
        inputs,
        str(tmp_path / "b" / "%d.tar"),
        maxcount=13,
        shuffle=True,
        seed=7,
        engine=LocalEngine(workers=3),
    )
    c = reshard(inputs, str(tmp_path / "c" / "%d.tar"), maxcount=13, shuffle=True, seed=8)
    original = read_samples(inputs)
    first = read_samples([a.shards[0]])
    assert multiset(read_samples(a.shards)) == multiset(original)
    # the first output shard draws from several input shards, not one
    assert len({original.index(s) // 13 for s in first}) > 1
    assert len(a.shards) == len(b.shards) == len(c.shards) == 5
    assert helpers.digests(tmp_path / "a") == helpers.digests(tmp_path / "b")
    assert helpers.digests(tmp_path / "a") != helpers.digests(tmp_path / "c")


def test_output_names_depend_on_input_and_parameters_only(inputs, tmp_path):
    out = str(tmp_path / "x" / "shard-%06d.tar")
    first = reshard(inputs, out, maxcount=20, manifest=False).shards
    again = reshard(list(reversed(list(reversed(inputs)))), out, maxcount=20, manifest=False)
    assert again.shards == first == [out % i for i in range(4)]


def test_map_drops_broken_samples_with_counts_and_reasons(inputs, tmp_path):
    out = str(tmp_path / "m" / "m-%03d.tar")
    summary = map_shards(inputs, out, helpers.broken)
    samples = read_samples(inputs)
    kept = [helpers.upper(s) for s in samples if s["cls"] not in (b"3", b"5")]
    assert read_samples(summary.shards) == kept
    n3 = sum(s["cls"] == b"3" for s in samples)
    assert summary.skipped == {
        "map returned None": n3,
        **{f"ValueError: cannot decode {s['__key__']}": 1 for s in samples if s["cls"] == b"5"},
    }
    assert summary.samples_in == len(samples)
    assert summary.samples_out == len(kept)
    assert "skipped" in summary.text() and "map returned None" in summary.text()


def test_convert_from_shards_with_select_and_map(inputs, tmp_path):
    out = str(tmp_path / "c-%02d.tar")
    summary = convert(
        inputs, out, maxcount=8, select=helpers.even_class, map=helpers.upper, manifest=False
    )
    samples = read_samples(inputs)
    assert read_samples(summary.shards) == [
        helpers.upper(s) for s in samples if int(s["cls"]) % 2 == 0
    ]
    assert summary.skipped == {"select": sum(int(s["cls"]) % 2 == 1 for s in samples)}


def test_convert_directory_of_files(tmp_path):
    src = tmp_path / "files"
    for i in range(23):
        (src / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (src / f"d{i % 3}" / f"img{i:03d}.jpg").write_bytes(bytes([i]) * (i + 1))
        (src / f"d{i % 3}" / f"img{i:03d}.cls").write_text(str(i))
    out = str(tmp_path / "out" / "f-%03d.tar")
    summary = convert(str(src), out, maxcount=5)
    got = read_samples(summary.shards)
    assert len(summary.shards) == 5 and len(got) == 23
    assert got[0] == {"__key__": "d0/img000", "cls": b"0", "jpg": b"\0"}
    assert [s["__key__"] for s in got] == sorted(s["__key__"] for s in got)


def test_convert_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "id": [f"row{i:03d}" for i in range(25)],
            "jpg": [bytes([i]) * 3 for i in range(25)],
            "caption": [f"caption {i}" if i % 4 else None for i in range(25)],
            "label": list(range(25)),
        }
    )
    (tmp_path / "pq").mkdir()
    pq.write_table(table, tmp_path / "pq" / "part-0.parquet", row_group_size=7)
    out = str(tmp_path / "out" / "p-%03d.tar")
    summary = convert(str(tmp_path / "pq"), out, maxcount=10, key="id")
    got = read_samples(summary.shards)
    assert len(summary.shards) == 3 and len(got) == 25
    assert got[1] == {"__key__": "row001", "jpg": b"\1\1\1", "caption": b"caption 1", "label": b"1"}
    assert "caption" not in got[0]  # a null value gives no member


def test_retried_task_replaces_its_own_output(inputs, tmp_path):
    out = str(tmp_path / "t-%d.tar")
    task = Task(3, ShardSource(inputs[0]), out % 3)
    ops = Ops(map=helpers.upper, pattern=out)
    leftover = tmp_path / ".t-3.tar.tmp-12345-deadbeef"
    leftover.write_bytes(b"half a shard")
    first = run_task(task, ops)
    data = Path(out % 3).read_bytes()
    Path(out % 3).write_bytes(b"garbage from an older attempt")
    second = run_task(task, ops)
    assert Path(out % 3).read_bytes() == data
    assert first == second
    assert listing(tmp_path) == ["in/" + os.path.basename(u) for u in inputs] + ["t-3.tar"]


def test_manifest_of_another_job_is_refused(inputs, tmp_path):
    out = str(tmp_path / "o-%d.tar")
    reshard(inputs, out, maxcount=20)
    with pytest.raises(ConfigError, match="records another job"):
        reshard(inputs, out, maxcount=21)
    again = reshard(inputs, out, maxcount=20)
    assert again.resumed == 4 and again.samples_out == 65


def test_index_and_verify_jobs(inputs, tmp_path):
    summary = index_job(inputs, json=str(tmp_path / "in" / "ds.json"), engine="local")
    assert summary.extra["failed"] == [] and summary.samples_in == 65
    stored = {u: Path(idx_url(u)).read_bytes() for u in inputs}
    for u in inputs:
        os.unlink(idx_url(u))
    build_index(inputs, json=False)
    assert {u: Path(idx_url(u)).read_bytes() for u in inputs} == stored
    data = json.loads((tmp_path / "in" / "ds.json").read_bytes())
    assert sum(s["nsamples"] for s in data["shardlist"]) == 65

    blob = bytearray(Path(inputs[2]).read_bytes())
    blob[1024 + 148 : 1024 + 156] = b"0000000\0"  # break the checksum of a later header
    Path(inputs[2]).write_bytes(bytes(blob))
    report = verify_job(inputs, engine="local")
    (bad,) = report.extra["corrupt"]
    assert bad["url"] == inputs[2] and bad["offset"] is not None


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "wds_cloud.cli", "job", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def test_cli_resumes_after_the_driver_is_killed(inputs, tmp_path):
    """SIGKILL the whole `wds-cloud job map` run once a few shards are committed; the same
    command then skips them and the result equals an uninterrupted run, byte for byte."""
    many = resolve_shards(write_inputs(tmp_path / "many", 12, 5))
    out = tmp_path / "out"
    args = ["map", *many, "-o", str(out), "--fn", "tests.jobs.helpers:slow_upper", "--json"]
    proc = _cli(*args, env={"WDS_TEST_SLOW": "0.05"})
    manifest = out / "shard-N.tar.manifest.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if manifest.exists() and len(json.loads(manifest.read_bytes())["tasks"]) >= 3:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    committed = len(json.loads(manifest.read_bytes())["tasks"])
    assert 3 <= committed < 12
    rerun = _cli(*args, env={"WDS_TEST_SLOW": "0"})
    stdout, stderr = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["resumed"] == committed and report["samples_out"] == 60
    clean = tmp_path / "clean"
    done = _cli(*args[:-5], "-o", str(clean), "--fn", "tests.jobs.helpers:upper", "-q")
    assert done.wait(timeout=120) == 0
    assert helpers.digests(out) == helpers.digests(clean)
    assert [n for n in listing(out) if n.startswith(".")] == []


def test_cli_reshard_and_verify_json(inputs, tmp_path):
    out = tmp_path / "cli"
    proc = _cli("reshard", *inputs, "-o", str(out), "--maxcount", "30", "--shuffle", "--json")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["samples_out"] == 65 and len(report["shards"]) == 3
    proc = _cli("verify", *report["shards"], "--json")
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and json.loads(stdout)["corrupt"] == []
    bad = report["shards"][1]
    blob = bytearray(Path(bad).read_bytes())
    blob[148:156] = b"0000000\0"  # the first header's checksum
    Path(bad).write_bytes(bytes(blob))
    proc = _cli("verify", *report["shards"])
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1 and bad in stdout + stderr, stdout + stderr
    assert "2 of 3 shards OK" in stdout
    proc = _cli("reshard", *inputs, "-o", str(out))
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "--maxcount, --maxsize or --nshards" in stderr


def test_cli_takes_a_directory_prefix_and_prints_the_skipped_reasons_as_lines(tmp_path):
    """`job reshard DIR/` lists the folder, and several spec arguments are each listed (a glob,
    a brace pattern) and joined in order; the map summary prints one line per skip reason."""
    write_inputs(tmp_path / "in", 3, 10)
    brace = write_inputs(tmp_path / "more", 2, 5, seed=1)
    out = tmp_path / "out"
    proc = _cli("reshard", f"{tmp_path / 'in'}/", "-o", str(out), "--maxcount", "7", "--json")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert json.loads(stdout)["samples_out"] == 30 and len(json.loads(stdout)["shards"]) == 5
    both = tmp_path / "both"
    proc = _cli("reshard", f"{tmp_path / 'in'}/*.tar", brace, "-o", str(both), "--maxcount", "40")
    assert proc.wait(timeout=120) == 0
    assert [s["__key__"] for s in read_samples(sorted(map(str, both.glob("*.tar"))))] == [
        s["__key__"] for s in read_samples(resolve_shards(f"{tmp_path / 'in'}/"))
    ] + [f"s1/k{i:05d}" for i in range(10)]
    proc = _cli("map", f"{out}/", "--fn", "tests.jobs.helpers:broken", "-o", str(tmp_path / "m"))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    lines = stdout.splitlines()
    assert lines[0].startswith("map: 30 samples in") and "\\x0a" not in stdout
    assert any(line.startswith("  skipped 4: map returned None") for line in lines), stdout


def test_cli_convert_directory_with_select_and_index(tmp_path):
    src = tmp_path / "files"
    src.mkdir()
    for i in range(9):
        (src / f"{i:02d}.txt").write_text(f"t{i}")
        (src / f"{i:02d}.cls").write_text(str(i % 7))
    out = tmp_path / "out"
    proc = _cli(
        "convert",
        str(src),
        "-o",
        str(out),
        "--maxcount",
        "4",
        "--pattern",
        "c-%02d.tar",
        "--select",
        "tests.jobs.helpers:even_class",
        "--json",
    )
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["samples_in"] == 9 and report["skipped"] == {"select": 4}
    # the third task's one sample is filtered out: it writes no shard (no empty shard)
    assert report["tasks"] == 3
    assert report["shards"] == [str(out / f"c-{i:02d}.tar") for i in range(2)]
    assert [s["__key__"] for s in read_samples(report["shards"])] == ["00", "02", "04", "06", "07"]
    proc = _cli("index", *report["shards"], "-q")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "wrote" in stdout and (out / "index.json").exists()
    proc = _cli("map", *report["shards"], "-o", str(out), "--fn", "tests.jobs.helpers:nope")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "--fn 'tests.jobs.helpers:nope'" in stderr
