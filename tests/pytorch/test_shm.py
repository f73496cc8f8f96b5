"""Worker batches through the shared-memory arena (``wds_cloud.pytorch.shm``), with real
DataLoader workers on generated shards: every batch equal to the in-process loader's, kept
batches keep their values, writes stay in their batch, nothing leaks."""

from __future__ import annotations

import gc
import io
import os
import pickle
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import wds_cloud as wds
from tests.support import ownership
from tests.support.ownership import Detached
from tests.support.tarbuild import tar_bytes
from wds_cloud.core.collate import torch_collate
from wds_cloud.pytorch.builder import make_loader
from wds_cloud.pytorch.shm import ShmCollate, shm_batches_enabled
from wds_cloud.resume.track import TaggedCollate

from . import shm_helpers

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="needs memfd_create")

SHARDS = 4
PER_SHARD = 12
MEMFD = "memfd:wds_cloud-batches"

# (dtype, per-sample shape): images of several sizes, floats, ints, bools, 0-d values
KINDS = [
    ("uint8", (32, 48, 3)),
    ("uint8", (7, 5, 3)),
    ("float32", (3, 4)),
    ("float64", (5,)),
    ("int16", (2, 3)),
    ("bool", (4,)),
    ("float16", ()),
]


def _npy(a: np.ndarray) -> bytes:
    stream = io.BytesIO()
    np.save(stream, a)
    return stream.getvalue()


def _value(kind: int, index: int) -> np.ndarray:
    dtype, shape = KINDS[kind]
    rng = np.random.default_rng(1000 * kind + index)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith("float"):
        return rng.standard_normal(size=shape).astype(dtype)
    return rng.integers(0, 200, size=shape).astype(dtype)


@pytest.fixture(scope="module")
def kind_shards(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[str]]:
    """Per kind, ``SHARDS`` shards: ``.npy`` (that kind), ``.cls``, ``.txt``, ``.bin``."""
    root = tmp_path_factory.mktemp("shm")
    out: dict[int, list[str]] = {}
    for kind in range(len(KINDS)):
        urls = []
        for s in range(SHARDS):
            members = []
            for i in range(PER_SHARD):
                index = s * PER_SHARD + i
                key = f"k{index:04d}"
                members += [
                    (f"{key}.npy", _npy(_value(kind, index))),
                    (f"{key}.cls", str(index).encode()),
                    (f"{key}.txt", f"sample {index}".encode()),
                    (f"{key}.bin", bytes([index % 256]) * (index % 5)),
                ]
            path = Path(root, f"kind{kind}-{s}.tar")
            path.write_bytes(tar_bytes(members))
            urls.append(str(path))
        out[kind] = urls
    return out


def _dataset(urls: list[str], shape: str, batch: int = 5) -> Any:
    ds = wds.WebDataset(urls, shardshuffle=False).decode()
    if shape == "tuple":
        return ds.to_tuple("__key__", "npy", "cls", "txt", "bin").batched(batch)
    if shape == "dict":
        return ds.batched(batch)
    # torch tensors collated in the worker (one of them bfloat16, which numpy lacks)
    return ds.map(shm_helpers.key_npy_bf16_cls).batched(batch, collation_fn=torch_collate)


def _first_key(batch: Any) -> str:
    keys = batch["__key__"] if isinstance(batch, dict) else batch[0]
    return str(keys[0])


def _reference(urls: list[str], shape: str, batch: int = 5) -> dict[str, Any]:
    """The in-process loader's batches over each of 2 workers' shards (``urls[w::2]``)."""
    out = {}
    for w in range(2):
        loader = wds.WebLoader(_dataset(urls[w::2], shape, batch), batch_size=None, num_workers=0)
        out.update({_first_key(b): b for b in loader})
    return out


