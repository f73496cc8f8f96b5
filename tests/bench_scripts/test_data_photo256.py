"""The ``photo256`` regime of ``benchmarks/_data.py``: deterministic, decodable 256x256 4:2:0
JPEGs whose sizes spread as photos' do (docs/benchmarks.md), unlike ``jpeg256``'s."""

from __future__ import annotations

import io
import statistics
from pathlib import Path

from tests.bench_scripts.test_bench_core import _data, _members


def _sizes(regime: str, n: int) -> list[int]:
    return [len(s["jpg"]) for _, s in _data.iter_samples(_data.DataSpec(regime, 1, n), 0)]


def test_photo256_is_deterministic_and_decodes_to_256x256_rgb(tmp_path: Path) -> None:
    from PIL import Image

    spec = _data.DataSpec("photo256", 2, 4)
    first = _data.ensure(spec, str(tmp_path / "a"))
    again = _data.ensure(spec, str(tmp_path / "b"))
    for p, q in zip(first.paths, again.paths, strict=True):
        assert Path(p).read_bytes() == Path(q).read_bytes()
    members = dict(_members(first.paths[1]))
    assert sorted(members) == [
        f"photo256_{i:08d}.{e}" for i in (4, 5, 6, 7) for e in ("cls", "jpg")
    ]
    image = Image.open(io.BytesIO(members["photo256_00000005.jpg"]))
    assert (image.format, image.size, image.mode) == ("JPEG", (256, 256), "RGB")
    assert image.layer[1][1:3] == (1, 1) and image.layer[0][1:3] == (2, 2)  # 4:2:0
    assert members["photo256_00000005.cls"] == b"5"


def test_photo256_sizes_spread_around_27_kb_where_jpeg256_s_do_not() -> None:
    photo, flat = _sizes("photo256", 60), _sizes("jpeg256", 60)
    assert 23_000 <= statistics.mean(photo) <= 31_000, statistics.mean(photo)
    assert max(photo) - min(photo) >= 8_000, (min(photo), max(photo))
    assert max(flat) - min(flat) < 2_000, (min(flat), max(flat))
