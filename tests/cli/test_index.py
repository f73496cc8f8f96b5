"""``wds-cloud index``: build, ``--check``, JSON output, failures, through the real command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.index.dali_reference import wds2idx

from .conftest import NSHARDS, PER_SHARD, Runner


def _copy(image_shards: list[Path], tmp_path: Path) -> list[Path]:
    return [Path(shutil.copy(p, tmp_path / p.name)) for p in image_shards]


def test_index_writes_idx_files_and_the_json(
    wds_cli: Runner, image_shards: list[Path], tmp_path: Path
) -> None:
    shards = _copy(image_shards, tmp_path)
    out = wds_cli("index", str(tmp_path) + "/", "-q")
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert f"indexed {NSHARDS} of {NSHARDS} shards: {NSHARDS * PER_SHARD} samples" in text
    assert "MB/s" in text and "samples/s" in text and "wrote" in text
    for shard in shards:
        assert shard.with_suffix(".idx").read_bytes() == wds2idx(str(shard))  # ustar: DALI's
    doc = json.loads((tmp_path / "index.json").read_text())
    assert [e["url"] for e in doc["shardlist"]] == [s.name for s in shards]
    assert all(e["nsamples"] == PER_SHARD for e in doc["shardlist"])

    check = wds_cli("index", "--check", str(tmp_path / "index.json"))
    assert check.returncode == 0
    assert check.stdout.decode().strip() == f"{NSHARDS} of {NSHARDS} indexes OK (12 samples)"


def test_check_reports_missing_and_stale_indexes(
    wds_cli: Runner, image_shards: list[Path], tmp_path: Path
) -> None:
    shards = _copy(image_shards, tmp_path)
    assert wds_cli("index", "--no-json", *map(str, shards)).returncode == 0
    assert not (tmp_path / "index.json").exists()
    shards[0].with_suffix(".idx").unlink()
    stale = shards[1].with_suffix(".idx")
    stale.write_bytes(stale.read_bytes().replace(b" 512 ", b" 1024 ", 1))
    out = wds_cli("index", "--check", "--json", *map(str, shards))
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert [c["status"] for c in report["checks"]] == ["missing", "differs"]
    assert "line 2" in report["checks"][1]["detail"]
    text = wds_cli("index", "--check", *map(str, shards)).stdout.decode()
    assert "MISSING" in text and "DIFFERS" in text and "0 of 2 indexes OK" in text


def test_unindexable_and_unreadable_shards_fail_with_one_line_each(
    wds_cli: Runner, tmp_path: Path
) -> None:
    import wds_cloud as wds

    with wds.TarWriter(str(tmp_path / "a.tar")) as w:
        w.write({"__key__": "has space", "txt": "1"})
    (tmp_path / "b.tar").write_bytes(b"not a tar file" * 100)
    out = wds_cli("index", str(tmp_path / "a.tar"), str(tmp_path / "b.tar"), "--json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["samples"] == 1 and report["json"] is None  # b.tar unreadable: no JSON
    errors = {Path(f["url"]).name: f["error"] for f in report["failed"]}
    assert "holds whitespace" in errors["a.tar"] and "not a tar archive" in errors["b.tar"]
    text = wds_cli("index", str(tmp_path / "a.tar"), str(tmp_path / "b.tar")).stdout.decode()
    assert text.count("FAILED") == 2 and "indexed 0 of 2 shards" in text
