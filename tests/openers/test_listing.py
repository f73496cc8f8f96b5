"""list_shards: braces, globs, prefixes, extension filters, remote-style listing, errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

import pytest

from tests.support.http_server import HttpFileServer
from wds_cloud.errors import ConfigError, ShardNotFoundError
from wds_cloud.listing import list_shards
from wds_cloud.openers.registry import OpenerRegistry


class DirBucketOpener:
    """An object-store-like backend over a directory: ``obj://bucket/key`` is ``root/bucket/key``.

    ``list(prefix)`` has S3 semantics: every key starting with the prefix, recursively.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.prefixes: list[str] = []

    def open(self, url: str, **options: Any) -> IO[bytes]:
        return open(self.root / url[len("obj://") :], "rb")

    def list(self, url: str) -> list[str]:
        self.prefixes.append(url)
        found = []
        for dirpath, _, names in os.walk(self.root):
            for name in names:
                key = os.path.relpath(os.path.join(dirpath, name), self.root)
                candidate = "obj://" + key
                if candidate.startswith(url):
                    found.append(candidate)
        return found


def _touch(root: Path, *names: str) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"x")


@pytest.fixture
def local_tree(tmp_path: Path) -> Path:
    _touch(
        tmp_path,
        "train/shard-000.tar",
        "train/shard-001.tar",
        "train/shard-002.tar.gz",
        "train/shard-003.tgz",
        "train/index.json",
        "train/sub/shard-100.tar",
        "val/shard-000.TAR",
    )
    return tmp_path


def test_brace_template_is_expanded_without_listing(tmp_path: Path) -> None:
    spec = f"{tmp_path}/shard-{{000..002}}.tar"
    assert list_shards(spec) == [f"{tmp_path}/shard-{i:03d}.tar" for i in range(3)]


def test_local_glob_matches_one_component(local_tree: Path) -> None:
    assert list_shards(f"{local_tree}/train/*") == [
        f"{local_tree}/train/shard-000.tar",
        f"{local_tree}/train/shard-001.tar",
        f"{local_tree}/train/shard-002.tar.gz",
        f"{local_tree}/train/shard-003.tgz",
    ]


def test_local_prefix_is_recursive_and_filtered(local_tree: Path) -> None:
    found = list_shards(f"{local_tree}/train/")
    assert f"{local_tree}/train/sub/shard-100.tar" in found
    assert f"{local_tree}/train/index.json" not in found
    assert len(found) == 5
    everything = list_shards(f"{local_tree}/train/", extensions=None)
    assert f"{local_tree}/train/index.json" in everything


def test_extension_match_ignores_case(local_tree: Path) -> None:
    assert list_shards(f"{local_tree}/val/") == [f"{local_tree}/val/shard-000.TAR"]


def test_several_patterns_keep_their_order(local_tree: Path) -> None:
    spec = f"{local_tree}/val/*.TAR::{local_tree}/train/shard-00[01].tar"
    assert list_shards(spec) == [
        f"{local_tree}/val/shard-000.TAR",
        f"{local_tree}/train/shard-000.tar",
        f"{local_tree}/train/shard-001.tar",
    ]
    explicit = [f"{local_tree}/a.tar", f"{local_tree}/a.tar"]
    assert list_shards(explicit) == explicit  # explicit repeats are kept


def test_file_url_glob(local_tree: Path) -> None:
    assert list_shards(f"{local_tree.as_uri()}/val/*") == [f"file://{local_tree}/val/shard-000.TAR"]


def test_nothing_found_names_the_spec(local_tree: Path) -> None:
    spec = f"{local_tree}/train/*.zip"
    with pytest.raises(ShardNotFoundError, match=r"no shards .* match") as info:
        list_shards(spec)
    assert info.value.url == spec
    with pytest.raises(ShardNotFoundError):
        list_shards(f"{local_tree}/nowhere/")


def test_remote_style_backend(tmp_path: Path) -> None:
    _touch(tmp_path, "bkt/a/x-0.tar", "bkt/a/x-1.tar", "bkt/a/deep/x-2.tar", "bkt/ab/x-3.tar")
    backend = DirBucketOpener(tmp_path)
    registry = OpenerRegistry(builtins=False)
    registry.register("obj", backend)
    assert list_shards("obj://bkt/a/x-*.tar", registry=registry) == [
        "obj://bkt/a/x-0.tar",
        "obj://bkt/a/x-1.tar",
    ]
    assert backend.prefixes == ["obj://bkt/a/"]
    assert list_shards("obj://bkt/a/", registry=registry) == [
        "obj://bkt/a/deep/x-2.tar",
        "obj://bkt/a/x-0.tar",
        "obj://bkt/a/x-1.tar",
    ]
    assert list_shards("obj://bkt/*/x-?.tar", registry=registry) == [
        "obj://bkt/a/x-0.tar",
        "obj://bkt/a/x-1.tar",
        "obj://bkt/ab/x-3.tar",
    ]
    assert list_shards("obj://bkt/**/x-2.tar", registry=registry) == ["obj://bkt/a/deep/x-2.tar"]
    # a query string (per-URL options such as ?etl=) is carried to every listed shard
    assert list_shards("obj://bkt/ab/*.tar?etl=resize", registry=registry) == [
        "obj://bkt/ab/x-3.tar?etl=resize"
    ]


def test_http_cannot_be_listed(tmp_path: Path) -> None:
    with HttpFileServer(tmp_path) as server:
        with pytest.raises(ConfigError, match="has no listing"):
            list_shards(server.url("*.tar"))
        url = server.url("shard-{0..1}.tar")
        assert list_shards(url) == [server.url("shard-0.tar"), server.url("shard-1.tar")]


def test_pipe_urls_pass_through() -> None:
    assert list_shards("pipe:cat /data/*.tar") == ["pipe:cat /data/*.tar"]


def test_list_sizes_needs_a_pattern_and_leaves_local_sizes_to_stat(tmp_path: Path) -> None:
    from wds_cloud.listing import list_sizes

    (tmp_path / "a.bin").write_bytes(b"abc")
    assert list_sizes(f"{tmp_path}/") == [(str(tmp_path / "a.bin"), None)]
    with pytest.raises(ConfigError, match="glob or a prefix"):
        list_sizes(f"{tmp_path}/a.bin")
