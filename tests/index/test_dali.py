"""``.idx`` files against DALI's ``wds2idx.py`` method and against ``tarfile``.

- On ustar and GNU shards that ``wds2idx.py`` handles (see ``dali_reference``), ours are the
  same bytes: 700 WebDataset-style shards (several members per sample, keys long enough for
  ustar prefixes and GNU long names, directories, symlinks and hard links between samples) and
  the 80 qualifying archives among 3000 of ``targen``'s.
- On PAX-headed shards it is wrong in a way we measured and document: each member's offset
  gains the size of the *next* member's extended header (webdataset's TarWriter: 2560 instead of
  1536 for the first member); ours are ``tarfile``'s ``offset_data``.
- On 2000 ``targen`` archives of every kind (ustar, GNU, PAX, webdataset's writer, patched
  header encodings, gzip/bzip2/xz) every offset and size equals ``tarfile``'s.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
import webdataset

from tests.index.conftest import write
from tests.index.dali_reference import wds2idx
from tests.support import samplegen, targen
from wds_cloud.core.tar import iter_tar_entries
from wds_cloud.index.build import scan_shard

_DALI_FEATURES = {"aregtype-conttype", "skip-vendor", "special-size", "unknown-type"}


def _printable(name: str) -> bool:
    return all(33 <= ord(c) < 127 and c != "\\" for c in name)


def _dali_safe_targen(arch: targen.Archive) -> bool:
    """An archive wds2idx.py reads right: ustar/GNU, uncompressed, printable ASCII names, no
    contiguous files (GNU tar lists them as 'C'), no vendor types and no special files with a
    size field (GNU tar then skips data that is not there), and at least one member."""
    return (
        arch.producer in ("ustar", "gnu")
        and not arch.compression
        and bool(arch.members)
        and not (arch.features & _DALI_FEATURES)
        and all(_printable(name) for name, _ in arch.members)
    )


@pytest.mark.slow
def test_identical_to_wds2idx_on_ustar_and_gnu_sample_shards(tmp_path: Path) -> None:
    failures = []
    for arch in samplegen.archives(range(700), dali_safe=True):
        path = write(tmp_path, f"{arch.seed}.tar", arch.blob)
        ours = scan_shard(path).idx
        if ours != wds2idx(path):
            failures.append(str(arch))
    assert not failures, f"{len(failures)} differ, e.g. {failures[:3]}"


@pytest.mark.slow
def test_identical_to_wds2idx_on_qualifying_targen_archives(tmp_path: Path) -> None:
    checked, failures = 0, []
    for seed in range(3000):
        arch = targen.generate(seed)
        if not _dali_safe_targen(arch):
            continue
        path = write(tmp_path, f"{seed}.tar", arch.blob)
        checked += 1
        if scan_shard(path).idx != wds2idx(path):
            failures.append(str(arch))
    assert checked >= 70, f"only {checked} archives qualified: the filter lost its inputs"
    assert not failures, f"{len(failures)} of {checked} differ, e.g. {failures[:3]}"


def _offsets(blob: bytes) -> list[tuple[str, int, int, int]]:
    """(name, offset_data, size, extended-header bytes before the member) from tarfile."""
    with tarfile.open(fileobj=io.BytesIO(blob), encoding="utf-8", errors="surrogateescape") as tf:
        return [
            (m.name, m.offset_data, m.size, m.offset_data - m.offset - 512) for m in tf if m.isreg()
        ]


def _reference_offsets(path: str) -> list[int]:
    return [int(f) for line in wds2idx(path).split(b"\n")[1:] for f in line.split()[1::4]]


def test_pax_shards_wds2idx_adds_the_next_members_extended_header(tmp_path: Path) -> None:
    """The documented difference, exactly: wds2idx's offset of member k is the true one plus
    the extended-header bytes before member k+1 (the last member's is right)."""
    shards = 0
    for seed in range(150):
        odd: set[str] = set()
        samples = samplegen._samples(__import__("random").Random(seed), 1 + seed % 12, odd, set())
        out = io.BytesIO()
        with webdataset.TarWriter(out, encoder=False, mtime=1.5) as writer:
            for sample in samples:
                writer.write(sample)
        path = write(tmp_path, f"wds-{seed}.tar", out.getvalue())
        truth = _offsets(out.getvalue())
        ours = [offset for line in scan_shard(path).samples for _, offset, _, _ in line]
        assert ours == [offset for _, offset, _, _ in truth]
        reference = _reference_offsets(path)
        expected = [
            offset + (truth[k + 1][3] if k + 1 < len(truth) else 0)
            for k, (_, offset, _, _) in enumerate(truth)
        ]
        assert reference == expected, seed
        assert truth[0][1] == 1536 and reference[0] == (2560 if len(truth) > 1 else 1536)
        shards += 1
    assert shards == 150


@pytest.mark.slow
def test_offsets_and_sizes_are_tarfiles_on_every_kind_of_archive() -> None:
    failures = []
    for seed in range(2000):
        arch = targen.generate(seed)
        want = [(name, offset, size) for name, offset, size, _ in _offsets(arch.blob)]
        got = list(iter_tar_entries(io.BytesIO(arch.blob), bufsize=arch.bufsize))
        if got != want:
            failures.append(str(arch))
    assert not failures, f"{len(failures)} differ from tarfile, e.g. {failures[:3]}"


@pytest.mark.parametrize("seed", range(0, 2000, 97))
def test_offsets_through_a_memory_map_equal_the_stream_ones(tmp_path: Path, seed: int) -> None:
    arch = targen.generate(seed)
    path = write(tmp_path, "a.tar", arch.blob)
    with open(path, "rb") as f:
        mapped = list(iter_tar_entries(f))
    assert mapped == list(iter_tar_entries(io.BytesIO(arch.blob), bufsize=arch.bufsize))
