"""Fixtures for the writing tests: a directory-backed object store opener that can write
(temp file + rename on close, delete on abort), one whose writers fail mid-write, and a raw
tar header parser."""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from wds_cloud.core.samples import tar_samples
from wds_cloud.errors import ShardNotFoundError
from wds_cloud.openers.registry import OpenerRegistry


class _DirWriter:
    """A writable object: bytes go to a temp file, renamed into place on close."""

    def __init__(self, store: DirStore, url: str, path: Path) -> None:
        self.store = store
        self.url = url
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.temp = path.parent / f".{path.name}.part-{secrets.token_hex(4)}"
        self.file: IO[bytes] = open(self.temp, "wb")
        self.written = 0

    def write(self, data: Any) -> int:
        if self.store.barrier is not None and self.written == 0:
            self.store.barrier.wait()
        n = self.file.write(data)
        self.written += n
        if self.store.fail_after is not None and self.written > self.store.fail_after:
            raise OSError(f"injected failure after {self.written} bytes to {self.url}")
        return n

    def close(self) -> None:
        self.file.close()
        os.replace(self.temp, self.path)
        with self.store.lock:
            self.store.commits.append(self.url)

    def abort(self) -> None:
        self.file.close()
        self.temp.unlink(missing_ok=True)
        with self.store.lock:
            self.store.aborts.append(self.url)


@dataclass
class DirStore:
    """Opener for ``<scheme>://bucket/key`` backed by a directory (test-only)."""

    root: Path
    fail_after: int | None = None
    barrier: threading.Barrier | None = None

    def __post_init__(self) -> None:
        self.commits: list[str] = []
        self.aborts: list[str] = []
        self.lock = threading.Lock()

    def path(self, url: str) -> Path:
        return self.root / url.split("://", 1)[1]

    def open(self, url: str, **options: Any) -> IO[bytes]:
        path = self.path(url)
        if not path.exists():
            raise ShardNotFoundError("no such object", url=url)
        return open(path, "rb")

    def create(self, url: str) -> _DirWriter:
        return _DirWriter(self, url, self.path(url))

    def stored(self) -> list[str]:
        """Every file under root (relative), temp files included."""
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file())


class ReadOnlyOpener:
    """An opener without create()."""

    def open(self, url: str, **options: Any) -> IO[bytes]:
        raise ShardNotFoundError("nothing here", url=url)


@pytest.fixture
def store(tmp_path: Path) -> DirStore:
    root = tmp_path / "store"
    root.mkdir()
    return DirStore(root)


@pytest.fixture
def failing_store(tmp_path: Path) -> DirStore:
    root = tmp_path / "failing"
    root.mkdir()
    return DirStore(root, fail_after=3000)


@pytest.fixture
def registry(store: DirStore, failing_store: DirStore) -> OpenerRegistry:
    reg = OpenerRegistry(builtins=False)
    reg.register("tstore", store)
    reg.register("tfail", failing_store)
    reg.register("tro", ReadOnlyOpener())
    return reg


@dataclass
class RawHeader:
    name: bytes
    prefix: bytes
    typeflag: bytes
    size: int
    mtime: int
    magic: bytes
    uname: bytes
    checksum_ok: bool


def parse_headers(data: bytes) -> list[RawHeader]:
    """Walk a plain tar and return every header block (PAX ones included)."""
    headers = []
    pos = 0
    while pos + 512 <= len(data):
        block = data[pos : pos + 512]
        if block == bytes(512):
            break
        stored = int(block[148:154], 8)
        computed = sum(block[:148]) + 8 * 32 + sum(block[156:])
        size = int(block[124:135], 8)
        headers.append(
            RawHeader(
                name=block[:100].rstrip(b"\0"),
                prefix=block[345:500].rstrip(b"\0"),
                typeflag=block[156:157],
                size=size,
                mtime=int(block[136:147], 8),
                magic=block[257:265],
                uname=block[265:297].rstrip(b"\0"),
                checksum_ok=stored == computed,
            )
        )
        pos += 512 + (size + 511) // 512 * 512
    return headers


def read_samples(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Samples of a local shard, read by wds_cloud's own reader."""
    with open(path, "rb") as stream:
        yield from tar_samples(stream, os.fspath(path))
