"""Generated column sets for the join tests, and the reference join read with ``tarfile``.

Set ``img`` holds ``<key>.jpg`` (+ ``<key>.json``), ``txt`` holds ``<key>.txt`` (+ ``<key>.json``
when asked, to make a clash), ``emb`` holds ``<key>.npy``; every payload is derived from its key
so that a merged sample can be checked for alignment.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tests.support import tarbuild

SIZES = {"img": 3000, "txt": 40, "emb": 1500}


def payload(column: str, key: str) -> bytes:
    """The bytes of ``key`` in set ``column`` (sized as :data:`SIZES`)."""
    head = f"{column}:{key}:".encode()
    return (head * (SIZES[column] // len(head) + 1))[: SIZES[column]]


EXTS = {"img": ("jpg", "json"), "txt": ("txt",), "emb": ("npy",)}


def shard_keys(index: int, samples: int) -> list[str]:
    """The keys of shard ``index``."""
    return [f"s{index:03d}/k{j:04d}" for j in range(samples)]


def set_shard(column: str, keys: Sequence[str], exts: Sequence[str] | None = None) -> bytes:
    """One shard of set ``column`` holding ``keys`` in this order."""
    members = [
        (f"{key}.{ext}", payload(column, key) if ext != "json" else f'{{"k":"{key}"}}'.encode())
        for key in keys
        for ext in (exts or EXTS[column])
    ]
    return tarbuild.tar_bytes(members, mtime=0)


def make_sets(
    nshards: int,
    samples: int,
    columns: Iterable[str] = ("img", "txt", "emb"),
    edit: Callable[[str, int, list[str]], list[str]] | None = None,
) -> dict[str, list[bytes]]:
    """``{column: [shard bytes]}``; ``edit(column, index, keys)`` may change a shard's keys."""
    out: dict[str, list[bytes]] = {}
    for column in columns:
        shards = []
        for i in range(nshards):
            keys = shard_keys(i, samples)
            if edit is not None:
                keys = edit(column, i, list(keys))
            shards.append(set_shard(column, keys))
        out[column] = shards
    return out


def reference(rows: Sequence[Sequence[bytes]], columns: Sequence[str]) -> list[dict[str, Any]]:
    """The join of rows of shard bytes, read with ``tarfile``: per key, every set's fields."""
    out = []
    for row in rows:
        per_set = [_tar_samples(data) for data in row]
        for key in per_set[0]:
            merged: dict[str, Any] = {"__key__": key}
            for samples in per_set:
                merged.update(samples[key])
            out.append(merged)
    return out


def _tar_samples(data: bytes) -> dict[str, dict[str, bytes]]:
    samples: dict[str, dict[str, bytes]] = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in tar.getmembers():
            base = m.name.rsplit("/", 1)
            stem, _, ext = base[-1].partition(".")
            key = (base[0] + "/" if len(base) == 2 else "") + stem
            f = tar.extractfile(m)
            assert f is not None
            samples.setdefault(key, {})[ext] = f.read()
    return samples


def fields(sample: dict[str, Any]) -> dict[str, Any]:
    """A sample without ``__url__`` (and other meta fields but the key)."""
    return {k: bytes(v) if k != "__key__" else v for k, v in sample.items() if k != "__url__"}


def aligned(sample: dict[str, Any]) -> bool:
    """Whether every field of a merged sample belongs to its key."""
    key = sample["__key__"]
    return all(
        v == payload(c, key)
        for c, ext in (("img", "jpg"), ("txt", "txt"), ("emb", "npy"))
        if (v := sample.get(ext, sample.get(f"{c}.{ext}"))) is not None
    )
