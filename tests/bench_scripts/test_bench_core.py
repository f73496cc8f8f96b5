"""Smoke tests for ``benchmarks/bench_core.py`` and its data generator ``benchmarks/_data.py``."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_core.py"


def _load_data_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_data_module", ROOT / "benchmarks" / "_data.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    return module


_data = _load_data_module()


def _members(path: str) -> list[tuple[str, bytes]]:
    with tarfile.open(path) as tar:
        out = []
        for info in tar:
            f = tar.extractfile(info)
            assert f is not None
            out.append((info.name, f.read()))
        return out


def test_data_is_deterministic_and_cached(tmp_path: Path) -> None:
    spec = _data.DataSpec("tiny", 2, 25)
    first = _data.ensure(spec, str(tmp_path / "a"))
    again = _data.ensure(spec, str(tmp_path / "b"))
    assert first.samples == 50
    for p, q in zip(first.paths, again.paths, strict=True):
        assert Path(p).read_bytes() == Path(q).read_bytes()
    stamp = os.stat(first.paths[0]).st_mtime_ns
    cached = _data.ensure(spec, str(tmp_path / "a"))
    assert cached.paths == first.paths
    assert os.stat(first.paths[0]).st_mtime_ns == stamp  # reused, not regenerated
    assert _data.DataSpec("tiny", 2, 26).key() != spec.key()
    members = _members(first.paths[1])
    expected = [
        (f"{key}.{ext}", sample[ext])
        for key, sample in _data.iter_samples(spec, 1)
        for ext in sorted(sample)
    ]
    assert members == expected
    assert all(90 <= len(data) <= 110 for name, data in members if name.endswith(".txt"))


def test_small_samples_are_decodable_jpegs(tmp_path: Path) -> None:
    from PIL import Image

    ds = _data.ensure(_data.DataSpec("small", 1, 3), str(tmp_path))
    members = dict(_members(ds.paths[0]))
    assert sorted(members) == [
        f"small_{i:08d}.{e}" for i in range(3) for e in ("cls", "jpg", "json")
    ]
    image = Image.open(io.BytesIO(members["small_00000001.jpg"]))
    assert (image.format, image.size, image.mode) == ("JPEG", (64, 64), "RGB")
    assert json.loads(members["small_00000002.json"])["index"] == 2


def test_pax_shards_have_a_pax_header_per_member(tmp_path: Path) -> None:
    ds = _data.ensure(_data.DataSpec("pax", 1, 4), str(tmp_path))
    raw = Path(ds.paths[0]).read_bytes()
    with tarfile.open(ds.paths[0]) as tar:
        names = tar.getnames()
    assert len(names) == 8
    # each member is preceded by a typeflag 'x' header block
    types = [raw[off + 156 : off + 157] for off in _header_offsets(raw)]
    assert types == [b"x", b"0"] * 8


def _header_offsets(raw: bytes) -> list[int]:
    offsets, off = [], 0
    while off + 512 <= len(raw) and raw[off : off + 512] != bytes(512):
        offsets.append(off)
        size = int(raw[off + 124 : off + 136].strip(b"\0 ") or b"0", 8)
        off += 512 + (size + 511) // 512 * 512
    return offsets


@pytest.mark.slow
def test_script_runs_in_tiny_mode(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--rounds", "1", "--min-seconds", "0"]
    cmd += ["--regimes", "tiny,small", "--modes", "nodecode,decode"]
    cmd += ["--data-dir", str(tmp_path / "data"), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    cells = {(c["regime"], c["mode"]): c for c in result["cells"]}
    assert sorted(cells) == [("small", "decode"), ("small", "nodecode"), ("tiny", "nodecode")]
    for cell in cells.values():
        assert cell["status"] in ("PASS", "MISS")
        for lib in ("wds_cloud", "webdataset"):
            run = cell[lib]["runs"][0]
            assert run["samples"] > 0 and run["peak_rss_mb"] > 0
    assert cells[("tiny", "nodecode")]["wds_cloud"]["runs"][0]["samples_per_pass"] == [5000]
    imports = {i["stmt"]: i for i in result["imports"]}
    assert imports["import webdataset"]["torch_imported"] is True
    assert imports["import wds_cloud"]["torch_imported"] is False
    assert "| tiny | nodecode |" in proc.stdout
