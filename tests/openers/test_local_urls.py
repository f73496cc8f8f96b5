"""One mapping from local URLs to paths, for reading, writing, listing and ``__local_path__``;
NUL bytes are the library's error; listings return absolute paths, never command-like names."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

import pytest

from wds_cloud.core.shardopen import tarfile_samples
from wds_cloud.errors import ConfigError, ShardNotFoundError, WdsCloudError
from wds_cloud.listing import list_shards
from wds_cloud.openers.local import LocalOpener, path_to_url, url_to_path
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.writing.tarwriter import TarWriter


def _write(target: str) -> None:
    with TarWriter(target) as writer:
        writer.write({"__key__": "k", "txt": "hello"})


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("file:///data/a%20b.tar", "/data/a b.tar"),
        ("file://localhost/data/x.tar", "/data/x.tar"),
        ("file:/data/x.tar", "/data/x.tar"),
        ("file:x.tar", "x.tar"),
        ("file:sub/a%25b.tar", "sub/a%b.tar"),
        ("file:///data/q?x#y.tar", "/data/q?x#y.tar"),
        ("FILE:///data/x.tar", "/data/x.tar"),
        ("/data/pipe:cmd;x.tar", "/data/pipe:cmd;x.tar"),
    ],
)
def test_url_to_path(url: str, path: str) -> None:
    assert url_to_path(url) == path


@pytest.mark.parametrize("name", ["a b.tar", "q?x#y.tar", "100%.tar", "pipe:x;y.tar", "é.tar"])
def test_path_to_url_round_trips(tmp_path: Path, name: str) -> None:
    path = str(tmp_path / name)
    url = path_to_url(path)
    assert url.startswith("file:///") and url_to_path(url) == path


def test_write_and_read_the_same_file_for_a_percent_encoded_url(tmp_path: Path) -> None:
    url = path_to_url(str(tmp_path)) + "/a%20b.tar"
    _write(url)
    assert os.listdir(tmp_path) == ["a b.tar"]
    with LocalOpener().open(url) as stream:
        assert stream.read() == (tmp_path / "a b.tar").read_bytes()
    (sample,) = tarfile_samples([url], local_paths=True)
    assert sample["__local_path__"] == str(tmp_path / "a b.tar")


def test_relative_file_url_writes_the_relative_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write("file:x.tar")
    assert os.listdir(tmp_path) == ["x.tar"], "not a file literally named 'file:x.tar'"
    with LocalOpener().open("file:x.tar") as stream:
        assert stream.read() == (tmp_path / "x.tar").read_bytes()


@pytest.mark.parametrize("url", ["/tmp/a\0b.tar", "file:///tmp/a\0b.tar", "file:///tmp/a%00b.tar"])
def test_nul_byte_is_a_config_error_on_every_local_operation(url: str) -> None:
    opener = LocalOpener()
    for operation in (opener.open, opener.list, opener.local_path, opener.create):
        with pytest.raises(ConfigError) as info:
            operation(url)
        assert isinstance(info.value, WdsCloudError) and repr(url) in str(info.value)


def test_relative_glob_lists_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("pipe:touch PWNED;x.tar", "-.tar", "s3:x.tar", "a.tar"):
        _write(str(tmp_path / name))
    expected = sorted(
        str(tmp_path / n) for n in ("pipe:touch PWNED;x.tar", "-.tar", "s3:x.tar", "a.tar")
    )
    assert LocalOpener().list("*.tar") == expected
    assert LocalOpener().list("") == expected  # a name prefix in the current directory
    assert list_shards("*.tar") == expected
    assert list_shards(path_to_url(str(tmp_path)) + "/*.tar") == [path_to_url(p) for p in expected]
    samples = list(tarfile_samples(list_shards("pipe*.tar")))
    assert [s["__url__"] for s in samples] == [str(tmp_path / "pipe:touch PWNED;x.tar")]
    assert not (tmp_path / "PWNED").exists()


class _Misbehaving:
    """A lister that returns names which are not URLs of the listed scheme."""

    def __init__(self, result: list[str]) -> None:
        self.result = result

    def open(self, url: str, **options: Any) -> IO[bytes]:
        raise ShardNotFoundError("nothing", url=url)

    def list(self, url: str) -> list[str]:
        return self.result


@pytest.mark.parametrize(
    ("scheme", "result"),
    [("obj", ["pipe:touch PWNED;x.tar"]), ("obj", ["other://b/x.tar"]), ("file", ["rel.tar"])],
)
def test_listing_results_must_have_the_listed_scheme(scheme: str, result: list[str]) -> None:
    registry = OpenerRegistry(builtins=False)
    registry.register(scheme, _Misbehaving(result))
    pattern = "obj://bucket/*.tar" if scheme == "obj" else "/data/*.tar"
    with pytest.raises(ConfigError, match="refusing to use it"):
        list_shards(pattern, registry=registry)
