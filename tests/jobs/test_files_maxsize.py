"""``convert`` from files grouped by key, cut by ``maxsize`` (and ``maxcount``), from a local
tree and from object prefixes: the shards are byte for byte those one ``ShardWriter`` with the
same limits writes for the same samples, every shard is within ``maxsize`` unless it holds a
single larger sample, every sample is there exactly once, and a rerun writes the same bytes."""

from __future__ import annotations

import collections
import os
import random
from pathlib import Path
from typing import Any

import pytest

from tests.jobs.helpers import digests, read_samples
from tests.s3.conftest import make_config
from wds_cloud.jobs import convert
from wds_cloud.jobs.convert import file_samples
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.writing.shardwriter import ShardWriter

_EXTS = ("jpg", "cls", "json", "seg.png", "txt")
_END_OF_ARCHIVE = 1024


def write_tree(root: Path, seed: int, samples: int = 60) -> dict[str, dict[str, bytes]]:
    """A tree of files grouped by key (nested folders, one over 100 characters of path, 1-4
    members of random sizes a key); returns key -> {ext: bytes}."""
    rng = random.Random(seed)
    deep = "d" * 60 + "/" + "e" * 50
    out: dict[str, dict[str, bytes]] = {}
    for i in range(samples):
        folder = rng.choice(("a", "b/c", deep, ""))
        key = f"{folder}/k{i:04d}".lstrip("/")
        members = {}
        for ext in rng.sample(_EXTS, rng.randint(1, 4)):
            size = rng.choice((0, 1, 511, 512, 513, rng.randint(0, 6000)))
            members[ext] = rng.randbytes(size)
            path = root / f"{key}.{ext}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(members[ext])
        out[key] = members
    return out


def reference(source: str, pattern: str, registry: OpenerRegistry | None, **limits: Any) -> None:
    """The same samples written by one ShardWriter with the same limits (the reference)."""
    reg = registry or OpenerRegistry()
    os.makedirs(os.path.dirname(pattern), exist_ok=True)
    with ShardWriter(pattern, **limits) as writer:
        for key, members in file_samples(source, reg):
            sample: dict[str, Any] = {"__key__": key}
            for ext, url in members:
                with reg.open(url) as stream:
                    sample[ext.lower()] = stream.read()
            writer.write(sample)


def check_bounds(shards: list[str], maxsize: float) -> None:
    for url in shards:
        if os.path.getsize(url) > maxsize:
            assert len(read_samples([url])) == 1, url  # only a single oversized sample


def as_samples(tree: dict[str, dict[str, bytes]]) -> collections.Counter[Any]:
    return collections.Counter((k, tuple(sorted(m.items()))) for k, m in tree.items())


def got_samples(shards: list[str], registry: OpenerRegistry | None = None) -> Any:
    return collections.Counter(
        (s.pop("__key__"), tuple(sorted(s.items()))) for s in read_samples(shards, registry)
    )


@pytest.mark.parametrize("seed", range(8))
def test_local_tree_is_cut_as_shardwriter_cuts(seed, tmp_path):
    rng = random.Random(seed)
    tree = write_tree(tmp_path / "src", seed)
    maxsize = rng.choice((3000, 8000, 30000))
    maxcount = rng.choice((3, 10, 100000))
    source = str(tmp_path / "src")
    summary = convert(source, str(tmp_path / "out" / "f-%04d.tar"), maxcount=maxcount,
                      maxsize=maxsize, manifest=False)  # fmt: skip
    reference(source, str(tmp_path / "ref" / "f-%04d.tar"), None, maxcount=maxcount,
              maxsize=maxsize)  # fmt: skip
    assert digests(tmp_path / "out") == digests(tmp_path / "ref")
    assert len(summary.shards) == len(digests(tmp_path / "out")) > 1
    check_bounds(summary.shards, maxsize)
    assert got_samples(summary.shards) == as_samples(tree)
    again = convert(source, str(tmp_path / "again" / "f-%04d.tar"), maxcount=maxcount,
                    maxsize=maxsize, manifest=False)  # fmt: skip
    assert again.shards == [s.replace("/out/", "/again/") for s in summary.shards]
    assert digests(tmp_path / "again") == digests(tmp_path / "out")


