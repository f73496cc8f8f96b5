"""Every failure is one line and an exit code (``--debug`` adds the traceback); brace limits;
control characters in names are escaped. All through the real ``wds-cloud`` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import tarbuild


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m wds_cloud.cli ARGS`` (text output; a generous guard against hangs)."""
    return subprocess.run(
        [sys.executable, "-m", "wds_cloud.cli", *args],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )


def one_error_line(out: subprocess.CompletedProcess[str], command: str) -> str:
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"wds-cloud {command}: error: "), lines
    return lines[0]


def test_dsort_spec_without_arguments_is_a_usage_error() -> None:
    out = cli("dsort-spec")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "the following arguments are required: --input-bck" in out.stderr


def test_demo_into_an_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("x")
    line = one_error_line(cli("demo", "--dir", str(target)), "demo")
    assert "exists and is not a directory" in line
    debug = cli("--debug", "demo", "--dir", str(target))
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == line


def test_bench_one_shard_uses_one_worker(tmp_path: Path) -> None:
    path = tmp_path / "one.tar"
    tarbuild.write(str(path), tarbuild.tar_bytes([(f"s{i}.txt", b"x" * 10) for i in range(6)]))
    out = cli("bench", str(path), "--batch-size", "2", "--window", "1", "--json")
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "using 1 worker(s) instead of 4" in out.stderr
    assert json.loads(out.stdout)["samples"] == 6


def test_debug_flag_after_the_subcommand_and_unexpected_errors(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.tar")
    line = one_error_line(cli("cat", missing, "a.txt"), "cat")
    assert "missing.tar" in line
    debug = cli("cat", missing, "a.txt", "--debug")
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == line
    # a pipe: command that is not tar: a read error, one line
    out = cli("ls", "--samples", "pipe:echo not-a-tar")
    line = one_error_line(out, "ls")
    assert "ShardReadError" not in line and "pipe:echo not-a-tar" in line


@pytest.mark.parametrize("command", ["ls", "stats", "verify", "preview", "bench"])
def test_huge_brace_patterns_are_refused_at_once(command: str, tmp_path: Path) -> None:
    pattern = str(tmp_path / "x-{0..999}{0..999}{0..999}.tar")
    line = one_error_line(cli(command, pattern), command)
    assert "expands to 1,000,000,000 URLs, more than the limit of 1,000,000" in line
    small = str(tmp_path / "y-{0..999}.tar")
    line = one_error_line(cli(command, small, env={"WDS_CLOUD_MAX_URLS": "100"}), command)
    assert "expands to 1,000 URLs, more than the limit of 100" in line


def test_bad_brace_pattern_has_a_reason(tmp_path: Path) -> None:
    line = one_error_line(cli("ls", str(tmp_path / "x-{0..9.tar")), "ls")
    assert line.rstrip().endswith(")") and "unbalanced braces" in line


def test_control_characters_in_names_are_escaped(tmp_path: Path) -> None:
    path = tmp_path / "evil\x1b]0;title\x07.tar"
    tarbuild.write(
        str(path),
        tarbuild.tar_bytes(
            [
                ("clear\x1b[2J\x1b[H.txt", b"1"),
                ("bidi\u202etxt.exe.cls", b"2"),
                ("tab\there.json", b"{}"),
            ]
        ),
    )
    out = cli("ls", "--samples", str(path))
    assert out.returncode == 0, out.stderr
    for raw in ("\x1b", "\x07", "\u202e", "\t"):
        assert raw not in out.stdout
    assert "clear\\x1b[2J\\x1b[H  txt:1" in out.stdout
    assert "bidi\\u202etxt  exe.cls:1" in out.stdout and "tab\\x09here" in out.stdout
    assert "evil\\x1b]0;title\\x07.tar" in out.stdout
    listed = cli("ls", str(path))
    assert "\x1b" not in listed.stdout and "evil\\x1b]0;title\\x07.tar" in listed.stdout
    stats = cli("stats", str(path))
    assert "\u202e" not in stats.stdout
    # JSON keeps the exact names (escaped by the JSON encoder)
    data = json.loads(cli("ls", "--samples", "--json", str(path)).stdout)
    assert data["shards"][0]["samples"][0]["key"] == "clear\x1b[2J\x1b[H"


def test_control_characters_in_error_reports_are_escaped(tmp_path: Path) -> None:
    path = tmp_path / "dup.tar"
    tarbuild.write(
        str(path), tarbuild.tar_bytes([("k\x1b[31m.txt", b"1"), ("k\x1b[31m.txt", b"2")])
    )
    out = cli("verify", str(path))
    assert out.returncode == 1 and "CORRUPT" in out.stdout
    assert "\x1b" not in out.stdout and "member=k\\x1b[31m" in out.stdout
    line = one_error_line(cli("cat", str(tmp_path / "gone\x1b[31m.tar"), "a.txt"), "cat")
    assert "\x1b" not in line


def test_main_in_process_restores_logging(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import logging

    from wds_cloud.cli import main

    logger = logging.getLogger("wds_cloud")
    before = (list(logger.handlers), logger.level)
    assert main(["--debug", "cat", str(tmp_path / "missing.tar"), "a.txt"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "wds-cloud cat: error:" in err
    assert (list(logger.handlers), logger.level) == before