def _assert_same(got: Any, want: Any) -> None:
    assert type(got) is type(want)
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            _assert_same(got[k], want[k])
    elif isinstance(want, list | tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _assert_same(g, w)
    else:
        assert got == want


def _tensors(batch: Any) -> list[torch.Tensor]:
    values = batch.values() if isinstance(batch, dict) else batch
    return [v for v in values if isinstance(v, torch.Tensor)]


def _from_arena(batch: Any) -> bool:
    """Tensors of the arena path view a memfd mapping, not a torch shared segment."""
    tensors = _tensors(batch)
    return bool(tensors) and not any(t.is_shared() for t in tensors)


def _memfd_mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum(MEMFD in line for line in f)


def _memfd_fds() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += MEMFD in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return n


@pytest.fixture
def no_leak() -> Any:
    """No /dev/shm segment made by this test's processes (this one and its DataLoader workers)
    left, no memfd mapping or descriptor left, once batches are gone. Segments other programs
    make meanwhile are not this test's (``tests/support/ownership.py``)."""
    gc.collect()
    before, maps, fds = ownership.shm_segments(), _memfd_mappings(), _memfd_fds()
    with ownership.ProcessTree() as tree:
        yield
    gc.collect()
    # multiprocessing's semaphores (``sem.mp-*``, held by this process) are left out: spawn
    # contexts make named ones, unlinked by its resource tracker when they are collected,
    # which may come a moment after the loader is gone
    left = {n for n in ownership.shm_left(before, tree) if not n.startswith("sem.")}
    assert left == set(), f"left in /dev/shm: {sorted(left)}"
    assert _memfd_mappings() <= maps
    assert _memfd_fds() <= fds


@pytest.mark.parametrize("shape", ["tuple", "dict", "torch"])
@pytest.mark.parametrize("kind", range(len(KINDS)))
def test_batches_equal_in_process_loader(
    kind_shards: dict[int, list[str]], kind: int, shape: str, no_leak: None
) -> None:
    urls = kind_shards[kind]
    want = _reference(urls, shape)
    loader = wds.WebLoader(_dataset(urls, shape), batch_size=None, num_workers=2)
    seen = []
    arena = 0
    for batch in loader:
        key = _first_key(batch)
        _assert_same(batch, want[key])
        seen.append(key)
        arena += _from_arena(batch)
    assert sorted(seen) == sorted(want)
    assert arena > 0  # the arena path ran


def test_kept_batches_keep_their_values(kind_shards: dict[int, list[str]], no_leak: None) -> None:
    urls = kind_shards[0]
    want = _reference(urls, "tuple", batch=2)
    loader = wds.WebLoader(_dataset(urls, "tuple", batch=2), batch_size=None, num_workers=2)
    kept = list(loader)  # 24 batches alive: slots run out, the rest take torch's path
    assert len(kept) == len(want)
    arena = [_from_arena(b) for b in kept]
    assert any(arena) and not all(arena)
    for batch in kept:
        _assert_same(batch, want[_first_key(batch)])
    del kept, batch


def test_a_segment_another_program_makes_meanwhile_is_not_this_test_s(
    kind_shards: dict[int, list[str]], unrelated_process: Detached, no_leak: None
) -> None:
    """A user's DataLoader beside the suite makes ``torch_<its pid>_*`` segments while this
    test's loader runs: ``no_leak`` (which checks while the segment is still there) passes."""
    loader = wds.WebLoader(_dataset(kind_shards[0], "tuple"), batch_size=None, num_workers=2)
    made = [unrelated_process.make_segment() for i, _ in enumerate(loader) if i == 1]
    assert made and made[0] in ownership.shm_segments()


def test_writes_stay_in_their_batch(kind_shards: dict[int, list[str]], no_leak: None) -> None:
    urls = kind_shards[2]
    want = _reference(urls, "tuple", batch=2)
    loader = wds.WebLoader(_dataset(urls, "tuple", batch=2), batch_size=None, num_workers=2)
    held = []
    for _ in range(2):
        for batch in loader:
            _assert_same(batch, want[_first_key(batch)])  # not what an earlier batch wrote
            batch[1].fill_(-7.0)
            batch[2].fill_(-1)
            if len(held) < 3:
                held.append(batch)
    for batch in held:
        assert bool((batch[1] == -7.0).all()) and bool((batch[2] == -1).all())
    del held, batch


def test_rows_views_of_make_loader_batches(
    kind_shards: dict[int, list[str]], no_leak: None
) -> None:
    urls = kind_shards[0]
    kw: dict[str, Any] = dict(batch_size=4, shuffle_buffer=0, shardshuffle=False, decode="rgb8")
    kw["to_tuple"] = "__key__ npy cls"

    def batches(workers: int) -> dict[str, Any]:
        loader = make_loader(urls, num_workers=workers, **kw)
        return {str(b[0][0]): b for b in loader}

    got, want = batches(2), batches(0)
    assert got.keys() == want.keys()
    for key, batch in got.items():
        _assert_same(batch, want[key])
    assert any(_from_arena(b) for b in got.values())
    del got, batch


@pytest.mark.slow
def test_spawn_and_persistent_workers_across_epochs(
    kind_shards: dict[int, list[str]], no_leak: None
) -> None:
    urls = kind_shards[3]
    want = _reference(urls, "dict")
    loader = wds.WebLoader(
        _dataset(urls, "dict"),
        batch_size=None,
        num_workers=2,
        multiprocessing_context="spawn",
        persistent_workers=True,
    )
    for _ in range(3):
        n = 0
        for batch in loader:
            _assert_same(batch, want[_first_key(batch)])
            n += 1
        assert n == len(want)
    loader.loader._iterator._shutdown_workers()  # type: ignore[union-attr]
    del loader, batch


@pytest.mark.filterwarnings("ignore:.pin_memory. argument is set as true")
def test_pin_memory_and_resume_tracking(kind_shards: dict[int, list[str]], no_leak: None) -> None:
    urls = kind_shards[4]
    want = _reference(urls, "tuple")
    loader = wds.WebLoader(_dataset(urls, "tuple"), batch_size=None, num_workers=2, pin_memory=True)
    got = {_first_key(b): b for b in loader}
    assert got.keys() == want.keys()
    for key, batch in got.items():
        _assert_same(batch, want[key])
    # resume tracking wraps the arena's collate; Tagged values carry the arena batches
    fn = loader.loader.collate_fn
    if isinstance(fn, TaggedCollate):
        assert isinstance(fn.fn, ShmCollate)
    else:
        assert isinstance(fn, ShmCollate)
    del got, batch


def test_break_exception_and_del_loader(kind_shards: dict[int, list[str]], no_leak: None) -> None:
    urls = kind_shards[1]
    loader = wds.WebLoader(_dataset(urls, "tuple"), batch_size=None, num_workers=2)
    for i, _ in enumerate(loader):
        if i == 2:
            break
    with pytest.raises(ZeroDivisionError):
        for i, _ in enumerate(loader):
            if i == 3:
                raise ZeroDivisionError
    it = iter(loader)
    next(it)
    del it, loader


def test_worker_killed(kind_shards: dict[int, list[str]], no_leak: None) -> None:
    urls = kind_shards[0]
    loader = wds.WebLoader(_dataset(urls, "tuple", batch=2), batch_size=None, num_workers=2)
    it: Any = iter(loader.loader)
    batch = next(it)
    assert _from_arena(batch)
    # torch's SIGCHLD handler may raise as soon as the worker is gone: kill inside the block
    with pytest.raises(RuntimeError, match=r"killed|exited unexpectedly"):
        os.kill(it._workers[0].pid, signal.SIGKILL)
        it._workers[0].join(30)
        for batch in it:  # noqa: B007 (the last batch is dropped below)
            pass
    del it, loader, batch


def test_switches(kind_shards: dict[int, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    ds = _dataset(kind_shards[0], "tuple")
    assert isinstance(
        wds.WebLoader(ds, batch_size=None, num_workers=2).loader.collate_fn, ShmCollate
    )
    off = wds.WebLoader(ds, batch_size=None, num_workers=2, shm_batches=False)
    assert not isinstance(off.loader.collate_fn, ShmCollate)
    assert not isinstance(wds.WebLoader(ds, batch_size=None).loader.collate_fn, ShmCollate)
    monkeypatch.setenv("WDS_CLOUD_SHM_BATCHES", "0")
    assert not shm_batches_enabled()
    assert shm_batches_enabled(True)
    loader = wds.WebLoader(ds, batch_size=None, num_workers=2)
    assert not isinstance(loader.loader.collate_fn, ShmCollate)
    assert not any(_from_arena(b) for b in loader)


def test_collate_outside_workers_and_pickle() -> None:
    fn = ShmCollate(torch_collate, slots=3)
    batch = fn([(np.zeros(2, np.uint8), 1), (np.ones(2, np.uint8), 2)])
    assert isinstance(batch[0], torch.Tensor) and batch[1].tolist() == [1, 2]
    clone = pickle.loads(pickle.dumps(fn))
    assert clone.slots == 3 and clone.fn is torch_collate and clone._arena is None


def test_pack_unpickles_to_the_batch(no_leak: None) -> None:
    fn = ShmCollate(lambda x: x, slots=2)
    nested = {
        "a": torch.arange(12, dtype=torch.int64).reshape(3, 4),
        "b": [torch.tensor(3.5), "text", b"raw", torch.zeros(0)],
        "c": (torch.ones(2, 2, dtype=torch.bfloat16), torch.arange(6).reshape(2, 3).t()),
    }
    import multiprocessing.reduction as mpr

    first = pickle.loads(mpr.ForkingPickler.dumps(fn.pack(nested)))
    _assert_same(first, nested)
    assert first["a"].is_contiguous() and not first["a"].is_shared()
    assert first["c"][1].stride() == nested["c"][1].stride()  # not contiguous: left alone
    second = pickle.loads(mpr.ForkingPickler.dumps(fn.pack(nested)))
    assert fn.pack(nested) is nested  # both slots in use
    view = first["a"][1:]
    del first
    gc.collect()
    third = fn.pack(nested)  # ``view`` still holds the first slot
    assert third is nested
    del view
    gc.collect()
    third = pickle.loads(mpr.ForkingPickler.dumps(fn.pack(nested)))
    _assert_same(third, nested)
    del second, third, fn


def test_arena_grows_and_large_batches_fall_back(no_leak: None) -> None:
    import multiprocessing.reduction as mpr

    fn = ShmCollate(lambda x: x, slots=2, max_batch_bytes=8 << 20)
    small = (torch.arange(10, dtype=torch.int32),)
    big = (torch.arange(3 << 18, dtype=torch.int64),)  # 6 MiB: a new, larger arena
    first = pickle.loads(mpr.ForkingPickler.dumps(fn.pack(small)))
    second = pickle.loads(mpr.ForkingPickler.dumps(fn.pack(big)))
    third = pickle.loads(mpr.ForkingPickler.dumps(fn.pack(small)))
    _assert_same(first, small)  # the old arena lives on while its batch does
    _assert_same(second, big)
    _assert_same(third, small)
    assert not any(t.is_shared() for t in (*first, *second, *third))
    huge = (torch.zeros(9 << 20, dtype=torch.uint8),)
    assert fn.pack(huge) is huge
    del first, second, third, fn


def test_a_forked_copy_does_not_free_the_slot(no_leak: None) -> None:
    import multiprocessing.reduction as mpr

    fn = ShmCollate(lambda x: x, slots=1)
    batch = (torch.arange(16),)
    held = pickle.loads(mpr.ForkingPickler.dumps(fn.pack(batch)))
    arena = fn._arena
    assert arena is not None
    pid = os.fork()
    if pid == 0:  # the child drops its copy of the batch, then reads the slot's flag
        del held
        gc.collect()
        os._exit(0 if arena.mm[0] == 1 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert fn.pack(batch) is batch  # still held here: no free slot
    _assert_same(held, batch)
    del held
    gc.collect()
    again = pickle.loads(mpr.ForkingPickler.dumps(fn.pack(batch)))
    _assert_same(again, batch)
    del again, fn, arena


def test_resume_mid_epoch(kind_shards: dict[int, list[str]], no_leak: None) -> None:
    urls = kind_shards[5]
    want = _reference(urls, "tuple", batch=4)

    def loader() -> Any:
        return wds.WebLoader(_dataset(urls, "tuple", batch=4), batch_size=None, num_workers=2)

    first = loader()
    seen = []
    for batch in first:
        _assert_same(batch, want[_first_key(batch)])
        seen.append(_first_key(batch))
        if len(seen) == 3:
            break
    state = first.state_dict()
    del first, batch
    second = loader()
    second.load_state_dict(state)
    arena = 0
    for batch in second:
        _assert_same(batch, want[_first_key(batch)])
        seen.append(_first_key(batch))
        arena += _from_arena(batch)
    assert sorted(seen) == sorted(want) and arena > 0
    del second, batch


def test_no_arena_when_it_cannot_be_mapped() -> None:
    fn = ShmCollate(lambda x: x, slots=4)
    batch = (torch.zeros(64 << 20, dtype=torch.uint8),)  # 64 MiB slots: 256 MiB to map
    pid = os.fork()
    if pid == 0:  # address space capped just above what is mapped now: the mmap fails
        import resource

        with open("/proc/self/status") as f:
            vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
        limit = (vm << 10) + (32 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        try:
            ok = fn.pack(batch) is batch and fn._arena is None
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
