"""LocalOpener: paths, file:// URLs, stdin, errors, listing and atomic writes."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wds_cloud.errors import ConfigError, ShardNotFoundError, ShardOpenError, UploadError
from wds_cloud.openers.local import LocalOpener, url_to_path
from wds_cloud.openers.registry import OpenerRegistry


def test_missing_file_names_the_url(tmp_path: Path) -> None:
    url = str(tmp_path / "nope.tar")
    with pytest.raises(ShardNotFoundError) as info:
        LocalOpener().open(url)
    assert info.value.url == url and url in str(info.value)
    assert isinstance(info.value, FileNotFoundError)


def test_directory_is_an_open_error(tmp_path: Path) -> None:
    with pytest.raises(ShardOpenError, match="is a directory"):
        LocalOpener().open(str(tmp_path))


def test_permission_denied_is_an_open_error(tmp_path: Path) -> None:
    path = tmp_path / "secret.tar"
    path.write_bytes(b"x")
    path.chmod(0)
    if os.geteuid() != 0:
        with pytest.raises(ShardOpenError, match="permission denied"):
            LocalOpener().open(str(path))
        return
    # root reads any file: open it in a child process whose capabilities to bypass file
    # permissions are dropped (util-linux setpriv), so the kernel answers EACCES as for a user
    code = (
        "from wds_cloud.errors import ShardOpenError\n"
        "from wds_cloud.openers.local import LocalOpener\n"
        "try:\n"
        f"    LocalOpener().open({str(path)!r})\n"
        "except ShardOpenError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    drop = "-dac_override,-dac_read_search"
    command = ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}", sys.executable]
    done = subprocess.run([*command, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.startswith("ShardOpenError") and "permission denied" in done.stdout, (
        done.stdout + done.stderr
    )


def test_file_urls_and_percent_escapes(tmp_path: Path) -> None:
    path = tmp_path / "a b.tar"
    path.write_bytes(b"data")
    assert url_to_path(path.as_uri()) == str(path)
    assert url_to_path("file://localhost" + str(path)) == str(path)
    with LocalOpener().open(path.as_uri()) as stream:
        assert stream.read() == b"data"
    with pytest.raises(ConfigError, match="host"):
        url_to_path("file://otherhost/x.tar")


def test_registry_routes_paths_and_file_urls(tmp_path: Path) -> None:
    path = tmp_path / "x.tar"
    path.write_bytes(b"abc")
    registry = OpenerRegistry()
    for url in (str(path), path.as_uri()):
        with registry.open(url) as stream:
            assert stream.read() == b"abc"


def test_local_path(tmp_path: Path) -> None:
    opener = LocalOpener()
    assert opener.local_path("/data/x.tar") == "/data/x.tar"
    assert opener.local_path("file:///data/x%20y.tar") == "/data/x y.tar"
    assert opener.local_path("-") is None


def test_stdin_dash_reads_from_a_real_subprocess_stdin() -> None:
    payload = os.urandom(200_000)
    code = (
        "import hashlib, sys; from wds_cloud.openers.local import LocalOpener\n"
        "s = LocalOpener().open('-'); data = s.read(); s.close()\n"
        "sys.stdout.write(hashlib.sha256(data).hexdigest())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=payload, capture_output=True, check=True, timeout=60
    )
    assert out.stdout.decode() == hashlib.sha256(payload).hexdigest()


def test_stdin_without_a_file_descriptor_reads_its_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a program (or a test runner) that replaced sys.stdin with an in-memory stream
    replaced = io.TextIOWrapper(io.BytesIO(b"shard bytes"))
    monkeypatch.setattr(sys, "stdin", replaced)
    stream = LocalOpener().open("-")
    assert stream.read(5) == b"shard" and stream.read() == b" bytes"
    stream.close()
    assert not replaced.closed


def test_list_directory_glob_and_prefix(tmp_path: Path) -> None:
    for name in ("a-0.tar", "a-1.tar", "b-0.tar", "sub/c-0.tar", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    opener = LocalOpener()
    base = str(tmp_path)
    assert opener.list(base) == [
        f"{base}/a-0.tar",
        f"{base}/a-1.tar",
        f"{base}/b-0.tar",
        f"{base}/notes.txt",
        f"{base}/sub/c-0.tar",
    ]
    assert opener.list(f"{base}/a-*.tar") == [f"{base}/a-0.tar", f"{base}/a-1.tar"]
    assert opener.list(f"{base}/a-") == [f"{base}/a-0.tar", f"{base}/a-1.tar"]
    assert opener.list(tmp_path.as_uri() + "/b-?.tar") == [f"file://{base}/b-0.tar"]
    with pytest.raises(ShardNotFoundError):
        opener.list(f"{base}/nodir/x")


def test_create_commits_atomically_on_close(tmp_path: Path) -> None:
    target = tmp_path / "out.tar"
    writer = LocalOpener().create(str(target))
    writer.write(b"hello ")
    writer.write(memoryview(b"world"))
    assert not target.exists()  # nothing visible before close
    writer.close()
    assert target.read_bytes() == b"hello world"
    assert sorted(os.listdir(tmp_path)) == ["out.tar"]


def test_create_abort_and_exception_discard(tmp_path: Path) -> None:
    target = tmp_path / "out.tar"
    target.write_bytes(b"old")
    writer = LocalOpener().create(target.as_uri())
    writer.write(b"new")
    writer.abort()
    with pytest.raises(RuntimeError), LocalOpener().create(str(target)) as w:
        w.write(b"partial")
        raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out.tar"]


def test_create_in_missing_directory_is_an_upload_error(tmp_path: Path) -> None:
    with pytest.raises(UploadError, match="does not exist"):
        LocalOpener().create(str(tmp_path / "nodir" / "x.tar"))
