"""Smoke test for ``benchmarks/ais_archpath.py``: a tiny run on a real 1-target cluster.

The script itself checks that the ``archpath`` answers equal the range bytes, before and
after the shard index is built; here it must finish and print every row of both phases.
"""

from __future__ import annotations

import io
import random
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from benchmarks.ais_archpath import EXTS, make_shard

ROOT = Path(__file__).resolve().parents[2]
WAYS = ("ranges/sample", "ranges/member", "archpath/member", "archpath/jpg")


def test_the_sample_and_member_spans_match_tarfile() -> None:
    data, samples = make_shard("s.tar", 30, 2000, random.Random(1))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        expected = {}
        for info in tar:
            f = tar.extractfile(info)
            assert f is not None
            expected[info.name] = f.read()
    assert [len(s.members) for s in samples] == [len(EXTS)] * 30
    for s in samples:
        for m in s.members:
            assert data[m.data_offset : m.data_offset + m.size] == expected[m.name]
        with tarfile.open(
            fileobj=io.BytesIO(data[s.offset : s.offset + s.length] + bytes(1024))
        ) as t:
            assert [m.name for m in t] == [m.name for m in s.members]


@pytest.mark.slow
@pytest.mark.ais
def test_a_tiny_run_prints_every_row() -> None:
    cmd = [sys.executable, "-m", "benchmarks.ais_archpath", "--targets", "1", "--shards", "1"]
    cmd += ["--samples", "40", "--batch", "8", "--rounds", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for phase in ("no shard index", "shard index"):
        for way in WAYS:
            assert f"targets=1 {phase:15s} {way:16s} median" in proc.stdout, proc.stdout
    assert "index-shard took" in proc.stdout
