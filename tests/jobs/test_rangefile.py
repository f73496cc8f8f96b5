"""``RangeFile`` (a seekable file over ranged reads) against ``io.BytesIO`` on thousands of
random (seek, read) sequences, over local files and a real HTTP server; its cache stays within
its bound; pyarrow reads Parquet through it."""

from __future__ import annotations

import io
import os
import random
from pathlib import Path
from typing import Any

import pytest

from tests.support.http_server import HttpFileServer
from wds_cloud.errors import ShardNotFoundError
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.streams.rangefile import RangeFile, object_size

_SIZES = (0, 1, 6, 7, 8, 63, 64, 65, 500, 1000, 4099)


def _ops(rng: random.Random, size: int, n: int) -> list[tuple[Any, ...]]:
    ops: list[tuple[Any, ...]] = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.35:
            whence = rng.choice((0, 0, 1, 2))
            span = size + 20
            ops.append(("seek", rng.randint(-span if whence else -3, span), whence))
        elif kind < 0.85:
            ops.append(("read", rng.choice([-1, None, 0, 1, 2, 7, 63, 64, 65, 200, 5000])))
        elif kind < 0.95:
            ops.append(("readinto", rng.choice([0, 1, 13, 64, 300, 9000])))
        else:
            ops.append(("tell",))
    return ops


def _apply(f: Any, op: tuple[Any, ...]) -> Any:
    try:
        if op[0] == "seek":
            return f.seek(op[1], op[2])
        if op[0] == "read":
            return f.read(op[1])
        if op[0] == "readinto":
            buf = bytearray(op[1])
            n = f.readinto(buf)
            return n, bytes(buf[:n])
        return f.tell()
    except ValueError as exc:
        return type(exc)


def _differential(url: str, data: bytes, registry: OpenerRegistry, seed: int, runs: int) -> int:
    rng = random.Random(seed)
    checked = 0
    for _ in range(runs):
        block, cache = rng.choice((1, 7, 64, 1000)), rng.choice((1, 2, 3))
        ref = io.BytesIO(data)
        f = RangeFile(url, registry=registry, block_size=block, cache_blocks=cache)
        assert f.size == len(data) and f.seekable() and f.readable()
        for op in _ops(rng, len(data), rng.randint(1, 25)):
            assert _apply(f, op) == _apply(ref, op), (url, block, cache, op)
            assert len(f._blocks) <= max(cache, 2)  # a read spans two blocks at most
            checked += 1
        f.close()
        assert f.closed
        with pytest.raises(ValueError):
            f.read(1)
    return checked


def _files(root: Path) -> dict[str, bytes]:
    rng = random.Random(7)
    out = {}
    for size in _SIZES:
        data = rng.randbytes(size)
        (root / f"f{size}.bin").write_bytes(data)
        out[f"f{size}.bin"] = data
    return out


def test_matches_bytesio_on_local_files(tmp_path):
    files = _files(tmp_path)
    registry = OpenerRegistry()
    checked = 0
    for i, (name, data) in enumerate(sorted(files.items())):
        checked += _differential(str(tmp_path / name), data, registry, seed=i, runs=300)
    assert checked > 30000


def test_matches_bytesio_over_http(tmp_path):
    files = _files(tmp_path)
    registry = OpenerRegistry()
    with HttpFileServer(tmp_path) as server:
        checked = sum(
            _differential(server.url(name), data, registry, seed=100 + i, runs=25)
            for i, (name, data) in enumerate(sorted(files.items()))
        )
    assert checked > 2000


def test_small_reads_come_from_the_cache_and_large_ones_bypass_it(tmp_path):
    data = random.Random(1).randbytes(10_000)
    (tmp_path / "x.bin").write_bytes(data)
    with HttpFileServer(tmp_path) as server:
        f = RangeFile(server.url("x.bin"), block_size=1000, cache_blocks=2, size=len(data))
        assert f.requests == 0
        f.seek(1500)
        assert f.read(10) == data[1500:1510] and f.requests == 1
        f.seek(1000)
        assert f.read(999) == data[1000:1999] and f.requests == 1  # same block
        assert f.read(5000) == data[1999:6999] and f.requests == 2  # one direct read
        assert len(f._blocks) == 1
        f.seek(-10, io.SEEK_END)
        assert f.read() == data[-10:] and f.requests == 3
        assert f.read() == b"" and f.requests == 3


def test_size_comes_from_the_backend_and_a_missing_object_is_named(tmp_path):
    (tmp_path / "x.bin").write_bytes(b"abc" * 1000)
    with HttpFileServer(tmp_path) as server:
        assert object_size(server.url("x.bin")) == 3000
        missing = server.url("nope.bin")
        with pytest.raises(ShardNotFoundError, match=r"nope\.bin"):
            RangeFile(missing)
    assert object_size(str(tmp_path / "x.bin")) == 3000
    with pytest.raises(ShardNotFoundError, match=r"nope\.bin"):
        object_size(os.path.join(tmp_path, "nope.bin"))


def test_pyarrow_reads_parquet_through_it(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = 3000
    table = pa.table(
        {
            "i": list(range(rows)),
            "b": [os.urandom(i % 50) if i % 9 else None for i in range(rows)],
            "s": [f"row {i}" * (i % 5) for i in range(rows)],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=400)
    with HttpFileServer(tmp_path) as server:
        f = RangeFile(server.url("t.parquet"), block_size=4096, cache_blocks=3)
        got = pq.ParquetFile(f)
        assert got.metadata.num_row_groups == 8
        assert got.read_row_group(5).equals(table.slice(2000, 400))
        assert got.read().equals(table)