def test_a_file_larger_than_maxsize_gets_a_shard_of_its_own(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(9):
        (src / f"k{i}.bin").write_bytes(bytes([i]) * (20000 if i == 4 else 900))
    summary = convert(str(src), str(tmp_path / "o-%02d.tar"), maxsize=5000, manifest=False)
    counts = [len(read_samples([u])) for u in summary.shards]
    sizes = [os.path.getsize(u) for u in summary.shards]
    # a sample takes 512 + 1024 bytes: two a shard (3 x 1536 + 1024 > 5000)
    assert counts == [2, 2, 1, 2, 2] and [k for k, s in enumerate(sizes) if s > 5000] == [2]
    assert [s["__key__"] for s in read_samples([summary.shards[2]])] == ["k4"]


def _upload_s3(raw_client: Any, bucket: str, root: Path, prefix: str) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            key = prefix + path.relative_to(root).as_posix()
            raw_client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


@pytest.mark.s3
@pytest.mark.slow
def test_s3_prefix_is_cut_by_maxsize_as_the_local_tree(s3_endpoint, raw_client, bucket, tmp_path):
    from wds_cloud.openers.s3.opener import S3Opener

    tree = write_tree(tmp_path / "src", seed=21, samples=300)
    _upload_s3(raw_client, bucket, tmp_path / "src", "raw/")
    registry = OpenerRegistry()
    registry.register("s3", S3Opener(make_config(s3_endpoint)), override=True)
    out = f"s3://{bucket}/shards/s-%03d.tar"
    remote = convert(f"s3://{bucket}/raw/", out, maxsize=20000, registry=registry)
    local = convert(str(tmp_path / "src"), str(tmp_path / "l" / "s-%03d.tar"), maxsize=20000)
    assert len(remote.shards) == len(local.shards) > 10
    for i, url in enumerate(remote.shards):
        with registry.open(url) as stream:
            assert stream.read() == Path(local.shards[i]).read_bytes(), url
    check_bounds(local.shards, 20000)
    assert got_samples(remote.shards, registry) == as_samples(tree)


@pytest.mark.gcs
def test_gs_prefix_is_cut_by_maxsize_as_the_local_tree(fake_gcs: Any, tmp_path):
    from wds_cloud.openers.gcs.opener import GcsOpener

    write_tree(tmp_path / "src", seed=22, samples=40)
    bucket = fake_gcs.client().create_bucket("files-maxsize")
    for path in sorted((tmp_path / "src").rglob("*")):
        if path.is_file():
            blob = "raw/" + path.relative_to(tmp_path / "src").as_posix()
            bucket.blob(blob).upload_from_string(path.read_bytes())
    registry = OpenerRegistry()
    registry.register("gs", GcsOpener(endpoint=fake_gcs.endpoint, backoff=0.01), override=True)
    remote = convert("gs://files-maxsize/raw/", str(tmp_path / "r" / "s-%03d.tar"),
                     maxsize=7000, maxcount=5, registry=registry)  # fmt: skip
    convert(str(tmp_path / "src"), str(tmp_path / "l" / "s-%03d.tar"), maxsize=7000, maxcount=5)
    assert digests(tmp_path / "r") == digests(tmp_path / "l") and len(remote.shards) > 8


@pytest.mark.ais
def test_ais_prefix_is_listed_once_and_sized_by_its_listing(ais_emulator: Any, tmp_path):
    """The sizes that ``maxsize`` needs come with the prefix's one listing: the emulator sees
    the listing's pages once (not once to tell the input kind and again to plan), no HEAD, and
    one GET of each file (the task reading it); the shards are those of the local tree."""
    from wds_cloud.openers.ais.opener import AisOpener

    tree = write_tree(tmp_path / "src", seed=23, samples=50)
    ais_emulator.store.create_bucket("sized")
    files = sorted(p for p in (tmp_path / "src").rglob("*") if p.is_file())
    for path in files:
        name = "raw/" + path.relative_to(tmp_path / "src").as_posix()
        ais_emulator.store.put_object("sized", name, path.read_bytes())
    registry = OpenerRegistry()
    opener = AisOpener(endpoint=ais_emulator.url, retries=2, backoff=0.0, page_size=40)
    registry.register("ais", opener, override=True)
    ais_emulator.requests.clear()
    remote = convert("ais://sized/raw/", str(tmp_path / "r" / "s-%03d.tar"), maxsize=9000,
                     registry=registry, manifest=False)  # fmt: skip
    convert(str(tmp_path / "src"), str(tmp_path / "l" / "s-%03d.tar"), maxsize=9000)
    assert digests(tmp_path / "r") == digests(tmp_path / "l") and len(remote.shards) > 5
    assert got_samples(remote.shards) == as_samples(tree)
    seen = collections.Counter((m, p.split("/")[2]) for m, p, _, _ in ais_emulator.requests)
    pages = -(-len(files) // 40)
    assert seen[("GET", "buckets")] == pages, seen
    assert seen[("HEAD", "objects")] == 0 and seen[("GET", "objects")] == len(files), seen
