"""make_loader(executor="subprocess-threads"): the thread loader in one child process.

Differential: the same batches in the same order as ``executor="threads"`` and
``"processes"`` for the same seed (generated pipelines on local shards, one per backend on
its real local server); exact resume after SIGKILL of the child and of the parent; nothing
left (child process, file descriptor, shared-memory mapping) after ``close()`` or garbage
collection mid-epoch; errors from the child keep their type, sample key and URL.
"""

from __future__ import annotations

import gc
import io
import json
import os
import random
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.pytorch.test_threads import (  # noqa: F401  (image_shards: a fixture)
    NSHARDS,
    PER_SHARD,
    _bad_map,
    _batches,
    _pipeline,
    image_shards,
    write_image_shard,
)
from tests.pytorch.test_threads_backends import Stored, stored  # noqa: F401  (a fixture)
from tests.resume.helpers import assert_exactly_once, write_shards
from wds_cloud.core.decodehandlers import DecodingError
from wds_cloud.errors import ConfigError, WdsCloudError
from wds_cloud.pytorch.builder import make_loader
from wds_cloud.pytorch.subprocloader import SubprocessLoader

SUB = "subprocess-threads"
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("case", range(6))
def test_subprocess_equals_threads_and_processes(image_shards: list[str], case: int) -> None:  # noqa: F811
    kw = _pipeline(random.Random(1000 + case))
    want = _batches(make_loader(image_shards, executor="processes", **kw))
    assert _batches(make_loader(image_shards, executor="threads", **kw)) == want, kw
    loader = make_loader(image_shards, executor=SUB, **kw)
    assert isinstance(loader, SubprocessLoader)
    assert _batches(loader) == want, kw
    loader.close()
    assert want


def test_subprocess_equals_processes_on_backend(stored: tuple[Stored, Stored]) -> None:  # noqa: F811
    remote, _ = stored
    kw = _pipeline(random.Random(2001))
    extra: dict[str, Any] = {} if remote.registry is None else {"registry": remote.registry}
    want = _batches(make_loader(remote.urls, executor="processes", **kw, **extra))
    assert _batches(make_loader(remote.urls, executor=SUB, **kw, **extra)) == want, kw


def test_epochs_set_epoch_and_len(image_shards: list[str]) -> None:  # noqa: F811
    kw = {"batch_size": 6, "num_workers": 2, "seed": 9, "to_tuple": "cls", "shuffle_buffer": 8}
    procs = make_loader(image_shards, executor="processes", **kw)
    sub = make_loader(image_shards, executor=SUB, **kw)
    for epoch in (0, 3):
        procs.set_epoch(epoch)
        sub.set_epoch(epoch)
        assert _batches(sub) == _batches(procs)
    pid = sub.pid
    assert pid is not None  # one child for every epoch
    assert _batches(sub) == _batches(procs) and sub.pid == pid
    windowed = make_loader(image_shards, executor=SUB, epoch_size=20, **kw)
    assert len(windowed) == 4
    assert sum(len(b[0]) for b in windowed) == 20


def test_refuses_what_threads_refuse_when_built() -> None:
    with pytest.raises(ConfigError, match="reader threads"):
        make_loader("x.tar", batch_size=2, executor=SUB, num_workers=0)
    with pytest.raises(ConfigError, match="order='global'"):
        make_loader("x.tar", batch_size=2, executor=SUB, order="global")


def _keys(batches: Any) -> list[str]:
    return [key for batch in batches for key in batch[0]]


def _resume_kw() -> dict[str, Any]:
    return {"batch_size": 4, "num_workers": 2, "seed": 5, "shuffle_buffer": 10}


def test_resume_after_sigkill_of_the_child(image_shards: list[str]) -> None:  # noqa: F811
    kw = {**_resume_kw(), "to_tuple": "__key__ cls"}
    want = _keys(make_loader(image_shards, executor="threads", **kw))
    loader = make_loader(image_shards, executor=SUB, **kw)
    it = iter(loader)
    first = _keys(next(it) for _ in range(3))
    state = loader.state_dict()
    pid = loader.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(WdsCloudError, match=f"child process \\(pid {pid}\\) died"):
        for _ in range(50):  # the batches already on their way may still arrive
            next(it)
    loader.close()
    resumed = make_loader(image_shards, executor=SUB, **kw)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    rest = _keys(resumed)
    assert_exactly_once(first + rest, want)  # exact: nothing lost, nothing repeated
    # and in the order the thread executor resumes the same state in this process
    threads = make_loader(image_shards, executor="threads", **kw)
    threads.load_state_dict(state)
    assert _keys(threads) == rest


def test_state_dict_before_and_at_the_first_batch(image_shards: list[str]) -> None:  # noqa: F811
    kw = {**_resume_kw(), "to_tuple": "__key__ cls"}
    loader = make_loader(image_shards, executor=SUB, **kw)
    fresh = loader.state_dict()  # asked of the idle child
    assert fresh == make_loader(image_shards, executor="threads", **kw).state_dict()
    it = iter(loader)
    with pytest.raises(ConfigError, match="between iter\\(\\) and its first batch"):
        loader.state_dict()
    next(it)
    after_one = loader.state_dict()
    assert after_one != fresh
    loader.load_state_dict(after_one)
    it = iter(loader)
    assert loader.state_dict() == after_one  # the loaded state, until a batch is handed out
    next(it)
    assert loader.state_dict() != after_one
    loader.close()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_resume_after_sigkill_of_the_parent(tmp_path: Path) -> None:
    urls, keys = write_shards(tmp_path, 6, 20)  # 120 samples, 20 steps of 6
    ckpt, log = tmp_path / "ckpt.json", tmp_path / "delivered.log"
    script = ROOT / "tests" / "resume" / "train_loop.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for kill in (5, 11, None):
        errors = tmp_path / "stderr.txt"
        with errors.open("w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, str(script), json.dumps(urls), str(ckpt), str(log), SUB],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
            )
        assert proc.stdout is not None
        child = None
        for line in proc.stdout:
            if line.startswith("child "):
                child = int(line.split()[1])
            if kill is not None and line.strip() == f"step {kill}":
                os.kill(proc.pid, signal.SIGKILL)  # the parent only: the child must notice
                break
        proc.wait(timeout=60)
        proc.stdout.close()
        if kill is None:
            assert proc.returncode == 0, errors.read_text()[-3000:]
        assert child is not None
        deadline = time.monotonic() + 30
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), f"the child {child} outlived its parent"
    assert_exactly_once(log.read_text().split(), keys)


