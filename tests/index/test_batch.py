"""``get_batch`` / ``__getitems__`` against ``ds[i]`` and the sequential reader, on thousands of
generated batches over generated shards; stale and short shards; handlers; DataLoader.

Local shards are read as memory-map slices; the same files through :class:`PreadOpener`
(``pread://``) take the remote path: one ``read_batch`` per batch, coalesced concurrent ranged
reads, with the planner's settings varied per batch (tiny spans force huge samples to be read
alone; gap -1 never merges).
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.index.conftest import PreadOpener
from tests.support import indexcheck
from wds_cloud.core.handlers import ContinueHandler, StopHandler
from wds_cloud.errors import ShardReadError
from wds_cloud.index.build import build_index
from wds_cloud.index.indexed import IndexedWebDataset
from wds_cloud.openers.capabilities import BatchReader
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.openers.streams.batchread import BatchConfig


def _pread_registry() -> tuple[OpenerRegistry, PreadOpener]:
    registry = OpenerRegistry()
    opener = PreadOpener()
    registry.register("pread", opener)
    return registry, opener


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[dict[str, Any]]]:
    """80 generated shards (several members per sample, tiny to large members, skipped entries
    between samples, every tar producer), indexed, and the reader's samples."""
    root = tmp_path_factory.mktemp("batch")
    urls = []
    for name, blob in indexcheck.indexable_archives(80):
        (root / name).write_bytes(blob)
        urls.append(str(root / name))
    build_index(urls, json=str(root / "index.json"))
    return urls, indexcheck.sequential_samples(urls, OpenerRegistry())


def _batch(rng: random.Random, n: int) -> list[int]:
    """Random indices, a run across shard boundaries, duplicates, reversed, negative ones."""
    size = rng.randint(1, 80)
    kind = rng.randrange(5)
    if kind == 0:
        return [rng.randrange(n) for _ in range(size)]
    start = rng.randrange(n)
    run = [(start + k) % n for k in range(size)]
    if kind == 1:
        return run
    if kind == 2:
        return run[::-1]
    if kind == 3:
        return [rng.choice(run) for _ in range(size)]  # duplicates
    return [i - n if rng.random() < 0.5 else i for i in run]


def _remote_view(sample: dict[str, Any]) -> dict[str, Any]:
    """A local sample as the pread:// dataset yields it (its URL, no local path)."""
    out = {k: v for k, v in sample.items() if k != "__local_path__"}
    out["__url__"] = "pread://" + sample["__url__"]
    return out


@pytest.mark.parametrize("block", range(4))
def test_get_batch_is_ds_i_and_the_reader_on_thousands_of_batches(shards: Any, block: int) -> None:
    urls, want = shards
    local = IndexedWebDataset(urls)
    registry, _ = _pread_registry()
    remote_urls = ["pread://" + u for u in urls]
    configs = [
        BatchConfig(concurrency=c, coalesce_gap=g, max_span=s)
        for c, g, s in [(32, 65536, 8 << 20), (3, 0, 4096), (1, -1, 1 << 20), (8, 1 << 20, 1024)]
    ]
    remote = [IndexedWebDataset(remote_urls, registry=registry, batch=c) for c in configs]
    want_remote = [_remote_view(s) for s in want]
    n = len(want)
    for seed in range(block * 500, (block + 1) * 500):
        rng = random.Random(seed)
        indices = _batch(rng, n)
        expected = [want[i] for i in indices]
        assert local.get_batch(indices) == expected, seed
        ds = remote[seed % len(remote)]
        assert ds.get_batch(indices) == [want_remote[i] for i in indices], seed
        if seed % 50 == 0:
            assert local.__getitems__(indices) == [local[i] for i in indices]
            assert ds.get_batch(indices) == [ds[i] for i in indices]


def test_the_shared_read_batch_is_a_batch_reader_and_coalesces(shards: Any) -> None:
    urls, _ = shards
    registry, opener = _pread_registry()
    assert registry.capability("pread://x", BatchReader) is opener
    ds = IndexedWebDataset(["pread://" + u for u in urls], registry=registry)
    first, second = ds.starts[0], ds.starts[1]
    opener.reads = 0
    ds.get_batch(range(first, second))  # a whole shard's samples: one read
    assert opener.reads == 1
    opener.reads = 0
    ds.get_batch([first, second, first + 1])  # two shards: two reads
    assert opener.reads == 2
    never = IndexedWebDataset(ds.urls, registry=registry, batch={"coalesce_gap": -1})
    opener.reads = 0
    never.get_batch(range(first, second))
    assert opener.reads == second - first


def test_local_batches_start_no_thread(shards: Any, new_threads: Any) -> None:
    urls, want = shards
    ds = IndexedWebDataset(urls)
    assert ds.get_batch(range(0, len(want), 7)) == want[::7]
    assert not new_threads("wds-batch")


def _stale_copy(src: list[str], root: Path) -> tuple[list[str], int]:
    """Copies of two shards, indexed, then the second rewritten with other members."""
    out = []
    for i, url in enumerate(src[:2]):
        dst = root / f"s{i}.tar"
        shutil.copy(url, dst)
        out.append(str(dst))
    build_index(out, json=False)
    idx = Path(out[1][:-4] + ".idx").read_bytes()
    Path(out[1]).write_bytes(b"\0" * os.path.getsize(out[1]))  # same size, no headers
    return out, int(idx.split(b"\n")[0].split()[1])


