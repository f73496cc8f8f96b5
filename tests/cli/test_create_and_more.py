"""create, upload, dsort-spec, bench and demo through the real command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import webdataset

import wds_cloud as wds

from .conftest import NSHARDS, PER_SHARD, Runner


def _read_both(pattern: str) -> tuple[list[dict], list[dict]]:
    ours = list(wds.WebDataset(pattern, shardshuffle=False))
    theirs = list(webdataset.WebDataset(pattern, shardshuffle=False))
    return ours, theirs


def test_create_from_directory(wds_cli: Runner, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    for i in range(5):
        (src / f"{i:03d}.txt").write_text(f"text {i}")
        (src / f"{i:03d}.seg.png").write_bytes(b"P" * i)
    (src / "sub" / "x.cls").write_text("7")
    out_dir = tmp_path / "out"
    out = wds_cli("create", str(src), "-o", str(out_dir), "--maxcount", "4", "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["samples"] == 6 and len(info["shards"]) == 2
    ours, theirs = _read_both(str(out_dir / "shard-{000000..000001}.tar"))
    for samples in (ours, theirs):
        assert [s["__key__"] for s in samples] == ["000", "001", "002", "003", "004", "sub/x"]
        assert samples[2]["txt"] == b"text 2" and samples[2]["seg.png"] == b"PP"
        assert samples[5]["cls"] == b"7"


def test_create_from_recipe_with_text_pipe_and_files(wds_cli: Runner, tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"\x00\x01binary")
    recipe = tmp_path / "recipe.txt"
    recipe.write_text(
        "# key.ext source\n"
        "k1.bin a.bin\n"
        "k1.txt text:hello world\n"
        "\n"
        "k2.txt pipe:printf 'from a pipe'\n"
        "k2.cls text:3\n"
    )
    out = wds_cli(
        "create", "--recipe", str(recipe), "-o", str(tmp_path / "r"), "--pattern", "r-%02d.tar"
    )
    assert out.returncode == 0, out.stderr
    assert "wrote 2 samples into 1 shards" in out.stdout.decode()
    ours, theirs = _read_both(str(tmp_path / "r" / "r-00.tar"))
    for samples in (ours, theirs):
        assert samples[0]["bin"] == b"\x00\x01binary" and samples[0]["txt"] == b"hello world"
        assert samples[1]["txt"] == b"from a pipe" and samples[1]["cls"] == b"3"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("k.txt pipe:exit 3", "exited with 3"),
        ("k.txt missing-file", "does not exist"),
        ("nokey text:x", "KEY.EXT"),
        ("k.txt", "archive-name source"),
    ],
)
def test_create_recipe_errors_name_the_line(
    wds_cli: Runner, tmp_path: Path, line: str, message: str
) -> None:
    recipe = tmp_path / "bad.txt"
    recipe.write_text("ok.txt text:fine\n" + line + "\n")
    out = wds_cli("create", "--recipe", str(recipe), "-o", str(tmp_path / "o"))
    assert out.returncode == 1
    err = out.stderr.decode()
    assert f"{recipe}:2" in err and message in err and "Traceback" not in err
    assert not list((tmp_path / "o").glob("*.tar"))  # no partial shard left behind


def test_create_needs_a_source(wds_cli: Runner, tmp_path: Path) -> None:
    out = wds_cli("create", "-o", str(tmp_path))
    assert out.returncode == 1 and b"DIRECTORY or --recipe" in out.stderr


def test_upload_to_a_directory(wds_cli: Runner, image_shards: list[Path], tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    out = wds_cli("upload", *map(str, image_shards), str(dest), "-j", "2", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["uploaded"] == [str(dest / p.name) for p in image_shards]
    for p in image_shards:
        assert (dest / p.name).read_bytes() == p.read_bytes()


def test_dsort_spec_json_yaml_and_invalid(wds_cli: Runner, tmp_path: Path) -> None:
    args = [
        "dsort-spec",
        "--input-bck",
        "data",
        "--input-template",
        "shard-{00..09}.tar",
        "--output-bck",
        "out",
        "--output-format",
        "shuffled-%d.tar",
        "--output-shard-size",
        "10MiB",
        "--algorithm",
        "shuffle",
        "--seed",
        "42",
    ]
    out = wds_cli(*args)
    assert out.returncode == 0, out.stderr
    spec = json.loads(out.stdout)
    assert spec["input_bck"]["name"] == "data" and spec["algorithm"]["kind"] == "shuffle"
    assert spec["algorithm"]["seed"] == "42"
    target = tmp_path / "spec.yaml"
    assert wds_cli(*args, "-o", str(target)).returncode == 0
    import yaml

    assert yaml.safe_load(target.read_text()) == spec
    bad = wds_cli("dsort-spec", "--input-bck", "data", "--algorithm", "nonsense")
    assert bad.returncode == 1 and b"wds-cloud dsort-spec: error:" in bad.stderr


@pytest.mark.slow
def test_bench_json(wds_cli: Runner, image_shards: list[Path]) -> None:
    out = wds_cli(
        "bench",
        str(image_shards[0].parent) + "/",
        "--workers",
        "1",  # at most 2 batches prefetched: the 3 measured windows time loading
        "--batch-size",
        "3",
        "--window",
        "1",
        "--decode",
        "rgb8",
        "--fields",
        "png cls",
        "--step-ms",
        "1",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["samples"] == NSHARDS * PER_SHARD and data["batches"] == 4
    assert len(data["window_times"]) == 4 and data["window_mean"] > 0
    assert data["samples_per_s"] > 0 and data["mb_per_s"] > 0
    assert data["step_window_mean"] > 0 and data["loader_to_step_ratio"] > 0
    assert data["too_short"] is None and data["wall_samples_per_s"] > 0
    text = wds_cli("bench", str(image_shards[0]), "--workers", "0", "--batch-size", "2")
    assert text.returncode == 0 and b"samples/s" in text.stdout


def test_demo_is_wired(wds_cli: Runner, tmp_path: Path) -> None:
    out = wds_cli("demo", "--dir", str(tmp_path / "d"), "--samples", "40", "--per-shard", "20")
    assert out.returncode == 0, out.stderr
    assert b"wrote 40 samples in 2 shards" in out.stdout and b"read 40 samples" in out.stdout
    assert b"--per-shard" in wds_cli("demo", "--help").stdout
