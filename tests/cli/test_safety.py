"""Safety of the command line: the ``pipe:`` gate on every write path, file names that are
never commands, and ``create --pattern`` confined to ``--output``. Everything runs through the
real ``wds-cloud`` command in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wds_cloud.writing.tarwriter import TarWriter

from .conftest import Runner

EVIL = "pipe:touch PWNED;x.tar"


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("WDS_CLOUD_ALLOW_PIPE", "WDS_SECURE")}
    return subprocess.run(
        [sys.executable, "-m", "wds_cloud.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean, **(env or {})},
        timeout=120,
        check=False,
    )


def write_shard(path: Path, keys: tuple[str, ...] = ("a", "b")) -> Path:
    with TarWriter(str(path)) as writer:
        for key in keys:
            writer.write({"__key__": key, "txt": f"text {key}"})
    return path


@pytest.fixture
def evil_dir(tmp_path: Path) -> Path:
    """A working directory holding one valid shard named like a pipe: command."""
    work = tmp_path / "work"
    work.mkdir()
    write_shard(work / EVIL)
    return work


def test_verify_glob_reads_the_file_and_runs_nothing(evil_dir: Path) -> None:
    out = run_cli("verify", "*.tar", "--json", cwd=evil_dir)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)["reports"][0]
    assert report["url"] == str(evil_dir / EVIL) and report["samples"] == 2
    assert not (evil_dir / "PWNED").exists()


def test_verify_shell_expanded_name_is_a_path(evil_dir: Path) -> None:
    # what `wds-cloud verify *.tar` gets from the shell: the file name itself
    out = run_cli("verify", EVIL, cwd=evil_dir)
    assert out.returncode == 0, out.stderr
    assert "1 of 1 shards OK (2 samples)" in out.stdout
    assert not (evil_dir / "PWNED").exists()


def test_cat_of_an_existing_file_named_like_a_command_reads_it(evil_dir: Path) -> None:
    out = run_cli("cat", EVIL, "a.txt", cwd=evil_dir)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "text a"
    assert not (evil_dir / "PWNED").exists()


def test_existing_directory_named_like_a_command_is_listed(evil_dir: Path) -> None:
    folder = evil_dir / "pipe:touch PWNED-DIR"
    folder.mkdir()
    write_shard(folder / "s-0.tar")
    out = run_cli("ls", "pipe:touch PWNED-DIR", cwd=evil_dir)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [str(folder / "s-0.tar")]
    assert not (evil_dir / "PWNED-DIR").exists()


def test_webdataset_glob_reads_the_file_and_runs_nothing(evil_dir: Path) -> None:
    code = (
        "import wds_cloud as wds\n"
        "print([s['__url__'] for s in wds.WebDataset('*.tar', shardshuffle=False)])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=evil_dir, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == repr([str(evil_dir / EVIL)] * 2)
    assert not (evil_dir / "PWNED").exists()


@pytest.mark.parametrize("env", [{"WDS_CLOUD_ALLOW_PIPE": "0"}, {"WDS_SECURE": "1"}])
def test_switched_off_pipe_is_refused_by_every_write_command(tmp_path: Path, env: dict) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "000.txt").write_text("hello")
    shard = write_shard(tmp_path / "s.tar")
    recipe = tmp_path / "recipe.txt"
    recipe.write_text(f"000.txt pipe:touch {tmp_path}/ran-recipe\n")
    commands = {
        "upload": ["upload", str(shard), f"pipe:touch {tmp_path}/ran-upload; cat >/dev/null #"],
        "create": ["create", str(src), "-o", f"pipe:touch {tmp_path}/ran-create; cat >/dev/null #"],
        "recipe": ["create", "--recipe", str(recipe), "-o", str(tmp_path / "out")],
    }
    for name, args in commands.items():
        out = run_cli(*args, cwd=tmp_path, env=env)
        assert out.returncode == 1, (name, out.stdout, out.stderr)
        assert "pipe: URLs are disabled" in out.stderr and "Traceback" not in out.stderr, name
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("ran-")]
    assert not (tmp_path / "out").exists(), "a refused command makes no folder"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("pipe:")], "no stray folder"


@pytest.mark.parametrize(
    "pattern", ["../../esc-%06d.tar", "sub/../../esc-%06d.tar", "/tmp/x-%d.tar"]
)
def test_create_pattern_must_stay_inside_output(
    wds_cli: Runner, tmp_path: Path, pattern: str
) -> None:
    src = tmp_path / "a" / "src"
    src.mkdir(parents=True)
    (src / "000.txt").write_text("hello")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    out = wds_cli("create", str(src), "-o", str(tmp_path / "a" / "out"), "--pattern", pattern)
    assert out.returncode == 1
    err = out.stderr.decode()
    assert "would write outside --output" in err and len(err.strip().splitlines()) == 1
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before, "nothing was written"


def test_create_pattern_in_a_subfolder_is_fine(wds_cli: Runner, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "000.txt").write_text("hello")
    (tmp_path / "out" / "sub").mkdir(parents=True)
    out = wds_cli("create", str(src), "-o", str(tmp_path / "out"), "--pattern", "sub/s-%d.tar")
    assert out.returncode == 0, out.stderr
    assert os.listdir(tmp_path / "out" / "sub") == ["s-0.tar"]


def test_create_into_a_percent_encoded_file_url(wds_cli: Runner, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "000.txt").write_text("hello")
    out_dir = tmp_path / "out dir"
    out = wds_cli("create", str(src), "-o", out_dir.as_uri(), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["shards"] == [out_dir.as_uri() + "/shard-000000.tar"]
    assert os.listdir(out_dir) == ["shard-000000.tar"]
