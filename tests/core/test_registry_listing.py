"""Globs and prefixes given to WebDataset are listed through the dataset's own registry."""

from __future__ import annotations

import os
from typing import IO, Any

from tests.support.tarbuild import tar_bytes, write
from wds_cloud.core.compat import WebDataset
from wds_cloud.openers.registry import OpenerRegistry


class DirBackend:
    """A ``dir://NAME/...`` backend serving files of one directory (real files, real bytes)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def _path(self, url: str) -> str:
        return os.path.join(self.root, url.split("://", 1)[1])

    def open(self, url: str, **options: Any) -> IO[bytes]:
        return open(self._path(url), "rb")

    def list(self, url: str) -> list[str]:
        prefix = url.split("://", 1)[1]
        return sorted(f"dir://{n}" for n in os.listdir(self.root) if n.startswith(prefix))


def test_webdataset_lists_a_glob_through_its_registry(tmp_path: object) -> None:
    root = str(tmp_path)
    for i in range(3):
        write(os.path.join(root, f"train-{i}.tar"), tar_bytes([(f"k{i}.txt", b"x")]))
    write(os.path.join(root, "other-0.tar"), tar_bytes([("o.txt", b"y")]))
    registry = OpenerRegistry(builtins=False)
    registry.register("dir", DirBackend(root))
    keys = [
        s["__key__"] for s in WebDataset("dir://train-*.tar", registry=registry, shardshuffle=False)
    ]
    assert keys == ["k0", "k1", "k2"]
    resampled = WebDataset("dir://train-*.tar", registry=registry, resampled=True).with_epoch(5)
    assert {s["__key__"] for s in resampled} <= {"k0", "k1", "k2"}
