"""gopen: webdataset's open-anything call over the opener registry and the committing writers.

Local paths, ``file:``, ``pipe:``, ``-`` and HTTP here (against the repo's HTTP server); the
object stores in tests/s3, tests/gcs and tests/ais. Secure mode and ``GOPEN_REWRITE`` follow
webdataset 1.0.2's rules and messages.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
import wds_cloud.security as security
from tests.support.http_server import HttpFileServer
from wds_cloud.errors import ConfigError, ShardNotFoundError, UnsupportedSchemeError
from wds_cloud.openers.gopen import gopen, gopen_schemes, reader, rewrite_url
from wds_cloud.openers.local import LocalOpener
from wds_cloud.openers.registry import OpenerRegistry


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("WDS_SECURE", "WDS_CLOUD_SECURE", "GOPEN_REWRITE", "WDS_CLOUD_ALLOW_LOCAL"):
        monkeypatch.delenv(name, raising=False)
    before = security.enforce_security
    yield
    security.enforce_security = before


def test_local_round_trip_and_file_urls(tmp_path: Path) -> None:
    path = tmp_path / "a b.bin"
    with gopen(str(path), "wb") as stream:
        stream.write(b"line one\n")
        stream.write(memoryview(b"line two\n"))
    with gopen(path, "rb") as stream:  # path-like too
        assert isinstance(stream, io.BufferedReader)
        assert stream.readline() == b"line one\n" and list(stream) == [b"line two\n"]
    with gopen(path.as_uri()) as stream:
        assert stream.read() == b"line one\nline two\n"
    with gopen(f"file:{path}", "wb") as stream:
        stream.write(b"over")
    assert path.read_bytes() == b"over" and reader(str(path)).read() == b"over"


def test_write_commits_only_on_clean_close(tmp_path: Path) -> None:
    target = tmp_path / "out.tar"
    with pytest.raises(RuntimeError), gopen(str(target), "wb") as stream:
        stream.write(b"half a shard")
        raise RuntimeError("producer failed")
    assert os.listdir(tmp_path) == [], "nothing published, no temp file left"
    stream = gopen(str(target), "wb")
    stream.write(b"x")
    assert not target.exists()  # invisible until close
    stream.close()
    assert target.read_bytes() == b"x"


def test_pipe_round_trip(tmp_path: Path) -> None:
    # webdataset's own test_gopen.py::test_pipe
    with gopen(f"pipe:cat > {tmp_path}/temp2", "wb") as stream:
        stream.write(b"abc")
    with gopen(f"pipe:cat {tmp_path}/temp2", "rb") as stream:
        assert stream.read() == b"abc"


def test_http_read(tmp_path: Path) -> None:
    root = tmp_path / "www"
    root.mkdir()
    data = os.urandom(300_000)
    (root / "s.tar").write_bytes(data)
    with HttpFileServer(root) as server, gopen(server.url("s.tar"), bufsize=1 << 16) as stream:
        assert stream.read(10) == data[:10] and stream.read() == data[10:]


def test_missing_file_and_unknown_scheme(tmp_path: Path) -> None:
    with pytest.raises(ShardNotFoundError):
        gopen(str(tmp_path / "missing.tar"))
    with pytest.raises(ValueError, match="no opener registered for scheme 'sftp'") as info:
        gopen("sftp://host/x.tar")
    assert isinstance(info.value, UnsupportedSchemeError)


def test_bad_mode_and_write_options(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mode"):
        gopen(str(tmp_path / "x"), "r")
    with pytest.raises(ConfigError, match="reading only"):
        gopen(str(tmp_path / "x"), "wb", range=(0, 1))


def test_registry_argument_and_gopen_schemes(tmp_path: Path) -> None:
    path = tmp_path / "x"
    path.write_bytes(b"data")
    registry = OpenerRegistry(builtins=False)
    registry.register("file", LocalOpener())
    assert gopen(str(path), registry=registry).read() == b"data"
    with pytest.raises(UnsupportedSchemeError):
        gopen("pipe:true", registry=registry)

    calls: list[tuple[Any, ...]] = []

    def handler(url: str, mode: str, bufsize: int, **kw: Any) -> io.BytesIO:
        calls.append((url, mode, bufsize, kw))
        return io.BytesIO(b"from handler")

    gopen_schemes["mem"] = handler
    try:
        assert wds.gopen("mem://a/b", "rb", 99, x=1).read() == b"from handler"
    finally:
        del gopen_schemes["mem"]
    assert calls == [("mem://a/b", "rb", 99, {"x": 1})]
    assert wds.gopen_schemes is gopen_schemes


def test_rewrite_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert rewrite_url("http://example.com/a") == "http://example.com/a"
    monkeypatch.setenv("GOPEN_REWRITE", "http://example.com/=http://redirected.com/;s3://=gs://")
    assert rewrite_url("http://example.com/test.txt") == "http://redirected.com/test.txt"
    assert rewrite_url("s3://b/k.tar") == "gs://b/k.tar"
    assert rewrite_url("https://example.com/x") == "https://example.com/x"
    # gopen applies it: a rewritten local path is what gets opened
    (tmp_path / "real.bin").write_bytes(b"real")
    monkeypatch.setenv("GOPEN_REWRITE", f"/virtual/={tmp_path}/")
    assert gopen("/virtual/real.bin").read() == b"real"
    monkeypatch.setenv("GOPEN_REWRITE", "no-equals-sign")
    with pytest.raises(ConfigError, match="no '='"):
        rewrite_url("x")


def test_secure_mode_refusals_carry_webdataset_messages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "x"
    path.write_bytes(b"x")
    wds.utils.enforce_security = True
    local = "gopen: unsafe_gopen is False, cannot open local files"
    for url, mode in [(str(path), "rb"), (path.as_uri(), "rb"), (str(tmp_path / "y"), "wb")]:
        with pytest.raises(ValueError, match=local):
            gopen(url, mode)
    with pytest.raises(ValueError, match="gopen_pipe: unsafe_gopen is False, cannot open pipe"):
        gopen(f"pipe:cat {path}")
    monkeypatch.setenv("GOPEN_REWRITE", "http://a/=http://b/")
    with pytest.raises(ValueError, match="rewrite_url: unsafe_gopen is False, cannot rewrite"):
        gopen("http://a/x")
    assert not (tmp_path / "y").exists()


def test_secure_mode_keeps_network_schemes(tmp_path: Path) -> None:
    root = tmp_path / "www"
    root.mkdir()
    (root / "s.tar").write_bytes(b"remote bytes")
    wds.utils.enforce_security = True
    with HttpFileServer(root) as server, gopen(server.url("s.tar")) as stream:
        assert stream.read() == b"remote bytes"


def test_stdin_and_stdout_in_secure_mode() -> None:
    code = (
        "import wds_cloud as wds\n"
        "wds.utils.enforce_security = True\n"
        "data = wds.gopen('-', 'rb').read()\n"
        "with wds.gopen('-', 'wb') as out:\n"
        "    out.write(data[::-1])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], input=b"abc", capture_output=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"cba"


def test_webdataset_facade_names() -> None:
    facade = wds.webdataset_module("gopen")
    assert facade.gopen is gopen and facade.rewrite_url is rewrite_url
    assert facade.reader is reader and facade.gopen_schemes is gopen_schemes
