"""make_loader(executor="threads"): the same samples in the same order as processes.

Differential: for the same seed, the thread executor's batches equal the process executor's
(same ``num_workers``) over generated pipelines on local shards; the backends are in
``test_threads_backends.py``, resume after SIGKILL in ``test_threads_resume.py``.
"""

from __future__ import annotations

import io
import itertools
import logging
import os
import random
import tarfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

import wds_cloud as wds
from wds_cloud.core.decodehandlers import DecodingError
from wds_cloud.core.handlers import ContinueHandler
from wds_cloud.core.threadworkers import THREAD_PREFIX, ThreadWorkers
from wds_cloud.errors import ConfigError
from wds_cloud.pytorch import WebDataset
from wds_cloud.pytorch.builder import make_loader
from wds_cloud.pytorch.threadloader import GilWatch, ThreadLoader

NSHARDS = 5
PER_SHARD = 9


def _jpeg(index: int) -> bytes:
    rng = np.random.default_rng(index)
    pixels = rng.integers(0, 255, size=(12, 16, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=90)
    return out.getvalue()


def write_image_shard(path: Path, first: int, count: int) -> None:
    """``count`` samples ``.jpg`` (12x16 RGB), ``.cls`` and ``.txt`` from index ``first``."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for index in range(first, first + count):
            for ext, data in (
                ("jpg", _jpeg(index)),
                ("cls", str(index).encode()),
                ("txt", f"sample {index}".encode()),
            ):
                info = tarfile.TarInfo(f"k{index:04d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def image_shards(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("thread-shards")
    urls = []
    for s in range(NSHARDS):
        path = root / f"img-{s:03d}.tar"
        write_image_shard(path, s * PER_SHARD, PER_SHARD)
        urls.append(str(path))
    return urls


def _odd_cls(sample: Any) -> bool:
    return int(sample[1]) % 3 != 0


def _plus_one(sample: Any) -> Any:
    image, cls = sample
    return image, cls + 1


def _batches(loader: Any, limit: int | None = None) -> list[list[Any]]:
    """Each batch as plain lists (a tensor as its dtype, shape and values), for comparisons."""
    out = []
    for batch in itertools.islice(loader, limit):
        out.append(
            [
                (str(x.dtype), tuple(x.shape), x.tolist())
                if isinstance(x, torch.Tensor)
                else list(x)
                for x in batch
            ]
        )
    return out


def _pipeline(rng: random.Random) -> dict[str, Any]:
    """A random make_loader configuration: shuffle, decode, select, map, batch sizes, window."""
    kw: dict[str, Any] = {
        "batch_size": rng.choice([1, 4, 7]),
        "inner_batch": rng.choice([None, 3]),
        "shuffle_buffer": rng.choice([0, 5, 20]),
        "shardshuffle": rng.random() < 0.7,
        "seed": rng.randrange(100),
        "decode": rng.choice(["rgb8", "torchrgb8", "pil"]),
        "to_tuple": "jpg cls",
        "num_workers": rng.choice([1, 2, 3]),
    }
    if kw["decode"] == "pil":
        kw["decode"] = ("pil",)
        kw["to_tuple"] = ("txt", "cls")
    maps = rng.choice(["none", "map", "select"])
    if maps == "map":
        kw["map"] = _plus_one
    elif maps == "select":
        kw["map"] = _select_map
    if rng.random() < 0.4:
        kw["epoch_size"] = rng.choice([10, 33, 70])
    return kw


def _select_map(sample: Any) -> Any:
    """A select as a map: None drops the sample."""
    return sample if _odd_cls(sample) else None


@pytest.mark.parametrize("case", range(10))
def test_threads_equal_processes_generated(image_shards: list[str], case: int) -> None:
    kw = _pipeline(random.Random(1000 + case))
    want = _batches(make_loader(image_shards, executor="processes", **kw))
    got = _batches(make_loader(image_shards, executor="threads", **kw))
    assert got == want, kw
    assert want  # the configuration delivers something


def test_threads_equal_processes_unbatched_pipeline(image_shards: list[str]) -> None:
    """The hand-built form: ThreadLoader vs WebLoader over the same dataset."""
    from wds_cloud.pytorch import WebLoader

    def build(reader: Any) -> Any:
        return reader.unbatched().shuffle(7).batched(5)

    ds = WebDataset(image_shards, seed=4).shuffle(6).decode("rgb8").to_tuple("jpg", "cls")
    ds = ds.select(_odd_cls).batched(4)
    want = _batches(build(WebLoader(ds, batch_size=None, num_workers=2)))
    got = _batches(build(wds.ThreadLoader(ds, num_workers=2)))  # the public name
    assert got == want and want


def test_threads_epochs_and_set_epoch(image_shards: list[str]) -> None:
    """Successive iter()s (the shard shuffle's epochs) match too."""
    kw = {"batch_size": 6, "num_workers": 2, "seed": 9, "to_tuple": "cls", "shuffle_buffer": 8}
    procs = make_loader(image_shards, executor="processes", **kw)
    threads = make_loader(image_shards, executor="threads", **kw)
    for _ in range(2):
        assert _batches(threads) == _batches(procs)


def test_bad_executor_is_named() -> None:
    with pytest.raises(ConfigError, match="'fibers'"):
        make_loader("x.tar", batch_size=2, executor="fibers")
    with pytest.raises(ConfigError, match="reader threads"):
        make_loader("x.tar", batch_size=2, executor="threads", num_workers=0)
    with pytest.raises(ConfigError, match="order='global'"):
        make_loader("x.tar", batch_size=2, executor="threads", order="global")


def _bad_map(sample: Any) -> Any:
    if int(sample["cls"]) == 13:
        raise ValueError("cannot map 13")
    return sample


def test_map_error_names_key_and_url(image_shards: list[str]) -> None:
    loader = make_loader(
        image_shards,
        batch_size=4,
        num_workers=2,
        decode="rgb8",
        map=_bad_map,
        executor="threads",
    )
    with pytest.raises(ValueError, match="cannot map 13") as info:
        list(loader)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "_bad_map() of sample 'k0013'" in notes and "img-001.tar" in notes
    assert not _reader_threads()


def test_decode_error_names_key_and_url(image_shards: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar"
    with tarfile.open(bad, "w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in (
            ("k9000.jpg", _jpeg(1)),
            ("k9000.cls", b"1"),
            ("k9001.jpg", b"not a jpeg at all"),
            ("k9001.cls", b"2"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    loader = make_loader(
        [*image_shards, str(bad)],
        batch_size=4,
        num_workers=2,
        decode="rgb8",
        to_tuple="jpg cls",
        executor="threads",
    )
    with pytest.raises(DecodingError) as info:
        list(loader)
    assert info.value.key == "k9001" and info.value.url == str(bad)
    assert not _reader_threads()


def _bad_cls(sample: Any) -> Any:
    if int(sample["cls"]) % 4 == 0:
        raise ValueError("skip me")
    return sample


def test_counting_handler_counts_in_this_process(image_shards: list[str]) -> None:
    handler = ContinueHandler()
    ds = WebDataset(image_shards, shardshuffle=False).map(_bad_cls, handler=handler)
    total = NSHARDS * PER_SHARD
    delivered = sum(1 for _ in ThreadLoader(ds, num_workers=3))
    skipped = len(range(0, total, 4))
    assert delivered == total - skipped
    assert handler.count == skipped  # counted by the readers, read here


def _reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX)]


def _fds() -> set[str]:
    return {p.name for p in Path("/proc/self/fd").iterdir()}


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_no_thread_or_fd_left_after_close_or_gc(image_shards: list[str]) -> None:
    import gc

    kw = {
        "batch_size": 2,
        "num_workers": 3,
        "decode": "rgb8",
        "to_tuple": "jpg cls",
        "shuffle_buffer": 0,  # a full buffer would have read every shard before a batch
    }
    list(make_loader(image_shards, executor="threads", **kw))  # warm imports
    before = _fds()
    assert not _reader_threads()
    # closed mid-epoch
    loader = make_loader(image_shards, executor="threads", **kw)
    it = iter(loader)
    next(it)
    assert len(_reader_threads()) == 3
    it.close()  # type: ignore[attr-defined]  # a generator: the pipeline's iterator
    del it
    gc.collect()
    assert not _reader_threads()
    assert _fds() <= before
    # the loader closed mid-epoch while its iterator is still held
    loader = make_loader(image_shards, executor="threads", **kw)
    it = iter(loader)
    next(it)
    assert _reader_threads()
    loader.close()
    assert not _reader_threads()
    with pytest.raises(StopIteration):  # what the readers had queued is dropped too
        while True:
            next(it)
    del it
    assert _fds() <= before
    # dropped mid-epoch, never closed
    loader = make_loader(image_shards, executor="threads", **kw)
    it = iter(loader)
    next(it)
    assert _reader_threads()
    del it, loader
    gc.collect()
    assert not _reader_threads()
    assert _fds() <= before


def test_thread_workers_round_robin_and_error() -> None:
    workers = ThreadWorkers([range(0, 3), range(10, 11), range(20, 24)], depth=1)
    assert list(workers) == [0, 10, 20, 1, 21, 2, 22, 23]

    def boom() -> Any:
        yield 1
        raise KeyError("reader broke")

    workers = ThreadWorkers([boom(), itertools.count()], depth=2, name="t")
    with pytest.raises(KeyError, match="reader broke"):
        list(workers)
    assert not _reader_threads()


def _pure_python(sample: Any) -> Any:
    total = 0
    for i in range(20000):
        total += i
    return sample


def test_gil_holding_map_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    watch = GilWatch(_pure_python, readers=2)
    if not watch.on:
        pytest.skip("needs 2 or more cores")
    cores = os.cpu_count() or 1
    if os.getloadavg()[0] > cores / 2:  # busy cores hide the GIL (GilWatch says so)
        pytest.skip(f"machine busy (load {os.getloadavg()[0]:.1f} on {cores} cores)")
    threads = [threading.Thread(target=lambda: [watch(i) for i in range(60)]) for _ in range(2)]
    with caplog.at_level(logging.WARNING, logger="wds_cloud.pytorch.threadloader"):
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert watch.warned
    assert "_pure_python holds the GIL" in caplog.text


def test_gil_releasing_map_is_not_reported() -> None:
    def sleepy(sample: Any) -> Any:  # waits without the GIL (as network reads do)
        threading.Event().wait(0.002)
        return sample

    watch = GilWatch(sleepy, readers=2)
    threads = [threading.Thread(target=lambda: [watch(i) for i in range(40)]) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not watch.warned


def test_profile_reports_thread_stages(image_shards: list[str]) -> None:
    loader = make_loader(
        image_shards,
        batch_size=4,
        num_workers=2,
        decode="rgb8",
        to_tuple="jpg cls",
        profile=True,
        executor="threads",
    )
    assert sum(len(b[1]) for b in loader) == NSHARDS * PER_SHARD
    report = loader.profile_report()
    main = [p for p in report.processes if p.role == "main"]
    assert main and main[0].pid == os.getpid()
    assert main[0].timers["open"].count == NSHARDS  # the readers record in this process


def test_device_prefetcher_and_state_dict(image_shards: list[str]) -> None:
    """device= and prefetch_to_device= wrap the thread loader as they wrap the process one;
    its state_dict() mid-epoch resumes the rest exactly (in process, here)."""
    kw: dict[str, Any] = {
        "batch_size": 4,
        "num_workers": 2,
        "seed": 5,
        "decode": "torchrgb8",
        "to_tuple": "jpg cls",
        "shuffle_buffer": 6,
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "prefetch_to_device": True,
    }
    want = _batches(make_loader(image_shards, executor="processes", **kw))
    loader = make_loader(image_shards, executor="threads", **kw)
    assert _batches(loader) == want
    it = iter(loader)
    head = _batches(it, 3)
    state = loader.state_dict()
    del it
    resumed = make_loader(image_shards, executor="threads", **kw)
    resumed.load_state_dict(state)
    rest = _batches(resumed)
    delivered = [c for b in head + rest for c in b[1][2]]
    assert sorted(delivered) == list(range(NSHARDS * PER_SHARD))


class _Locked:
    """A map holding a lock: not copyable, as a reader's copy of the dataset needs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, sample: Any) -> Any:
        return sample


def test_uncopyable_dataset_is_a_config_error(image_shards: list[str]) -> None:
    ds = WebDataset(image_shards).map(_Locked())
    with pytest.raises(ConfigError, match=r"copying WebDataset failed.*lock"):
        list(ThreadLoader(ds, num_workers=2))


def test_ranks_resampled_and_dataset_windows(
    image_shards: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Node splitting (RANK/WORLD_SIZE), resampled shards, a per-reader with_epoch window."""
    from wds_cloud.core.shards import split_by_node
    from wds_cloud.pytorch import WebLoader

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    kw: dict[str, Any] = {
        "batch_size": 3,
        "num_workers": 2,
        "seed": 8,
        "to_tuple": "cls",
        "nodesplitter": split_by_node,
    }
    want = _batches(make_loader(image_shards[:4], executor="processes", **kw))
    assert _batches(make_loader(image_shards[:4], executor="threads", **kw)) == want
    kw.update(resampled=True, epoch_size=25)
    want = _batches(make_loader(image_shards, executor="processes", **kw))
    assert _batches(make_loader(image_shards, executor="threads", **kw)) == want
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    ds = WebDataset(image_shards, seed=2).shuffle(4).to_tuple("cls").with_epoch(7).batched(2)
    want = _batches(WebLoader(ds, batch_size=None, num_workers=2).unbatched().batched(4))
    got = _batches(ThreadLoader(ds, num_workers=2).unbatched().batched(4))
    assert got == want
    assert sum(len(b[0]) for b in got) == 2 * 7 * 2  # 7 batches of 2 per reader


@pytest.mark.parametrize(("first", "then"), [("processes", "threads"), ("threads", "processes")])
def test_state_moves_between_executors(image_shards: list[str], first: str, then: str) -> None:
    """A state taken on one executor resumes on the other (same readers): exactly once."""
    kw: dict[str, Any] = {"batch_size": 4, "num_workers": 2, "seed": 6, "to_tuple": "cls"}
    kw["shuffle_buffer"] = 5
    loader = make_loader(image_shards, executor=first, **kw)
    it = iter(loader)
    head = _batches(it, 4)
    state = loader.state_dict()
    del it
    resumed = make_loader(image_shards, executor=then, **kw)
    resumed.load_state_dict(state)
    delivered = [int(c) for b in head + _batches(resumed) for c in b[0]]
    assert sorted(delivered) == list(range(NSHARDS * PER_SHARD))


def test_profile_names_the_hand_over_transfer() -> None:
    """The training thread waiting for a reader's batch is charged to "transfer", as waiting
    for a worker process is."""
    from wds_cloud.observe.profile import _rule

    assert _rule(ThreadWorkers.__next__.__code__) == "transfer"


@pytest.mark.parametrize(
    ("cpu_per_call", "warned"),
    [(0.005, True), (0.0095, False), (0.0002, False)],  # GIL-bound, GIL-free C, I/O wait
)
def test_gil_rule_on_given_measurements(cpu_per_call: float, warned: bool) -> None:
    """The rule on fixed measurements: 2 threads, calls of 10 ms each, back to back on both
    threads (so the span is half the summed wall time): CPU 5 ms a call is one core shared
    by two threads (flagged); 9.5 ms is two cores (not); 0.2 ms is waiting (not)."""
    watch = GilWatch(_pure_python, readers=2)
    watch.on = True  # measured here whatever this machine's cores
    for i in range(40):
        start = (i // 2) * 0.01  # two threads, each call 10 ms, side by side
        watch._record(start, start + 0.01, cpu_per_call)
    assert watch.measured is not None and not watch.on
    assert watch.warned is warned


def test_worker_info_in_reader_threads() -> None:
    """Inside reader ``i``, the core's worker_info() says worker ``i`` of ``n``."""
    from wds_cloud.core.shards import worker_info

    def scope() -> Any:
        yield worker_info()[2:]

    assert sorted(ThreadWorkers([scope(), scope(), scope()])) == [(0, 3), (1, 3), (2, 3)]
    assert worker_info()[2:] == (0, 1)  # not in a reader
