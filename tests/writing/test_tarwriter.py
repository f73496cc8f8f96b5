"""TarWriter: header layout, determinism, long and non-ASCII names, gzip, targets, errors."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import webdataset

from tests.writing.conftest import parse_headers, read_samples
from wds_cloud.errors import ConfigError, SampleError, UnsupportedSchemeError, UploadError
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.writing.tarwriter import DEFAULT_MTIME, TarWriter


def mixed_samples(n: int = 5) -> list[dict[str, Any]]:
    rng = np.random.default_rng(1)
    return [
        {
            "__key__": f"sample{i:04d}",
            "txt": f"caption {i}",
            "json": {"i": i, "tags": ["a", "b"]},
            "cls": i % 3,
            "png": rng.integers(0, 256, (6, 5, 3), dtype=np.uint8),
            "jpg": rng.integers(0, 256, (6, 5), dtype=np.uint8),
            "npy": np.arange(i + 1),
            "npz": {"x": np.ones(3)},
            "pyd": {"i": i},
            "msgpack": [i, "x"],
            "cbor": {"i": i},
            "tiff": rng.integers(0, 256, (4, 4, 3), dtype=np.uint8),
            "webp": rng.integers(0, 256, (8, 8, 3), dtype=np.uint8),
            "json.gz": {"g": i},
            "bin": bytes([i]) * 700,
        }
        for i in range(n)
    ]


def write_bytes(samples: list[dict[str, Any]], **kw: Any) -> bytes:
    out = io.BytesIO()
    with TarWriter(out, **kw) as writer:
        for sample in samples:
            writer.write(sample)
    return out.getvalue()


def test_two_runs_are_byte_identical(tmp_path: Path) -> None:
    first, second = tmp_path / "a.tar", tmp_path / "b.tar"
    for path in (first, second):
        with TarWriter(str(path)) as writer:
            for sample in mixed_samples():
                writer.write(sample)
    assert first.read_bytes() == second.read_bytes()
    assert write_bytes(mixed_samples()) == first.read_bytes()


def test_headers_are_plain_ustar_sorted_with_fixed_fields() -> None:
    data = write_bytes(mixed_samples(2))
    headers = parse_headers(data)
    assert all(h.typeflag == b"0" for h in headers), "no PAX header expected"
    assert all(h.magic == b"ustar\x0000" and h.checksum_ok for h in headers)
    assert {h.mtime for h in headers} == {DEFAULT_MTIME}
    assert {h.uname for h in headers} == {b"bigdata"}
    names = [h.name.decode() for h in headers]
    fields = sorted(k for k in mixed_samples(1)[0] if k != "__key__")
    assert names == [f"sample{i:04d}.{f}" for i in range(2) for f in fields]
    assert len(data) % 512 == 0 and data[-1024:] == bytes(1024)


def test_write_returns_tar_bytes_and_file_size_adds_end_blocks() -> None:
    out = io.BytesIO()
    writer = TarWriter(out)
    sizes = [writer.write(s) for s in mixed_samples(3)]
    writer.close()
    assert sum(sizes) + 1024 == len(out.getvalue()) == writer.size + 1024
    assert writer.count == 3
    assert not out.closed, "a caller's stream is not closed"


def test_user_group_mode_mtime_options() -> None:
    data = write_bytes(
        [{"__key__": "a", "txt": "x"}], user="me", group="us", mode=0o640, mtime=1234.9
    )
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        (info,) = tar.getmembers()
    assert (info.uname, info.gname, info.mode, info.mtime) == ("me", "us", 0o640, 1234)


def test_long_name_uses_ustar_prefix_not_pax(tmp_path: Path) -> None:
    key = "d" * 60 + "/" + "e" * 50 + "/" + "f" * 40  # 152 bytes, splittable
    path = tmp_path / "long.tar"
    with TarWriter(str(path)) as writer:
        writer.write({"__key__": key, "txt": "long"})
    headers = parse_headers(path.read_bytes())
    assert [h.typeflag for h in headers] == [b"0"]
    assert headers[0].prefix + b"/" + headers[0].name == f"{key}.txt".encode()
    check_readers(path, {key: {"txt": b"long"}})


@pytest.mark.parametrize(
    "key",
    ["x" * 150, "dir/" + "y" * 120, "données/ünïcode-キー", "a/" + "é" * 80],
    ids=["no-slash", "component-too-long", "non-ascii", "non-ascii-long"],
)
def test_pax_path_only_when_needed(tmp_path: Path, key: str) -> None:
    path = tmp_path / "pax.tar"
    with TarWriter(str(path)) as writer:
        writer.write({"__key__": key, "txt": "v", "cls": 1})
        writer.write({"__key__": "plain", "txt": "w"})
    headers = parse_headers(path.read_bytes())
    assert [h.typeflag for h in headers] == [b"x", b"0", b"x", b"0", b"0"]
    check_readers(path, {key: {"txt": b"v", "cls": b"1"}, "plain": {"txt": b"w"}})


def check_readers(path: Path, expected: dict[str, dict[str, bytes]]) -> None:
    """stdlib tarfile, webdataset and wds_cloud all see the same members/samples."""
    with tarfile.open(path) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar}  # type: ignore[union-attr]
    assert members == {f"{k}.{f}": v for k, fs in expected.items() for f, v in fs.items()}
    for samples in (
        list(webdataset.WebDataset(str(path), shardshuffle=False)),
        list(read_samples(path)),
    ):
        got = {
            s["__key__"]: {k: v for k, v in s.items() if not k.startswith("__")} for s in samples
        }
        assert got == expected


@pytest.mark.parametrize("how", ["suffix", "flag"])
def test_gzip_output_deterministic(tmp_path: Path, how: str) -> None:
    paths = [tmp_path / "a.tgz", tmp_path / "b.tar.gz"] if how == "suffix" else []
    if how == "flag":
        paths = [tmp_path / "a.bin", tmp_path / "b.bin"]
    for path in paths:
        with TarWriter(str(path), compress=None if how == "suffix" else True) as writer:
            for sample in mixed_samples(3):
                writer.write(sample)
    first, second = (p.read_bytes() for p in paths)
    assert first == second, "gzip header must not hold the file name or a time"
    assert first[:2] == b"\x1f\x8b" and first[3] == 0 and first[4:8] == bytes(4)
    assert gzip.decompress(first) == write_bytes(mixed_samples(3))
    assert [s["__key__"] for s in read_samples(paths[0])] == [f"sample{i:04d}" for i in range(3)]


def test_compress_false_overrides_suffix(tmp_path: Path) -> None:
    path = tmp_path / "x.tgz"
    with TarWriter(str(path), compress=False) as writer:
        writer.write({"__key__": "a", "txt": "x"})
    assert path.read_bytes()[:2] != b"\x1f\x8b"


@pytest.mark.parametrize("arg", [{"compress": "bz2"}, {"compress": "zstd"}])
def test_unsupported_compression(tmp_path: Path, arg: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="compress"):
        TarWriter(str(tmp_path / "x.tar"), **arg)
    with pytest.raises(ConfigError, match="only gzip"):
        TarWriter(str(tmp_path / "x.tar.xz"))


def test_meta_fields_skipped_unless_keep_meta() -> None:
    sample = {"__key__": "a", "txt": "x", "__url__": "u", "_note": "n"}
    names = [h.name for h in parse_headers(write_bytes([sample]))]
    assert names == [b"a.txt"]
    names = [h.name for h in parse_headers(write_bytes([sample], keep_meta=True))]
    assert names == [b"a.__url__", b"a._note", b"a.txt"]


@pytest.mark.parametrize(
    ("sample", "message"),
    [
        ({"txt": "x"}, "no __key__"),
        ({"__key__": 3, "txt": "x"}, "must be str"),
        ({"__key__": "a.b", "txt": "x"}, "without '.'"),
        ({"__key__": "dir/", "txt": "x"}, "non-empty last path component"),
        ({"__key__": "a", "TXT": "x", "txt": "y"}, "differ only in case"),
        ({"__key__": "a", "x/y": b"x"}, "without '/'"),
        ({"__key__": "a", "bin": 3}, "extension 'bin'"),
    ],
)
def test_bad_samples_raise_and_write_nothing(sample: dict[str, Any], message: str) -> None:
    out = io.BytesIO()
    writer = TarWriter(out)
    with pytest.raises(SampleError, match=message):
        writer.write(sample)
    assert out.getvalue() == b""
    writer.write({"__key__": "ok", "txt": "fine"})  # the writer goes on
    writer.close()
    assert [h.name for h in parse_headers(out.getvalue())] == [b"ok.txt"]


def test_local_path_appears_only_on_close(tmp_path: Path) -> None:
    path = tmp_path / "shard.tar"
    writer = TarWriter(str(path))
    writer.write({"__key__": "a", "txt": "x"})
    assert not path.exists()
    (temp,) = [p.name for p in tmp_path.iterdir()]
    assert temp.startswith(".shard.tar.tmp-")
    writer.close()
    assert [p.name for p in tmp_path.iterdir()] == ["shard.tar"]


def test_exception_in_with_block_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(KeyError), TarWriter(str(tmp_path / "shard.tar")) as writer:
        writer.write({"__key__": "a", "txt": "x"})
        raise KeyError("boom")
    assert list(tmp_path.iterdir()) == []


def test_missing_directory_is_upload_error(tmp_path: Path) -> None:
    with pytest.raises(UploadError, match="nope"):
        TarWriter(str(tmp_path / "nope" / "x.tar"))


def test_fifo_target_written_directly(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    with TarWriter(str(fifo)) as writer:
        writer.write({"__key__": "a", "txt": "x"})
    out, _ = reader.communicate(timeout=60)
    assert [h.name for h in parse_headers(out)] == [b"a.txt"]
    assert fifo.exists() and os.path.isfile(fifo) is False


def test_pipe_target(tmp_path: Path) -> None:
    out = tmp_path / "piped.tar"
    with TarWriter(f"pipe:cat > {out}") as writer:
        writer.write({"__key__": "a", "txt": "x"})
    assert [h.name for h in parse_headers(out.read_bytes())] == [b"a.txt"]


def test_failing_pipe_command_is_upload_error() -> None:
    writer = TarWriter(f"pipe:{sys.executable} -c 'import sys; sys.stdin.read(); sys.exit(3)'")
    writer.write({"__key__": "a", "txt": "x"})
    with pytest.raises(UploadError, match="status 3"):
        writer.close()


def test_url_target_through_registry_create(registry: OpenerRegistry, store: Any) -> None:
    with TarWriter("tstore://bucket/one.tar", registry=registry) as writer:
        writer.write({"__key__": "a", "txt": "x"})
        assert store.commits == []
    assert store.commits == ["tstore://bucket/one.tar"]
    assert [s["txt"] for s in read_samples(store.path("tstore://bucket/one.tar"))] == [b"x"]


def test_failing_url_target_aborts(registry: OpenerRegistry, failing_store: Any) -> None:
    writer = TarWriter("tfail://bucket/one.tar", registry=registry)
    with pytest.raises(UploadError, match=r"injected failure.*url='tfail://bucket/one.tar'"):
        for i in range(20):
            writer.write({"__key__": f"s{i}", "bin": bytes(1000)})
    assert failing_store.aborts == ["tfail://bucket/one.tar"]
    assert failing_store.commits == [] and failing_store.stored() == []
    with pytest.raises(ValueError, match="closed"):
        writer.write({"__key__": "b", "txt": "x"})


def test_url_without_create_is_unsupported(registry: OpenerRegistry) -> None:
    with pytest.raises(UnsupportedSchemeError, match="cannot write"):
        TarWriter("tro://bucket/x.tar", registry=registry)


def test_bad_format_argument() -> None:
    with pytest.raises(ConfigError, match="format"):
        TarWriter(io.BytesIO(), format=tarfile.GNU_FORMAT)


def test_full_device_is_upload_error() -> None:
    writer = TarWriter("/dev/full")
    with pytest.raises(UploadError, match=r"No space left.*url='/dev/full'"):
        writer.write({"__key__": "a", "bin": bytes(1 << 20)})
        writer.close()


def test_buffer_values_written_by_bytes() -> None:
    array = np.arange(12, dtype=np.float64).reshape(3, 4)
    sample = {"__key__": "a", "f64": memoryview(array), "col": memoryview(array[:, 1:2])}
    data = write_bytes([sample])
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar}  # type: ignore[union-attr]
    assert got == {"a.col": array[:, 1:2].tobytes(), "a.f64": array.tobytes()}
