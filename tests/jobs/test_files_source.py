"""``FilesSource.read``: files read with several requests in flight, handed out in order, with
a bounded read-ahead, errors at the sample they belong to, and no thread left behind."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest

from wds_cloud.errors import ShardNotFoundError
from wds_cloud.jobs.sources import FILES_IN_FLIGHT, SAMPLES_AHEAD, FilesSource
from wds_cloud.openers.local import LocalOpener
from wds_cloud.openers.registry import OpenerRegistry


class CountingLocal(LocalOpener):
    """The real local opener, counting the files opened and the most opened at once."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str] = []
        self.now = self.most = 0
        self.lock = threading.Lock()

    def open(self, url: str, **options: Any) -> Any:
        with self.lock:
            self.opened.append(url)
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            return super().open(url, **options)
        finally:
            with self.lock:
                self.now -= 1


def _tree(root: Path, n: int, seed: int) -> tuple[FilesSource, list[tuple[str, dict[str, bytes]]]]:
    rng = random.Random(seed)
    samples, expected = [], []
    for i in range(n):
        members, data = [], {}
        for ext in rng.sample(("jpg", "json", "cls", "Txt"), rng.randint(1, 3)):
            body = rng.randbytes(rng.choice((0, 1, 700, rng.randint(0, 5000))))
            path = root / f"k{i:04d}.{ext}"
            path.write_bytes(body)
            members.append((ext, str(path)))
            data[ext.lower()] = body
        samples.append((f"k{i:04d}", tuple(members)))
        expected.append((f"k{i:04d}", data))
    return FilesSource(tuple(samples)), expected


def _registry(opener: LocalOpener) -> OpenerRegistry:
    registry = OpenerRegistry()
    registry.register("file", opener, override=True)
    return registry


@pytest.mark.parametrize("seed", range(6))
def test_samples_in_order_with_their_bytes(tmp_path: Path, seed: int) -> None:
    source, expected = _tree(tmp_path, random.Random(seed).randint(0, 150), seed)
    got = list(source.read(_registry(LocalOpener())))
    assert [(s.pop("__key__"), s) for s, _ in got] == expected
    assert [n for _, n in got] == [sum(map(len, d.values())) for _, d in expected]


def test_read_ahead_is_bounded_and_an_early_stop_leaves_no_thread(tmp_path: Path) -> None:
    source, expected = _tree(tmp_path, 200, seed=9)
    opener = CountingLocal()
    before = set(threading.enumerate())
    reader = source.read(_registry(opener))
    first, _ = next(reader)
    assert first["__key__"] == "k0000"
    reader.close()
    files = [len(d) for _, d in expected]
    # what can have been asked for: the first sample, then SAMPLES_AHEAD more
    assert sum(files[:2]) <= len(opener.opened) <= sum(files[: SAMPLES_AHEAD + 1])
    assert 1 <= opener.most <= FILES_IN_FLIGHT
    assert not [t for t in threading.enumerate() if t not in before and t.is_alive()]


def test_a_missing_file_fails_at_its_sample_naming_it(tmp_path: Path) -> None:
    source, _ = _tree(tmp_path, 40, seed=3)
    gone = source.samples[25][1][0][1]
    Path(gone).unlink()
    reader = source.read(_registry(LocalOpener()))
    keys = []
    with pytest.raises(ShardNotFoundError) as info:
        for sample, _ in reader:
            keys.append(sample["__key__"])
    assert keys == [f"k{i:04d}" for i in range(25)]
    assert gone in str(info.value)
