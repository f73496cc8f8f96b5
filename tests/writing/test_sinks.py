"""Every target goes through its opener's ``create()``: no writer special-cases a scheme."""

from __future__ import annotations

import gc
import io
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.writing.conftest import parse_headers
from wds_cloud.openers.local import LocalOpener
from wds_cloud.openers.registry import OpenerRegistry, open_sink
from wds_cloud.writing.shardwriter import ShardWriter
from wds_cloud.writing.tarwriter import TarWriter
from wds_cloud.writing.upload import upload_shards


class RecordingLocal(LocalOpener):
    """The local opener, noting every URL it was asked to create."""

    def __init__(self) -> None:
        super().__init__()
        self.created: list[str] = []

    def create(self, url: str) -> Any:
        self.created.append(url)
        return super().create(url)


@pytest.fixture
def recording() -> tuple[OpenerRegistry, RecordingLocal]:
    registry = OpenerRegistry()
    opener = RecordingLocal()
    registry.register("file", opener, override=True)
    return registry, opener


def test_local_targets_use_the_file_openers_create(
    tmp_path: Path, recording: tuple[OpenerRegistry, RecordingLocal]
) -> None:
    registry, opener = recording
    src = tmp_path / "src.tar"
    with TarWriter(str(src), registry=registry) as writer:
        writer.write({"__key__": "a", "txt": "x"})
    file_url = src.as_uri().replace("src.tar", "copy-%d.tar")
    with ShardWriter(file_url, registry=registry) as shards:
        shards.write({"__key__": "b", "txt": "y"})
    (tmp_path / "up").mkdir()
    upload_shards([src], str(tmp_path / "up"), progress=False, registry=registry)
    open_sink(str(tmp_path / "direct.tar"), registry).abort()
    assert opener.created == [
        str(src),
        file_url % 0,
        str(tmp_path / "up" / "src.tar"),
        str(tmp_path / "direct.tar"),
    ]


def test_dash_writes_the_tar_to_standard_output() -> None:
    code = (
        "import wds_cloud as wds\n"
        "with wds.TarWriter('-') as w:\n"
        "    w.write({'__key__': 'a', 'txt': 'x'})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, check=True)
    assert [h.name for h in parse_headers(out.stdout)] == [b"a.txt"]


class AbortableStream(io.BytesIO):
    """A caller-provided stream with an ``abort()``: it must be aborted, never closed."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def abort(self) -> None:
        self.log.append("abort")
        self.aborted = True

    def close(self) -> None:
        if not getattr(self, "aborted", False):  # IOBase.__del__ closes it later: not a commit
            self.log.append("close")
        super().close()


def test_shardwriter_aborts_caller_streams_of_discarded_shards() -> None:
    log: list[str] = []
    with (
        pytest.raises(KeyError),
        ShardWriter("m-%d.tar", opener=lambda n: AbortableStream(log)) as w,
    ):
        w.write({"__key__": "a", "txt": "x"})
        raise KeyError("stop")
    assert log == ["abort"]
    log.clear()
    writer = ShardWriter("m-%d.tar", opener=lambda n: AbortableStream(log))
    writer.write({"__key__": "a", "txt": "x"})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        del writer
        gc.collect()
    assert log == ["abort"]
    assert any("'m-0.tar'" in str(w.message) for w in record if w.category is ResourceWarning)


def test_writers_left_open_by_a_failing_script_commit_nothing(tmp_path: Path) -> None:
    # the reproduction: writers still open when user code raises at module level
    script = (
        "import wds_cloud as wds\n"
        "from wds_cloud.openers.local import AtomicFileWriter\n"
        "w = wds.TarWriter('tw.tar')\n"
        "s = wds.ShardWriter('sw-%d.tar')\n"
        "a = AtomicFileWriter('aw.bin')\n"
        "for i in range(3):\n"
        "    w.write({'__key__': str(i), 'txt': 'x' * 1000})\n"
        "    s.write({'__key__': str(i), 'txt': 'x' * 1000})\n"
        "    a.write(b'x' * 1000)\n"
        "raise RuntimeError('user code fails')\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "user code fails" in out.stderr
    assert sorted(os.listdir(tmp_path)) == [], "no shard, no temp file"
    for name in ("TarWriter for 'tw.tar'", "ShardWriter for 'sw-0.tar'", "for 'aw.bin'"):
        assert name in out.stderr, out.stderr
