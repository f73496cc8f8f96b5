"""DirectoryShardList: a directory as a queue of shards, shared by real processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.core.conftest import write_shards
from wds_cloud.core.dirshards import (
    DirectoryShardList,
    check_pid_is_running,
    get_pid_from_filename,
    without_last_extension,
)
from wds_cloud.core.pipeline import DataPipeline
from wds_cloud.core.shardopen import tarfile_to_samples
from wds_cloud.errors import ConfigError


def queue_dir(tmp_path: Path, names: list[str], sub: str = "q") -> str:
    root = tmp_path / sub
    root.mkdir()
    for name in names:
        (root / name).write_bytes(name.encode())
    return str(root) + "/"


def test_name_helpers() -> None:
    assert without_last_extension("/d/x.tar._123_") == "/d/x.tar"
    assert get_pid_from_filename("/d/x.tar._123_") == 123
    assert get_pid_from_filename("/d/x.tar._done_") is None
    assert get_pid_from_filename("/d/x.tar") is None
    assert check_pid_is_running(os.getpid())
    assert not check_pid_is_running(2**22 + 12345)  # above Linux's pid_max
    assert not check_pid_is_running(2**70)


def test_default_pattern_matches_tar_and_tgz_and_reads_samples(tmp_path: Path) -> None:
    shards = write_shards(tmp_path / "src", 3, 4)
    root = tmp_path / "q"
    root.mkdir()
    shutil.copy(shards.urls[0], root / "a.tar")
    shutil.copy(shards.urls[1], root / "b.tgz")  # a .tgz name on an uncompressed tar
    shutil.copy(shards.urls[2], root / "c.tar.tgz")
    (root / "notes.txt").write_text("not a shard")
    ds = DirectoryShardList(str(root) + "/", mode="unlink", poll=None)
    assert [Path(p).name for p in ds.candidates()] == ["a.tar", "b.tgz", "c.tar.tgz"]
    samples = list(DataPipeline(ds, tarfile_to_samples()))
    assert len(samples) == 12
    assert all(s["__url__"].endswith(f"._{os.getpid()}_") for s in samples)
    assert sorted(p.name for p in root.iterdir()) == ["notes.txt"]


def test_oldest_first_and_keep_mode(tmp_path: Path) -> None:
    path = queue_dir(tmp_path, ["c.tar", "a.tar", "b.tar"])
    for age, name in enumerate(["c.tar", "a.tar", "b.tar"]):
        os.utime(path + name, (1_000_000 + age, 1_000_000 + age))
    ds = DirectoryShardList(path, pattern="*.tar", select="oldest", mode="keep", poll=None)
    got = [Path(d["url"]).name for d in ds]
    assert got == [f"{n}._{os.getpid()}_" for n in ("c.tar", "a.tar", "b.tar")]
    assert sorted(os.listdir(path)) == ["a.tar._done_", "b.tar._done_", "c.tar._done_"]


def test_resample_mode_is_endless_and_seeded(tmp_path: Path) -> None:
    def draw(seed: int, sub: str) -> list[str]:
        path = queue_dir(tmp_path, [f"s{i}.tar" for i in range(5)], sub=sub)
        it = iter(DirectoryShardList(path, pattern="*.tar", seed=seed))
        out = [Path(next(it)["url"]).name for _ in range(40)]
        # the 40th is still claimed: a reader that stops early keeps its shard (as webdataset)
        assert sorted(os.listdir(path)) == sorted(
            {f"s{i}.tar" for i in range(5)} - {out[-1].split("._")[0]} | {out[-1]}
        )
        return out

    first = draw(3, "a")
    assert first == draw(3, "b") != draw(4, "c")
    assert {n.split(".")[0] for n in first} == {f"s{i}" for i in range(5)}


def test_waits_for_a_producer_then_times_out(tmp_path: Path) -> None:
    path = queue_dir(tmp_path, [])

    def produce() -> None:
        time.sleep(0.2)
        Path(path, "late.tar.part").write_bytes(b"x")
        os.rename(path + "late.tar.part", path + "late.tar")  # appear complete

    producer = threading.Thread(target=produce)
    producer.start()
    ds = DirectoryShardList(path, pattern="*.tar", mode="unlink", poll=0.02, timeout=1.5)
    start = time.monotonic()
    got = [Path(d["url"]).name for d in ds]
    elapsed = time.monotonic() - start
    producer.join()
    assert got == [f"late.tar._{os.getpid()}_"]
    assert 1.5 <= elapsed < 5  # waited the timeout after the last shard, then stopped


def test_a_dead_reader_s_claim_is_recycled(tmp_path: Path) -> None:
    path = queue_dir(tmp_path, ["a.tar"])
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead = int(child.stdout)
    os.rename(path + "a.tar", path + f"a.tar._{dead}_")  # claimed by a process that has ended
    Path(path, "b.tar").write_bytes(b"b")
    ds = DirectoryShardList(path, pattern="*.tar", mode="unlink", poll=None, select="oldest")
    it = iter(ds)
    assert Path(next(it)["url"]).name == f"b.tar._{os.getpid()}_"
    # finishing b.tar recycles the dead claim (mode unlink: deleted)
    assert list(it) == []
    assert os.listdir(path) == []


def test_bad_arguments(tmp_path: Path) -> None:
    path = queue_dir(tmp_path, [])
    for kwargs, message in [
        ({"path": path.rstrip("/")}, "end in '/'"),
        ({"path": str(tmp_path / "missing") + "/"}, "not a directory"),
        ({"path": path, "mode": "move"}, "mode"),
        ({"path": path, "select": "newest"}, "selection strategy"),
    ]:
        with pytest.raises(ConfigError, match=message):
            DirectoryShardList(**kwargs)


def test_glob_characters_in_the_directory_name(tmp_path: Path) -> None:
    path = queue_dir(tmp_path, ["x.tar"], sub="run[1]*")
    got = [d["url"] for d in DirectoryShardList(path, pattern="*.tar", mode="unlink", poll=None)]
    assert got == [f"{path}x.tar._{os.getpid()}_"]


_READER = """
import json, os, sys, time
from wds_cloud.core.dirshards import DirectoryShardList
ds = DirectoryShardList(sys.argv[1], pattern="*.tar", mode="unlink", poll=None)
while not os.path.exists(sys.argv[2]):  # start together
    time.sleep(0.005)
taken = []
for item in ds:
    taken.append(item["url"].rsplit("/", 1)[1].split("._")[0])
    time.sleep(0.002)
print(json.dumps(taken))
"""


def test_concurrent_processes_take_each_shard_exactly_once(tmp_path: Path) -> None:
    names = [f"s{i:03d}.tar" for i in range(120)]
    path = queue_dir(tmp_path, names)
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), *sys.path]))
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", _READER, path, str(go)], stdout=subprocess.PIPE, env=env
        )
        for _ in range(4)
    ]
    time.sleep(0.5)
    go.touch()
    taken = []
    for reader in readers:
        out, _ = reader.communicate(timeout=120)
        assert reader.returncode == 0
        taken.append(json.loads(out))
    everything = [name for part in taken for name in part]
    assert sorted(everything) == names  # none lost, none twice
    assert sum(1 for part in taken if part) >= 2  # the work was shared
    assert os.listdir(path) == []
