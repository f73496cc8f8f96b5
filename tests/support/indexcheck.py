"""The index and random-access checks every backend runs (local, HTTP, S3, GCS, AIStore).

A backend test uploads :func:`indexable_archives` through its own client, then calls the
``assert_*`` functions with its URLs and an opener registry for its server. The same shards and
the same assertions run everywhere, so a difference between backends is a backend bug.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

from tests.support import samplegen, targen
from wds_cloud.core.samples import tar_samples
from wds_cloud.index.build import build_index
from wds_cloud.index.check import check_index
from wds_cloud.index.indexed import IndexedWebDataset


def _indexable(names: list[str]) -> bool:
    return bool(names) and not any(c.isspace() for n in names for c in n)


def indexable_archives(count: int = 60) -> list[tuple[str, bytes]]:
    """``(name, tar bytes)`` of ``count`` uncompressed shards with samples and no whitespace in
    names: half from ``samplegen`` (several members per sample), half from ``targen``."""
    out: list[tuple[str, bytes]] = []
    seed = 0
    while len(out) < count // 2:
        arch = samplegen.generate(70_000 + seed)
        seed += 1
        if arch.nsamples and "whitespace" not in arch.features:
            out.append((f"sg-{arch.seed}.tar", arch.blob))
    seed = 0
    while len(out) < count:
        t = targen.generate(80_000 + seed)
        seed += 1
        if not t.compression and _indexable([n for n, _ in t.members]):
            out.append((f"tg-{t.seed}.tar", t.blob))
    return out


def sequential_samples(urls: list[str], registry: Any) -> list[dict[str, Any]]:
    """Every shard read by the streaming reader, in order, as WebDataset yields them."""
    from wds_cloud.openers.registry import url_scheme

    samples: list[dict[str, Any]] = []
    for url in urls:
        stream = registry.open(url)
        local = url if url_scheme(url) == "file" else None  # WebDataset's __local_path__
        try:
            samples.extend(tar_samples(stream, url, local_path=local))
        finally:
            stream.close()
    return samples


def assert_build_check_and_read(urls: list[str], json_url: str, registry: Any) -> None:
    """``build_index`` writes every ``.idx`` and the JSON through the backend; ``check_index``
    agrees; ``WebDataset(json)`` has the exact length; every ``IndexedWebDataset[i]`` is the
    reader's sample ``i``."""
    import wds_cloud as wds

    build = build_index(urls, json=json_url, registry=registry, workers=4)
    want = sequential_samples(urls, registry)
    assert build.nsamples == len(want) and len(build.idx_urls) == len(urls)
    checks = check_index(json_url, registry=registry)
    assert [c.status for c in checks] == ["ok"] * len(urls), [c for c in checks if not c.ok][:3]
    stream = wds.WebDataset(json_url, registry=registry, shardshuffle=False)
    assert len(stream) == len(want)
    ds = IndexedWebDataset(json_url, registry=registry)
    assert len(ds) == len(want)
    failures = [i for i in range(len(ds)) if ds[i] != want[i]]
    assert not failures, f"{len(failures)} samples differ, first {failures[:5]}"


def url_and_key(batch: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """A ``collate_fn`` that keeps what identifies each sample (picklable under spawn)."""
    return [(s["__url__"], s["__key__"]) for s in batch]


def _identities(ds: IndexedWebDataset) -> list[tuple[str, str]]:
    out = []
    for shard, index in enumerate(ds.indexes):
        for k in range(len(index)):
            out.append((ds.urls[shard], index.sample(k)[0]))
    return out


def assert_dataloader(ds: IndexedWebDataset, context: str) -> None:
    """``DataLoader(shuffle=True, num_workers=2)`` under ``context`` (fork or spawn) yields
    every sample once, in an order that is not the stored one."""
    from torch.utils.data import DataLoader

    loader = DataLoader(
        ds,
        batch_size=8,
        shuffle=True,
        num_workers=2,
        collate_fn=url_and_key,
        multiprocessing_context=multiprocessing.get_context(context),
    )
    got = [item for batch in loader for item in batch]
    want = _identities(ds)
    assert sorted(got) == sorted(want)
    assert got != want


def assert_distributed_sampler(ds: IndexedWebDataset, world: int = 3) -> None:
    """``DistributedSampler`` ranks together read every sample once, equal counts per rank."""
    from torch.utils.data import DataLoader, DistributedSampler

    seen: list[tuple[str, str]] = []
    sizes = set()
    for rank in range(world):
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=3)
        sampler.set_epoch(1)
        loader = DataLoader(ds, batch_size=5, sampler=sampler, collate_fn=url_and_key)
        mine = [item for batch in loader for item in batch]
        sizes.add(len(mine))
        seen.extend(mine)
    assert len(sizes) == 1
    padded = sizes.pop() * world - len(ds)  # DistributedSampler repeats a few to even out
    assert sorted(set(seen)) == sorted(_identities(ds)) and len(seen) == len(ds) + padded


def assert_one_request_per_sample(
    ds: IndexedWebDataset, count: Callable[[], int], indexes: list[int]
) -> None:
    """Reading each of ``indexes`` makes exactly one request (``count()`` counts them)."""
    for i in indexes:
        before = count()
        ds[i]
        assert count() - before == 1, f"sample {i}: {count() - before} requests"
