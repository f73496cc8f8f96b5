"""ls, cat, stats, verify, preview and the error contract, through the real command."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path

from PIL import Image

from tests.support import tarbuild

from .conftest import NSHARDS, PER_SHARD, Runner


def test_help_lists_every_subcommand(wds_cli: Runner) -> None:
    out = wds_cli("--help")
    assert out.returncode == 0
    for name in (
        "demo",
        "create",
        "ls",
        "cat",
        "stats",
        "verify",
        "preview",
        "upload",
        "uploads",
        "dsort-spec",
        "dsort",
        "bench",
        "index",
    ):
        assert name in out.stdout.decode()
        sub = wds_cli(name, "--help")
        assert sub.returncode == 0 and b"usage:" in sub.stdout


def test_console_script_is_installed(image_shards: list[Path]) -> None:
    exe = shutil.which("wds-cloud")
    assert exe is not None
    out = subprocess.run([exe, "ls", str(image_shards[0])], capture_output=True, check=False)
    assert out.returncode == 0 and out.stdout.decode().strip() == str(image_shards[0])


def test_ls_glob_and_samples_json(wds_cli: Runner, image_shards: list[Path]) -> None:
    root = image_shards[0].parent
    out = wds_cli("ls", str(root / "*.tar"))
    assert out.returncode == 0
    assert out.stdout.decode().split() == [str(p) for p in image_shards]
    out = wds_cli("ls", str(root) + "/", "--samples", "--json")
    data = json.loads(out.stdout)
    assert [s["url"] for s in data["shards"]] == [str(p) for p in image_shards]
    first = data["shards"][0]["samples"][0]
    assert first["key"] == "s0000" and set(first["files"]) == {"png", "cls", "json"}
    assert first["files"]["cls"] == 1
    assert sum(len(s["samples"]) for s in data["shards"]) == NSHARDS * PER_SHARD


def test_cat_writes_exact_bytes(wds_cli: Runner, image_shards: list[Path]) -> None:
    with tarfile.open(image_shards[1]) as tf:
        member = tf.extractfile("s0007.png")
        assert member is not None
        expected = member.read()
    out = wds_cli("cat", str(image_shards[1]), "s0007.png")
    assert out.returncode == 0 and out.stdout == expected
    out = wds_cli("cat", str(image_shards[1]), "s0007.PNG")
    assert out.stdout == expected


def test_cat_missing_member_is_one_line_error(wds_cli: Runner, image_shards: list[Path]) -> None:
    out = wds_cli("cat", str(image_shards[0]), "nope.png")
    assert out.returncode == 1 and out.stdout == b""
    err = out.stderr.decode().strip()
    assert err.startswith("wds-cloud cat: error:") and "nope.png" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_missing_shard_is_one_line_error(wds_cli: Runner, tmp_path: Path) -> None:
    out = wds_cli("stats", str(tmp_path / "absent-*.tar"))
    assert out.returncode == 1
    err = out.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and "absent-" in err and "Traceback" not in err


def test_stats_json(wds_cli: Runner, image_shards: list[Path]) -> None:
    out = wds_cli("stats", *map(str, image_shards), "--json")
    assert out.returncode == 0
    data = json.loads(out.stdout)
    total = NSHARDS * PER_SHARD
    assert data["shards"] == NSHARDS and data["samples"] == total
    assert data["extensions"] == {"cls": total, "json": total, "png": total}
    dist = data["sample_size"]
    assert 0 < dist["min"] <= dist["median"] <= dist["p95"] <= dist["max"]
    text = wds_cli("stats", *map(str, image_shards)).stdout.decode()
    assert f"samples  {total}" in text


def test_verify_finds_the_corrupt_shard_with_offset(
    wds_cli: Runner, image_shards: list[Path], tmp_path: Path
) -> None:
    good = tmp_path / "good.tar"
    shutil.copy(image_shards[0], good)
    bad = tmp_path / "bad.tar"
    data = bytearray(image_shards[1].read_bytes())
    # break the checksum of the 4th header (s0006.png is 1st; headers at 512-byte blocks)
    with tarfile.open(image_shards[1]) as tf:
        offsets = [m.offset for m in tf.getmembers()]
    target = offsets[3]
    data[target + 148 : target + 156] = b"0000000\0"
    bad.write_bytes(bytes(data))
    out = wds_cli("verify", str(good), str(bad), "--json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["shards"] == 2 and report["corrupt"] == 1
    broken = next(r for r in report["reports"] if not r["ok"])
    assert broken["url"] == str(bad) and broken["offset"] == target
    assert next(r for r in report["reports"] if r["ok"])["samples"] == PER_SHARD
    text = wds_cli("verify", str(good), str(bad))
    assert text.returncode == 1
    assert f"CORRUPT {bad}  offset={target}" in text.stdout.decode()
    assert wds_cli("verify", str(good)).returncode == 0


def test_verify_reports_duplicate_extension(wds_cli: Runner, tmp_path: Path) -> None:
    path = tmp_path / "dup.tar"
    tarbuild.write(str(path), tarbuild.tar_bytes([("a.txt", b"1"), ("a.txt", b"2")]))
    out = wds_cli("verify", str(path), "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["reports"][0]["type"] == "SampleError"


def test_verify_reports_a_lone_zero_block(wds_cli: Runner, tmp_path: Path) -> None:
    path = tmp_path / "lone.tar"
    tarbuild.write(str(path), tarbuild.tar_bytes([(f"{i}.txt", b"x" * 10) for i in range(3)]))
    raw = path.read_bytes()
    path.write_bytes(raw[:1024] + bytes(512) + raw[1024:])
    report = json.loads(wds_cli("verify", str(path), "--json").stdout)["reports"][0]
    assert report["ok"] and report["samples"] == 3
    assert report["warnings"] == [
        {"offset": 1024, "warning": "lone zero block inside the archive; reading on"}
    ]
    text = wds_cli("verify", str(path)).stdout.decode()
    assert f"WARNING {path}  offset=1024  lone zero block" in text
    assert "1 of 1 shards OK (3 samples)" in text


def test_preview_png(wds_cli: Runner, image_shards: list[Path], tmp_path: Path) -> None:
    png = tmp_path / "sheet.png"
    out = wds_cli(
        "preview",
        *map(str, image_shards),
        "-o",
        str(png),
        "-n",
        "5",
        "--columns",
        "3",
        "--thumb",
        "64",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["images"] == 5 and info["keys"][0] == "s0000"
    with Image.open(png) as image:
        assert image.format == "PNG"
        assert image.size == (3 * 64, 2 * (64 + 28)) == (info["width"], info["height"])
        colors = image.convert("RGB").getcolors(maxcolors=1 << 16)
        assert colors is not None and len(colors) > 3  # thumbnails and text, not blank
        # the first thumbnail's colour is in the sheet
        assert any(c == (0, 100, 200) for _, c in colors)


def test_preview_without_images_fails(wds_cli: Runner, tmp_path: Path) -> None:
    path = tmp_path / "text.tar"
    tarbuild.write(str(path), tarbuild.tar_bytes([("a.txt", b"x")]))
    out = wds_cli("preview", str(path), "-o", str(tmp_path / "p.png"))
    assert out.returncode == 1 and b"no image sample" in out.stderr


def test_usage_error_exit_code(wds_cli: Runner) -> None:
    assert wds_cli("bench").returncode == 2
    assert wds_cli("nosuchcommand").returncode == 2
