"""Large members and zero-copy reading, against ``tarfile``.

Differential tests
------------------
Members of 0 B to 8 MiB (sizes around the read block: one below, at and above it, several
blocks, and 8 MiB across the default 4 MiB block) are read by ``iter_tar`` in both modes
(``bytes``, and ``zero_copy=True`` memoryviews) through every local path: a mapped file, a
``BytesIO``, a real pipe from a subprocess, a stream returning 1 to 7 bytes per read (with and
without ``readinto``), and gzip. Each must equal what ``tarfile`` reads. The seeded archives of
:mod:`tests.support.targen` (every header format, compressed or not, blocks of 1 B to 16 KiB)
are also read with ``zero_copy=True`` three ways.

Lifetime: views are compared only after the whole archive was read and the reader closed (so a
later read overwriting an earlier member would fail); closing a reader of a mapped file while
views are alive raises nothing, and the file's descriptors are released once the views are.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support import targen
from tests.support.tarbuild import gz, tar_bytes
from tests.support.targen import Archive, report
from wds_cloud.core.decode import Decoder
from wds_cloud.core.imagedecode import ImageHandler
from wds_cloud.core.shardopen import tarfile_samples
from wds_cloud.core.tar import DEFAULT_BUFSIZE, iter_tar

SMALL_BLOCK = 4096
SIZES = [
    0, 1, 511, 512, 513, SMALL_BLOCK - 1, SMALL_BLOCK, SMALL_BLOCK + 1, 3 * SMALL_BLOCK + 7,
    100_000, DEFAULT_BUFSIZE - 512, DEFAULT_BUFSIZE, DEFAULT_BUFSIZE + 1, 8 << 20,
]  # fmt: skip


def _payload(size: int, seed: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


@pytest.fixture(scope="module")
def large() -> bytes:
    """A PAX archive with one member of each size in :data:`SIZES`, in order and reversed."""
    sizes = SIZES + SIZES[::-1]
    members = [(f"m{i:03d}.s{size}.bin", _payload(size, i)) for i, size in enumerate(sizes)]
    return tar_bytes(members, fmt=tarfile.PAX_FORMAT)


def reference(blob: bytes) -> list[tuple[str, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(blob)) as tf:
        return [(m.name, tf.extractfile(m).read()) for m in tf if m.isfile()]  # type: ignore[union-attr]


class TinyReads(io.RawIOBase):
    """A non-seekable stream returning 1 to 7 bytes per read; ``readinto`` can be hidden."""

    def __init__(self, data: bytes, readinto: bool = True) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.reads = 0
        self.has_readinto = readinto

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if not self.has_readinto:
            raise AssertionError("readinto hidden")
        n = min(len(b), 1 + self.reads % 7, len(self.data) - self.pos)
        b[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        self.reads += 1
        return n

    def read(self, n: int = -1) -> bytes:
        k = min(n if n >= 0 else len(self.data), 1 + self.reads % 7, len(self.data) - self.pos)
        data = bytes(self.data[self.pos : self.pos + k])
        self.pos += k
        self.reads += 1
        return data

    def __getattribute__(self, name: str) -> Any:
        if name == "readinto" and not object.__getattribute__(self, "has_readinto"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)


def read(blob: bytes, how: str, tmp_path: Path, zero_copy: bool, bufsize: int) -> list[Any]:
    """``iter_tar``'s members read ``how``, collected in full before anything is compared."""
    if how == "mmap":
        path = tmp_path / "shard.tar"
        path.write_bytes(blob)
        with open(path, "rb") as f:
            return list(iter_tar(f, zero_copy=zero_copy, bufsize=bufsize))
    if how == "pipe":
        path = tmp_path / "shard.tar"
        path.write_bytes(blob)
        with subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE) as proc:
            assert proc.stdout is not None
            got = list(iter_tar(proc.stdout, zero_copy=zero_copy, bufsize=bufsize))
        assert proc.returncode == 0
        return got
    if how == "gzip":
        return list(iter_tar(io.BytesIO(gz(blob)), zero_copy=zero_copy, bufsize=bufsize))
    if how.startswith("tiny"):
        stream = TinyReads(blob, readinto=how == "tiny")
        return list(iter_tar(stream, zero_copy=zero_copy, bufsize=bufsize))
    return list(iter_tar(io.BytesIO(blob), zero_copy=zero_copy, bufsize=bufsize))


def check(got: list[Any], want: list[tuple[str, bytes]], zero_copy: bool) -> None:
    assert [name for name, _ in got] == [name for name, _ in want]
    for (name, data), (_, expected) in zip(got, want, strict=True):
        if zero_copy:
            assert isinstance(data, memoryview) and data.readonly, name
            assert data.nbytes == len(expected), name
        else:
            assert type(data) is bytes, name
        assert bytes(data) == expected, name


@pytest.mark.parametrize("zero_copy", [False, True], ids=["bytes", "zero_copy"])
@pytest.mark.parametrize("how", ["mmap", "bytesio", "pipe", "gzip"])
@pytest.mark.parametrize("bufsize", [SMALL_BLOCK, DEFAULT_BUFSIZE], ids=["4KiB", "4MiB"])
def test_large_members_read_like_tarfile(
    large: bytes, how: str, zero_copy: bool, bufsize: int, tmp_path: Path
) -> None:
    check(read(large, how, tmp_path, zero_copy, bufsize), reference(large), zero_copy)


