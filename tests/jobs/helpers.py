"""Per-sample functions for the job tests (importable by Ray workers) and dataset helpers."""

from __future__ import annotations

import collections
import hashlib
import os
import time
from pathlib import Path
from typing import Any

from wds_cloud.core.samples import tar_samples
from wds_cloud.openers.registry import OpenerRegistry, default_registry
from wds_cloud.writing.shardwriter import ShardWriter


def write_inputs(
    directory: Path, nshards: int, per_shard: int, *, seed: int = 0, name: str = "in-%03d.tar"
) -> str:
    """``nshards`` shards of ``per_shard`` samples (``txt``, ``bin`` of varied size, ``cls``);
    returns the brace spec of their names."""
    directory.mkdir(parents=True, exist_ok=True)
    pattern = str(directory / name)
    with ShardWriter(pattern, maxcount=per_shard) as writer:
        for i in range(nshards * per_shard):
            size = (i * 37 + seed * 11) % 700 + 1
            writer.write(
                {
                    "__key__": f"s{seed}/k{i:05d}",
                    "txt": f"text {i}".encode(),
                    "bin": hashlib.sha256(f"{seed}:{i}".encode()).digest() * (size // 32 + 1),
                    "cls": str(i % 7).encode(),
                }
            )
    return str(directory / name.replace("%03d", f"{{000..{nshards - 1:03d}}}"))


def read_samples(urls: list[str], registry: OpenerRegistry | None = None) -> list[dict[str, Any]]:
    """Every sample of ``urls`` in order (``__url__`` left out)."""
    registry = registry or default_registry()
    out = []
    for url in urls:
        stream = registry.open(url)
        try:
            for sample in tar_samples(stream, url):
                sample.pop("__url__", None)
                out.append(sample)
        finally:
            stream.close()
    return out


def multiset(samples: list[dict[str, Any]]) -> collections.Counter[Any]:
    """Samples as a multiset of (key, sorted members)."""
    return collections.Counter(
        (s["__key__"], tuple(sorted((k, bytes(v)) for k, v in s.items() if k != "__key__")))
        for s in samples
    )


def listing(directory: str | Path) -> list[str]:
    """Every file name under ``directory`` (hidden ones included), sorted."""
    return sorted(
        os.path.relpath(os.path.join(d, f), directory)
        for d, _, files in os.walk(directory)
        for f in files
    )


def digests(directory: str | Path, suffix: str = ".tar") -> dict[str, str]:
    """name -> SHA-256 of every ``suffix`` file directly in ``directory``."""
    return {
        name: hashlib.sha256((Path(directory) / name).read_bytes()).hexdigest()
        for name in sorted(os.listdir(directory))
        if name.endswith(suffix)
    }


def upper(sample: dict[str, Any]) -> dict[str, Any]:
    """Upper-case the text member, add a ``len`` member."""
    out = dict(sample)
    out["txt"] = sample["txt"].upper()
    out["len"] = str(len(sample["bin"])).encode()
    return out


def expected_upper(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [upper(s) for s in samples]


def broken(sample: dict[str, Any]) -> dict[str, Any] | None:
    """Drops samples of class 3 by returning None, raises on class 5, upper-cases the rest."""
    cls = sample["cls"]
    if cls == b"3":
        return None
    if cls == b"5":
        raise ValueError(f"cannot decode {sample['__key__']}")
    return upper(sample)


def even_class(sample: dict[str, Any]) -> bool:
    return int(sample["cls"]) % 2 == 0


def slow_upper(sample: dict[str, Any]) -> dict[str, Any]:
    """``upper`` after a pause (so tasks are still running when a test kills workers)."""
    time.sleep(float(os.environ.get("WDS_TEST_SLOW", "0.04")))
    return upper(sample)
