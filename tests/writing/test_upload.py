"""upload_shards and the local atomic sink."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.writing.conftest import DirStore
from wds_cloud.errors import ConfigError, UploadError
from wds_cloud.openers.local import AtomicFileWriter
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.writing.upload import upload_shards


def make_files(directory: Path, n: int, size: int = 5000) -> list[Path]:
    paths = []
    for i in range(n):
        path = directory / f"shard-{i:03d}.tar"
        path.write_bytes(bytes([i]) * (size + i))
        paths.append(path)
    return paths


def test_upload_shards_returns_urls_in_order(
    tmp_path: Path, registry: OpenerRegistry, store: DirStore
) -> None:
    paths = make_files(tmp_path, 6)
    urls = upload_shards(paths, "tstore://bucket/up/", progress=False, registry=registry)
    assert urls == [f"tstore://bucket/up/shard-{i:03d}.tar" for i in range(6)]
    assert sorted(store.commits) == urls
    for path, url in zip(paths, urls, strict=True):
        assert store.path(url).read_bytes() == path.read_bytes()


def test_uploads_run_concurrently(
    tmp_path: Path, registry: OpenerRegistry, store: DirStore
) -> None:
    # every writer waits at a 3-party barrier before its first byte: with fewer than three
    # uploads in flight the barrier breaks (after its safety timeout) and the upload fails.
    store.barrier = threading.Barrier(3, timeout=60)
    paths = make_files(tmp_path, 3)
    upload_shards(paths, "tstore://bucket", concurrency=3, progress=False, registry=registry)
    assert len(store.commits) == 3


def test_upload_failure_names_file_and_url(
    tmp_path: Path, registry: OpenerRegistry, failing_store: DirStore
) -> None:
    paths = make_files(tmp_path, 2, size=10000)
    with pytest.raises(UploadError) as info:
        upload_shards(paths, "tfail://bucket", concurrency=1, progress=False, registry=registry)
    assert str(paths[0]) in str(info.value) and "injected failure" in str(info.value)
    assert info.value.url == "tfail://bucket/shard-000.tar"
    assert failing_store.aborts == ["tfail://bucket/shard-000.tar"], "second one never started"
    assert failing_store.commits == [] and failing_store.stored() == []


def test_upload_to_local_directory_with_progress(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    dest.mkdir()
    paths = make_files(src, 3)
    urls = upload_shards(paths, str(dest), concurrency=2, progress=True)
    assert urls == [str(dest / p.name) for p in paths]
    assert sorted(os.listdir(dest)) == [p.name for p in paths]


def test_missing_source_file(tmp_path: Path, registry: OpenerRegistry) -> None:
    with pytest.raises(UploadError, match=r"missing\.tar"):
        upload_shards([tmp_path / "missing.tar"], "tstore://b", progress=False, registry=registry)


def test_bad_arguments(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one, two = tmp_path / "a" / "x.tar", tmp_path / "b" / "x.tar"
    with pytest.raises(ConfigError, match="same basename"):
        upload_shards([one, two], "tstore://b", progress=False)
    with pytest.raises(ConfigError, match="concurrency"):
        upload_shards([one], "tstore://b", concurrency=0, progress=False)


def test_atomic_file_writer_commit_and_abort(tmp_path: Path) -> None:
    final = tmp_path / "f.bin"
    writer = AtomicFileWriter(final)
    writer.write(b"abc")
    assert not final.exists() and os.path.exists(writer.temp_path)
    writer.close()
    assert final.read_bytes() == b"abc" and not os.path.exists(writer.temp_path)

    writer = AtomicFileWriter(final)
    writer.write(b"new")
    writer.abort()
    assert final.read_bytes() == b"abc", "abort never touches the final name"
    assert sorted(os.listdir(tmp_path)) == ["f.bin"]