@pytest.mark.parametrize("scheme", ["", "pread://"])
def test_a_stale_index_raises_naming_url_and_offset_or_is_skipped(
    shards: Any, tmp_path: Path, scheme: str
) -> None:
    urls, _ = shards
    paths, nsecond = _stale_copy(urls, tmp_path)
    registry, _ = _pread_registry()
    ds = IndexedWebDataset([scheme + p for p in paths], registry=registry)
    first = ds.starts[1]
    batch = [0, first, 1]
    with pytest.raises(ShardReadError, match="does not match the shard") as info:
        ds.get_batch(batch)
    assert info.value.url == scheme + paths[1] and info.value.offset is not None
    assert str(info.value.offset) in str(info.value)
    skip = ContinueHandler()
    assert ds.get_batch(batch, handler=skip) == [ds[0], ds[1]]
    assert skip.count == 1 and isinstance(skip.last, ShardReadError)
    stop = StopHandler()
    assert ds.get_batch(batch, handler=stop) == [ds[0]] and stop.count == 1
    counted = IndexedWebDataset(ds.urls, registry=registry, handler=ContinueHandler())
    assert len(counted.get_batch(range(len(counted)))) == len(counted) - nsecond
    assert counted.handler.count == nsecond


def test_a_short_shard_raises_the_range_error_or_skips_only_its_samples(
    shards: Any, tmp_path: Path
) -> None:
    urls, _ = shards
    paths = []
    for i, url in enumerate(urls[:2]):
        shutil.copy(url, tmp_path / f"t{i}.tar")
        paths.append(str(tmp_path / f"t{i}.tar"))
    build_index(paths, json=False)
    registry, _ = _pread_registry()
    ds = IndexedWebDataset(["pread://" + p for p in paths], registry=registry)
    want = ds.get_batch(range(len(ds)))
    size = os.path.getsize(paths[1])
    with open(paths[1], "r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(ShardReadError, match="range ends") as info:
        ds.get_batch(range(len(ds)))
    assert info.value.url == "pread://" + paths[1] and info.value.offset is not None
    skip = ContinueHandler()
    got = ds.get_batch(range(len(ds)), handler=skip)
    assert got == want[: len(got)] and skip.count == len(ds) - len(got) > 0
    assert all(isinstance(e, ShardReadError) for e in [skip.last])


def test_iter_batches_reads_ahead_a_bounded_number_of_batches(shards: Any) -> None:
    urls, want = shards
    registry, _ = _pread_registry()
    ds = IndexedWebDataset(["pread://" + u for u in urls], registry=registry)
    rng = random.Random(5)
    batches = [_batch(rng, len(want)) for _ in range(30)]
    for readahead in (0, 1, 3):
        pulled = 0

        def source() -> Any:
            nonlocal pulled
            for b in batches:
                pulled += 1
                yield b

        got = []
        for k, batch in enumerate(ds.iter_batches(source(), readahead=readahead)):
            assert pulled <= k + 1 + readahead  # never more than readahead batches ahead
            got.append(batch)
        assert got == [ds.get_batch(b) for b in batches]


def test_batch_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch, shards: Any) -> None:
    monkeypatch.setenv("WDS_CLOUD_BATCH_CONCURRENCY", "5")
    monkeypatch.setenv("WDS_CLOUD_BATCH_COALESCE_GAP", "1K")
    ds = IndexedWebDataset(shards[0][:2], batch={"max_span": 4096})
    assert ds.batch == BatchConfig(concurrency=5, coalesce_gap=1024, max_span=4096, readahead=2)


def test_dataloader_batch_sampler_calls_getitems(shards: Any) -> None:
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler

    import wds_cloud as wds

    class Counting(wds.IndexedWebDataset):
        batches = 0
        items = 0

        def __getitems__(self, indices: Any) -> list[Any]:
            Counting.batches += 1
            return super().__getitems__(indices)

        def __getitem__(self, index: int) -> Any:
            Counting.items += 1
            return super().__getitem__(index)

    urls, want = shards
    ds = Counting(urls)
    sampler = BatchSampler(RandomSampler(ds), batch_size=16, drop_last=False)
    loader = DataLoader(ds, batch_sampler=sampler, collate_fn=indexcheck.url_and_key)
    got = [item for batch in loader for item in batch]
    assert Counting.batches == len(sampler) and Counting.items == 0
    assert sorted(got) == sorted((s["__url__"], s["__key__"]) for s in want)


def test_an_impossible_index_entry_is_handled_like_a_stale_one(shards: Any, tmp_path: Path) -> None:
    urls, _ = shards
    path = tmp_path / "x.tar"
    shutil.copy(urls[0], path)
    build_index([str(path)], json=False)
    idx = tmp_path / "x.idx"
    head, first, *rest = idx.read_bytes().split(b"\n")
    fields = first.split(b" ")
    fields[1] = b"0"  # the first member's data at byte 0: no room for its header
    idx.write_bytes(b"\n".join([head, b" ".join(fields), *rest]))
    ds = IndexedWebDataset([str(path)])
    with pytest.raises(ShardReadError, match="offset before the start") as info:
        ds.get_batch([1, 0])
    assert info.value.url == str(path) and info.value.offset == 0
    skip = ContinueHandler()
    assert ds.get_batch([1, 0, 1], handler=skip) == [ds[1], ds[1]] and skip.count == 1
