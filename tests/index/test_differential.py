"""Indexes and random access against the sequential reader, on thousands of generated shards.

For every archive: the index has exactly the reader's samples (count, keys, members), and
``IndexedWebDataset[i]`` is the reader's ``i``-th sample dict, byte for byte. 2000 ``targen``
archives (every producer, header encoding and compression; each member its own sample) and
1000 ``samplegen`` shards (several members per sample; tarfile ustar/GNU/PAX, webdataset's
TarWriter, ours; skipped entries between samples; keys with whitespace in some).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.index.conftest import sequential, write
from tests.support import samplegen, tarbuild, targen
from wds_cloud.errors import SampleError, ShardReadError
from wds_cloud.index.build import build_index, scan_shard
from wds_cloud.index.indexed import IndexedWebDataset


def _check(path: str, label: str, compressed: bool) -> str | None:
    """None when index and random access agree with the reader on ``path``, else why not."""
    want = sequential(path)
    if isinstance(want, BaseException):
        return f"{label}: the reader failed: {want!r}"
    scan = scan_shard(path)
    if scan.nsamples != len(want):
        return f"{label}: {scan.nsamples} indexed samples, the reader yields {len(want)}"
    keys = [(s["__key__"], sorted(k for k in s if not k.startswith("__"))) for s in want]
    indexed = []
    for sample in scan.samples:
        name = sample[0].name
        key = name[: name.find(".", name.rfind("/") + 1)]
        indexed.append((key, sorted(m.ext.lower() for m in sample)))
    if indexed != keys:
        return f"{label}: index groups differ from the reader's"
    if scan.idx is None:
        if not any(c.isspace() for s in want for c in s["__key__"]):
            return f"{label}: not indexable: {scan.problem}"
        return None
    build_index([path], json=False)
    ds = IndexedWebDataset([path])
    if compressed and len(ds):
        try:
            ds[0]
        except ShardReadError:
            return None
        return f"{label}: random access into a compressed shard did not fail"
    got = [ds[i] for i in range(len(ds))]
    if got != want:
        first = next(i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w)
        return f"{label}: sample {first} differs"
    return None


@pytest.mark.parametrize("block", range(4))
def test_targen_archives(tmp_path: Path, block: int) -> None:
    failures = []
    for seed in range(block * 500, (block + 1) * 500):
        arch = targen.generate(seed)
        path = write(tmp_path, f"{seed}.tar", arch.blob)
        failure = _check(path, str(arch), bool(arch.compression))
        if failure:
            failures.append(failure)
    assert not failures, f"{len(failures)} of 500 failed, e.g. {failures[:3]}"


@pytest.mark.parametrize("block", range(2))
def test_sample_shards(tmp_path: Path, block: int) -> None:
    failures, unindexable = [], 0
    for seed in range(block * 500, (block + 1) * 500):
        arch = samplegen.generate(seed)
        path = write(tmp_path, f"{seed}.tar", arch.blob)
        failure = _check(path, str(arch), False)
        if failure:
            failures.append(failure)
        unindexable += "whitespace" in arch.features
    assert not failures, f"{len(failures)} of 500 failed, e.g. {failures[:3]}"
    assert unindexable > 5  # the whitespace case was exercised


def test_whitespace_names_are_refused_with_the_count_kept(tmp_path: Path) -> None:
    from wds_cloud.writing.tarwriter import TarWriter

    path = str(tmp_path / "ws.tar")
    with TarWriter(path, encoder=False) as w:
        w.write({"__key__": "a", "txt": b"1"})
        w.write({"__key__": "b c", "txt": b"2"})
    build = build_index([path], json=str(tmp_path / "index.json"), strict=False)
    assert build.nsamples == 2 and build.json_url
    assert isinstance(build.failed[0][1], SampleError)
    assert "holds whitespace" in str(build.failed[0][1]) and "'b c.txt'" in str(build.failed[0][1])
    assert not (tmp_path / "ws.idx").exists()
    with pytest.raises(SampleError, match="could not be indexed"):
        build_index([path], json=False)
    import wds_cloud as wds

    ds = wds.WebDataset(str(tmp_path / "index.json"))  # still streams, with the exact count
    assert len(ds) == 2 and [s["__key__"] for s in ds] == ["a", "b c"]
    with pytest.raises(FileNotFoundError, match="wds-cloud index"):
        IndexedWebDataset(str(tmp_path / "index.json"))


def test_duplicate_extension_raises_like_the_reader(tmp_path: Path) -> None:
    data = tarbuild.tar_bytes((name, b"x") for name in ("a.txt", "a.TXT", "b.txt"))
    path = write(tmp_path, "dup.tar", data)
    assert isinstance(sequential(path), SampleError)
    build_index([path], json=False)
    ds = IndexedWebDataset([path])
    assert len(ds) == 2
    with pytest.raises(SampleError, match="duplicate file name"):
        ds[0]
    assert ds[1]["txt"] == b"x"


def test_transform_and_negative_indexes(tmp_path: Path) -> None:
    arch = samplegen.generate(11, dali_safe=True)
    path = write(tmp_path, "s.tar", arch.blob)
    build_index([path], json=False)
    want: Any = sequential(path)
    ds = IndexedWebDataset([path], transform=lambda s: s["__key__"])
    assert ds[-1] == want[-1]["__key__"] and ds[0] == want[0]["__key__"]
    with pytest.raises(IndexError):
        ds[len(ds)]