@pytest.mark.parametrize("zero_copy", [False, True], ids=["bytes", "zero_copy"])
@pytest.mark.parametrize("how", ["tiny", "tiny-read-only"])
def test_tiny_reads_across_blocks_read_like_tarfile(how: str, zero_copy: bool) -> None:
    sizes = [0, 1, 511, 513, 700, 1024, 2000, 5000]  # around a 1 KiB block
    members = [(f"t{i}.s{size}.bin", _payload(size, i)) for i, size in enumerate(sizes * 2)]
    blob = tar_bytes(members, fmt=tarfile.GNU_FORMAT)
    check(read(blob, how, Path("."), zero_copy, 1024), reference(blob), zero_copy)


def test_seeded_archives_read_like_tarfile_with_zero_copy(tmp_path: Path) -> None:
    archives = targen.archives(range(0, 300))
    path = tmp_path / "shard.tar"

    def views(arch: Archive, how: str) -> list[tuple[str, bytes]]:
        if how == "mmap":
            path.write_bytes(arch.blob)
            with open(path, "rb") as f:
                got = list(iter_tar(f, bufsize=arch.bufsize, zero_copy=True))
        else:
            stream: Any = io.BytesIO(arch.blob) if how == "BytesIO" else targen.random_chunks(arch)
            got = list(iter_tar(stream, bufsize=arch.bufsize, zero_copy=True))
        assert all(isinstance(data, memoryview) for _, data in got)
        return [(name, bytes(data)) for name, data in got]

    items = [(a, how) for a in archives for how in ("mmap", "BytesIO", "uneven reads")]
    failures = targen.compare(items, views)
    assert not failures, report(failures, len(items))


def _holds(path: Path) -> tuple[int, int]:
    """Descriptors of this process open on ``path``, and its mappings of it (other files'
    descriptors, a server thread's sockets for one, are not this test's)."""
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds += os.readlink(f"/proc/self/fd/{fd}") == str(path)
        except OSError:
            pass
    with open("/proc/self/maps") as f:
        maps = sum(line.rstrip("\n").endswith(" " + str(path)) for line in f)
    return fds, maps


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd and maps")
def test_closing_a_mapped_reader_with_live_views_releases_the_file(
    large: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "shard.tar"
    path.write_bytes(large)
    want = reference(large)
    with open(path, "rb") as f:
        members = iter_tar(f, zero_copy=True)
        first = [next(members), next(members), next(members)]
        members.close()  # unmaps, or leaves it to the views: no BufferError
    assert f.closed
    assert [(n, bytes(v)) for n, v in first] == want[:3]  # still readable after close
    assert _holds(path) == (1, 1)  # the views keep the mapping and its descriptor
    del members
    first.clear()
    assert _holds(path) == (0, 0)  # the mapping (and its descriptor) went with the last view


def test_stream_views_survive_later_reads(large: bytes) -> None:
    """A view of a member read from a stream is never overwritten by later reads."""
    members: Iterator[Any] = iter_tar(io.BytesIO(large), zero_copy=True, bufsize=SMALL_BLOCK)
    held = [next(members) for _ in range(6)]
    rest = list(members)
    want = reference(large)
    assert [(n, bytes(v)) for n, v in held + rest] == want


def test_default_decoders_accept_views(tmp_path: Path) -> None:
    """``tarfile_samples(zero_copy=True)`` then the default decoders: the same samples as bytes."""
    from PIL import Image

    png = io.BytesIO()
    Image.fromarray(np.arange(48, dtype=np.uint8).reshape(4, 4, 3)).save(png, format="PNG")
    npy = io.BytesIO()
    np.save(npy, np.arange(12, dtype=np.int16).reshape(3, 4))
    members = []
    for i in range(3):
        members += [
            (f"s{i}.png", png.getvalue()),
            (f"s{i}.json", json.dumps({"i": i, "t": "é"}).encode()),
            (f"s{i}.txt", f"text {i} é".encode()),
            (f"s{i}.cls", str(i).encode()),
            (f"s{i}.npy", npy.getvalue()),
            (f"s{i}.pyd", pickle.dumps({"i": i})),
            (f"s{i}.bin", _payload(5000 * i, i)),
        ]
    path = tmp_path / "shard.tar"
    path.write_bytes(tar_bytes(members))
    url = str(path)
    plain = list(tarfile_samples([url]))
    views = list(tarfile_samples([url], zero_copy=True))
    assert isinstance(views[0]["png"], memoryview)
    for image in ("rgb8", "pil", "torchrgb"):
        decode = Decoder([ImageHandler(image)])
        for a, b in zip(map(decode, plain), map(decode, views), strict=True):
            assert a.keys() == b.keys()
            for key in a:
                x, y = a[key], b[key]
                if image == "pil" and key == "png":
                    x, y = np.asarray(x), np.asarray(y)
                if hasattr(x, "shape"):
                    np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=key)
                else:
                    assert x == bytes(y) if isinstance(y, memoryview) else x == y, key


def test_webdataset_zero_copy_yields_views(large: bytes, tmp_path: Path) -> None:
    from wds_cloud import WebDataset

    path = tmp_path / "shard.tar"
    path.write_bytes(large)
    samples = list(WebDataset(str(path), shardshuffle=False, zero_copy=True))
    values = [v for s in samples for k, v in s.items() if not k.startswith("__")]
    assert values and all(isinstance(v, memoryview) for v in values)
    assert [bytes(v) for v in values] == [data for _, data in reference(large)]