def _fds() -> dict[str, str]:
    out = {}
    for p in Path("/proc/self/fd").iterdir():
        try:
            out[p.name] = os.readlink(p)
        except OSError:
            pass
    return out


def _arena_maps() -> int:
    return Path("/proc/self/maps").read_text().count("wds_cloud-batches")


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_nothing_left_after_close_or_gc(image_shards: list[str]) -> None:  # noqa: F811
    kw = {"batch_size": 2, "num_workers": 2, "decode": "rgb8", "to_tuple": "jpg cls"}
    kw["shuffle_buffer"] = 0
    warm = make_loader(image_shards, executor=SUB, **kw)
    list(warm)  # imports, and the multiprocessing machinery's own descriptors
    warm.close()
    gc.collect()
    before, maps, threads = set(_fds()), _arena_maps(), set(threading.enumerate())
    # closed mid-epoch, a batch still held
    loader = make_loader(image_shards, executor=SUB, **kw)
    it = iter(loader)
    held = next(it)
    pid = loader.pid
    assert pid is not None and _alive(pid)
    assert any("wds_cloud-batches" in target for target in _fds().values()) or _arena_maps()
    loader.close()
    assert not _alive(pid)
    del it, held
    gc.collect()
    assert set(_fds()) <= before and _arena_maps() <= maps
    assert set(threading.enumerate()) <= threads
    # dropped mid-epoch, never closed
    loader = make_loader(image_shards, executor=SUB, **kw)
    it = iter(loader)
    next(it)
    pid = loader.pid
    assert pid is not None
    del it, loader
    gc.collect()
    assert not _alive(pid)
    assert set(_fds()) <= before and _arena_maps() <= maps
    assert set(threading.enumerate()) <= threads


def test_leaving_a_pass_early_stops_it_not_the_child(image_shards: list[str]) -> None:  # noqa: F811
    kw = {"batch_size": 3, "num_workers": 2, "seed": 1, "to_tuple": "__key__", "shuffle_buffer": 5}
    want = _batches(make_loader(image_shards, executor="processes", **kw))
    loader = make_loader(image_shards, executor=SUB, **kw)
    for _ in range(3):
        it = iter(loader)
        next(it)
        del it  # abandoned: its pass is stopped, its batches' slots freed
    pid = loader.pid
    abandoned = iter(loader)
    next(abandoned)  # never closed: the next iter() stops it
    assert _batches(loader) == want and loader.pid == pid
    loader.close()


def test_map_error_keeps_type_key_and_url(image_shards: list[str]) -> None:  # noqa: F811
    loader = make_loader(
        image_shards, batch_size=4, num_workers=2, decode="rgb8", map=_bad_map, executor=SUB
    )
    with pytest.raises(ValueError, match="cannot map 13") as info:
        list(loader)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "_bad_map() of sample 'k0013'" in notes and "img-001.tar" in notes
    assert "in the subprocess-threads child" in notes
    pid = loader.pid
    with pytest.raises(ValueError, match="cannot map 13"):  # the child survives: a new pass
        list(loader)
    assert loader.pid == pid
    loader.close()


def test_decode_error_keeps_key_and_url(image_shards: list[str], tmp_path: Path) -> None:  # noqa: F811
    bad = tmp_path / "bad.tar"
    write_image_shard(bad, 9000, 1)
    with tarfile.open(bad, "a", format=tarfile.USTAR_FORMAT) as tf:  # then a broken JPEG
        for name, data in (("k9001.jpg", b"not a jpeg at all"), ("k9001.cls", b"2")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    loader = make_loader(
        [*image_shards, str(bad)],
        batch_size=4,
        num_workers=2,
        decode="rgb8",
        to_tuple="jpg cls",
        executor=SUB,
    )
    with pytest.raises(DecodingError) as info:
        list(loader)
    assert info.value.key == "k9001" and info.value.url == str(bad)
    loader.close()


def test_build_error_is_raised_in_the_parent(tmp_path: Path) -> None:
    loader = make_loader(str(tmp_path / "none-{0..1}.tar"), batch_size=2, executor=SUB)
    with pytest.raises(Exception) as info:  # whatever threads raise for missing shards
        list(loader)
    with pytest.raises(type(info.value)):
        list(make_loader(str(tmp_path / "none-{0..1}.tar"), batch_size=2, executor="threads"))
    loader.close()


def test_profile_report_comes_from_the_child(image_shards: list[str]) -> None:  # noqa: F811
    loader = make_loader(
        image_shards,
        batch_size=4,
        num_workers=2,
        decode="rgb8",
        to_tuple="jpg cls",
        profile=True,
        executor=SUB,
    )
    assert sum(len(b[1]) for b in loader) == NSHARDS * PER_SHARD
    report = loader.profile_report()
    main = [p for p in report.processes if p.role == "main"]
    assert main and main[0].pid == loader.pid != os.getpid()
    assert main[0].timers["open"].count == NSHARDS
    loader.close()
