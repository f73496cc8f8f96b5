"""``dsort start`` / ``wait`` / ``abort`` against the AIStore emulator, through the real SDK."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Any

import pytest

from tests.dsort.conftest import make_shards, read_shards
from tests.emulators.ais import dsort as emu_dsort

from .conftest import Runner, clean_env

BLOG = Path(__file__).parents[1] / "dsort" / "data" / "blog-webdataset-part1.json"

pytestmark = pytest.mark.ais

SPEC_YAML = """\
input_bck: {name: src}
input_format: {template: "samples-{00..03}.tar"}
output_bck: {name: dst}
output_format: "out-{000..999}.tar"
output_shard_size: 600B
algorithm: {kind: shuffle, seed: "7"}
"""


def _env(emu: Any) -> dict[str, str]:
    return clean_env({"AIS_ENDPOINT": emu.url})


def _sort_requests(emu: Any) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in emu.requests if r[1].startswith("/v1/sort")]


def _start(wds_cli: Runner, emu: Any, *args: str, stdin: bytes | None = None) -> str:
    out = wds_cli("dsort", "start", *args, env=_env(emu), input=stdin)
    assert out.returncode == 0, out.stderr
    job = out.stdout.decode().strip()
    assert job.startswith("srt-") and "\n" not in job
    return job


def test_the_blog_workflow(wds_cli: Runner, ais_emulator: Any) -> None:
    """The post's spec, verbatim: start, wait, then list the shuffled shards by prefix."""
    records = make_shards(ais_emulator.store, "images", shards=19, per_shard=2,
                          template="samples-{:02d}.tar")  # fmt: skip
    out = wds_cli("dsort", "start", str(BLOG), env=_env(ais_emulator))
    assert out.returncode == 0, out.stderr
    job = out.stdout.decode().strip()
    warned = [x for x in out.stderr.decode().splitlines() if "old" in x]
    assert len(warned) == 3 and all(
        x.startswith("wds-cloud dsort start: warning: ") for x in warned
    )
    assert any("'bck'" in x and "'input_bck'" in x for x in warned)
    done = wds_cli("dsort", "wait", job, "--poll-interval", "0.05", env=_env(ais_emulator))
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith(f"dSort {job} finished")
    assert "1 shards created from 19 input shards (114 tar members" in done.stdout.decode()
    shuffled = read_shards(ais_emulator.store, "images", prefix="shuffled")
    assert [name for name, _ in shuffled] == ["shuffled-shard-0.tar"]
    assert sorted(r.key for r in shuffled[0][1]) == sorted(r.key for r in records)
    listed = wds_cli("ls", "ais://images/shuffled", env=_env(ais_emulator))
    assert listed.returncode == 0 and listed.stdout == b"ais://images/shuffled-shard-0.tar\n"


def test_start_from_stdin_yaml_and_wait_json(wds_cli: Runner, ais_emulator: Any) -> None:
    make_shards(ais_emulator.store, "src")
    job = _start(wds_cli, ais_emulator, "-", stdin=SPEC_YAML.encode())
    out = wds_cli("dsort", "wait", job, "--poll-interval", "0.05", "--json",
                  env=_env(ais_emulator))  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["job_id"] == job and result["success"] and result["members"] == 3 * 24
    assert result["shards_created"] == len(read_shards(ais_emulator.store, "dst")) > 2
    assert _sort_requests(ais_emulator)[0] == ("POST", "/v1/sort")


def test_wait_fails_with_the_jobs_error(wds_cli: Runner, ais_emulator: Any) -> None:
    make_shards(ais_emulator.store, "src", shards=2)  # samples-02 and -03 are missing
    spec = SPEC_YAML + "Config: {missing_shards: abort}\n"
    job = _start(wds_cli, ais_emulator, "-", stdin=spec.encode())
    out = wds_cli("dsort", "wait", job, "--poll-interval", "0.05", env=_env(ais_emulator))
    assert out.returncode == 1 and out.stdout == b""
    err = out.stderr.decode()
    assert err.startswith("wds-cloud dsort wait: error: dSort job failed: ")
    assert "ais://src/samples-02.tar" in err and "does not exist" in err and job in err


def test_aborted_job_makes_wait_fail(wds_cli: Runner, ais_emulator: Any) -> None:
    make_shards(ais_emulator.store, "src")
    gate = emu_dsort.jobs(ais_emulator.store)
    gate.hold()
    try:
        job = _start(wds_cli, ais_emulator, "-", stdin=SPEC_YAML.encode())
        out = wds_cli("dsort", "abort", job, env=_env(ais_emulator))
        assert out.returncode == 0 and out.stdout.decode() == f"aborted {job}\n"
    finally:
        gate.release()
    out = wds_cli("dsort", "wait", job, "--poll-interval", "0.05", env=_env(ais_emulator))
    assert out.returncode == 1
    assert "dSort job failed: aborted" in out.stderr.decode()


def test_wait_timeout_unknown_job_and_no_endpoint(wds_cli: Runner, ais_emulator: Any) -> None:
    make_shards(ais_emulator.store, "src")
    gate = emu_dsort.jobs(ais_emulator.store)
    gate.hold()
    try:
        job = _start(wds_cli, ais_emulator, "-", stdin=SPEC_YAML.encode())
        out = wds_cli("dsort", "wait", job, "--timeout", "0.3", "--poll-interval", "0.05",
                      env=_env(ais_emulator))  # fmt: skip
        assert out.returncode == 1 and b"still running after 0.3s" in out.stderr
    finally:
        gate.release()
    out = wds_cli("dsort", "wait", "srt-nope", env=_env(ais_emulator))
    assert out.returncode == 1 and b"no such dSort job" in out.stderr
    out = wds_cli("dsort", "start", str(BLOG), env=clean_env())
    assert out.returncode == 1 and b"pass --endpoint URL or set AIS_ENDPOINT" in out.stderr


def test_start_refuses_an_invalid_spec(wds_cli: Runner, ais_emulator: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"input_bck": {"name": "src"}, "input_format": {"template": "s-{0..3}.tar"},'
                   ' "output_format": "o-{0..9}.tar", "algorithm": {"kind": "random"}}')  # fmt: skip
    out = wds_cli("dsort", "start", str(bad), env=_env(ais_emulator))
    assert out.returncode == 1 and out.stdout == b""
    assert b"algorithm.kind" in out.stderr and b"invalid sorting algorithm" in out.stderr
    assert _sort_requests(ais_emulator) == [], "nothing was sent"


def test_wait_draws_a_progress_bar_on_a_terminal(ais_emulator: Any) -> None:
    make_shards(ais_emulator.store, "src")
    env = _env(ais_emulator)
    job = subprocess.run(
        [sys.executable, "-m", "wds_cloud.cli", "dsort", "start", "-"],
        input=SPEC_YAML.encode(), capture_output=True, env=env, timeout=60, check=True,
    ).stdout.decode().strip()  # fmt: skip
    leader, follower = pty.openpty()
    # a fresh pty is 0 columns wide, which tqdm takes literally: make it 24x100
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "wds_cloud.cli", "dsort", "wait", job, "--poll-interval",
             "0.05"],
            stdout=subprocess.PIPE, stderr=follower, env=env, timeout=60, check=False,
        )  # fmt: skip
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    bar = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, bar
    assert f"dSort {job}" in bar and "shard" in bar, bar
