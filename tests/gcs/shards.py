"""Small WebDataset shards built in memory for the GCS tests."""

from __future__ import annotations

import os
from typing import Any

from tests.support import tarbuild


def make_shard(shard: int, samples: int, payload: int = 1000) -> tuple[bytes, list[dict[str, Any]]]:
    """A tar shard of ``samples`` samples (``.bin`` random bytes + ``.cls``) and its samples."""
    members, expected = [], []
    for i in range(samples):
        key = f"s{shard:03d}_{i:05d}"
        fields = {"bin": os.urandom(payload), "cls": str(i % 7).encode()}
        members += [(f"{key}.{ext}", data) for ext, data in fields.items()]
        expected.append({"__key__": key, **fields})
    return tarbuild.tar_bytes(members, mtime=0), expected


def upload_shards(bucket: Any, count: int, samples: int, payload: int = 1000) -> dict[str, list]:
    """Upload ``count`` shards as ``shards/shard-NNNN.tar``; returns URL -> expected samples."""
    result = {}
    for n in range(count):
        data, expected = make_shard(n, samples, payload)
        name = f"shards/shard-{n:04d}.tar"
        bucket.blob(name).upload_from_string(data)
        result[f"gs://{bucket.name}/{name}"] = expected
    return result
