"""The behaviour every committing writer must show (``create(url)`` of an opener), as a base class.

Only ``close()`` (or a ``with`` block that exits normally) commits. ``abort()``, an exception
leaving the ``with`` block, and garbage collection of a writer that was neither closed nor
aborted discard: nothing under the final name and nothing left behind (temp files, incomplete
multipart uploads); garbage collection also emits a :class:`ResourceWarning` naming the URL.
A process killed (SIGKILL) mid-write leaves nothing under the final name either (what it
leaves behind, a temp file or an incomplete upload, is for cleanup tools); the writer's opener
is pickled into that process, so this also checks that openers pickle.
The same holds one level up, for :class:`TarWriter` and :class:`ShardWriter` writing to the
backend's URLs.

To run it for a backend, subclass :class:`WriterContract` in a ``test_*.py`` module and provide
a ``writer_case`` fixture returning a :class:`WriterCase`::

    class TestS3Writers(WriterContract):
        @pytest.fixture
        def writer_case(self, ...):
            return WriterCase(registry, url=lambda name: f"s3://{bucket}/{name}",
                              exists=..., read=..., leftovers=..., data=os.urandom(6 << 20))
"""

from __future__ import annotations

import gc
import io
import os
import pickle
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from wds_cloud.core.samples import tar_samples
from wds_cloud.errors import ConfigError, WdsCloudError
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.redact import redact_url
from wds_cloud.writing.shardwriter import ShardWriter
from wds_cloud.writing.tarwriter import TarWriter


@dataclass
class WriterCase:
    """What a backend's fixture provides to the writer contract.

    Attributes:
        registry: a registry whose opener for the backend's scheme can ``create()``.
        url: ``url(name)`` gives the URL of a fresh destination called ``name``.
        exists: ``exists(url)``: is something stored under the final name?
        read: ``read(url)``: the stored bytes.
        leftovers: what a discarded write may have left behind (temp files, incomplete
            multipart uploads); must be empty after every discard.
        data: bytes large enough that the backend already sent some of them before the end
            (a multipart part, a resumable chunk), so discarding has something to undo.
    """

    registry: OpenerRegistry
    url: Callable[[str], str]
    exists: Callable[[str], bool]
    read: Callable[[str], bytes]
    leftovers: Callable[[], list[Any]]
    data: bytes


def _create(case: WriterCase, url: str) -> Any:
    return case.registry.for_url(url).create(url)


def _write_in_pieces(writer: Any, data: bytes) -> None:
    step = 1_000_003  # odd sizes straddle part and chunk boundaries
    for pos in range(0, len(data), step):
        writer.write(data[pos : pos + step])


@contextmanager
def recording_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Record every warning raised in the block, then run the garbage collector."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        yield record
        gc.collect()


def assert_discard_warning(record: list[warnings.WarningMessage], url: str) -> None:
    """A ResourceWarning naming ``url`` (redacted) says the writer was discarded."""
    messages = [str(w.message) for w in record if issubclass(w.category, ResourceWarning)]
    assert any(repr(redact_url(url)) in m and "nothing was committed" in m for m in messages), (
        messages
    )


def _samples(count: int, size: int) -> list[dict[str, Any]]:
    return [{"__key__": f"k{i:04d}", "bin": bytes([i % 256]) * size} for i in range(count)]


_KILLED_WRITER = """
import os, pickle, signal, sys
opener, url, data = pickle.load(sys.stdin.buffer)
writer = opener.create(url)
step = 1_000_003
for pos in range(0, len(data), step):
    writer.write(data[pos : pos + step])
print("written", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class WriterContract:
    """Contract tests; subclasses provide the ``writer_case`` fixture.

    Set ``kill_commits_nothing = False`` (with the reason) for a backend that cannot tell a
    killed writer from a finished one.
    """

    kill_commits_nothing = True

    @pytest.fixture
    def writer_case(self) -> WriterCase:  # pragma: no cover - overridden
        raise NotImplementedError("subclasses provide writer_case")

    def test_close_commits(self, writer_case: WriterCase) -> None:
        url = writer_case.url("closed.tar")
        writer = _create(writer_case, url)
        _write_in_pieces(writer, writer_case.data)
        assert not writer_case.exists(url), "nothing is visible before close()"
        writer.close()
        writer.close()  # idempotent
        assert writer_case.read(url) == writer_case.data
        assert writer_case.leftovers() == []

    def test_exception_in_with_block_discards(self, writer_case: WriterCase) -> None:
        url = writer_case.url("raised.tar")
        with pytest.raises(KeyError), _create(writer_case, url) as writer:
            _write_in_pieces(writer, writer_case.data)
            raise KeyError("producer failed")
        assert not writer_case.exists(url)
        assert writer_case.leftovers() == []

    def test_abort_discards_and_close_after_abort_commits_nothing(
        self, writer_case: WriterCase
    ) -> None:
        url = writer_case.url("aborted.tar")
        writer = _create(writer_case, url)
        _write_in_pieces(writer, writer_case.data)
        writer.abort()
        writer.abort()
        writer.close()
        assert not writer_case.exists(url)
        assert writer_case.leftovers() == []
        with pytest.raises(ValueError, match="closed or aborted"):
            writer.write(b"x")

    def test_garbage_collected_writer_discards_and_warns(self, writer_case: WriterCase) -> None:
        url = writer_case.url("forgotten.tar")
        writer = _create(writer_case, url)
        _write_in_pieces(writer, writer_case.data)
        with recording_warnings() as record:
            del writer
        assert not writer_case.exists(url), "garbage collection must never commit"
        assert writer_case.leftovers() == []
        assert_discard_warning(record, url)

    @pytest.mark.parametrize("compress", [False, True])
    def test_garbage_collected_tarwriter_discards_and_warns(
        self, writer_case: WriterCase, compress: bool
    ) -> None:
        url = writer_case.url("tw.tar.gz" if compress else "tw.tar")
        # level 0: the gzip stream passes every byte on, so the sink already holds data
        writer = TarWriter(url, registry=writer_case.registry, compress=compress, compresslevel=0)
        for sample in _samples(6, len(writer_case.data) // 5):
            writer.write(sample)
        with recording_warnings() as record:
            del writer
        assert not writer_case.exists(url)
        assert writer_case.leftovers() == []
        assert_discard_warning(record, url)

    def test_garbage_collected_shardwriter_keeps_only_full_shards(
        self, writer_case: WriterCase
    ) -> None:
        pattern = writer_case.url("sw-{}.tar").replace("%", "%%").replace("{}", "%d")
        writer = ShardWriter(pattern, maxcount=2, registry=writer_case.registry)
        for sample in _samples(3, 1000):
            writer.write(sample)
        with recording_warnings() as record:
            del writer
        first = writer_case.read(pattern % 0)
        assert [s["__key__"] for s in tar_samples(io.BytesIO(first), "x")] == ["k0000", "k0001"]
        assert not writer_case.exists(pattern % 1), "the open shard was discarded"
        assert writer_case.leftovers() == []
        assert_discard_warning(record, pattern % 1)

    def test_tarwriter_exception_discards(self, writer_case: WriterCase) -> None:
        url = writer_case.url("tw-raised.tar")
        with (
            pytest.raises(KeyError),
            TarWriter(url, registry=writer_case.registry) as writer,
        ):
            writer.write(_samples(1, 10)[0])
            raise KeyError("producer failed")
        assert not writer_case.exists(url)
        assert writer_case.leftovers() == []

    def test_nul_byte_is_a_library_error_naming_the_url(self, writer_case: WriterCase) -> None:
        url = writer_case.url("bad\0name.tar")
        with pytest.raises(ConfigError) as info:
            _create(writer_case, url)
        assert isinstance(info.value, WdsCloudError)
        assert repr(redact_url(url)) in str(info.value)
        assert writer_case.leftovers() == []

    def test_killed_process_commits_nothing(self, writer_case: WriterCase) -> None:
        if not self.kill_commits_nothing:
            pytest.skip("this backend cannot tell a killed writer from a finished one")
        url = writer_case.url("killed.tar")
        opener = writer_case.registry.for_url(url)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([_ROOT, *sys.path]))
        child = subprocess.run(
            [sys.executable, "-c", _KILLED_WRITER],
            input=pickle.dumps((opener, url, writer_case.data)),
            capture_output=True,
            env=env,
            timeout=120,
        )
        assert child.returncode == -signal.SIGKILL, child.stderr.decode()
        assert child.stdout == b"written\n"
        assert not writer_case.exists(url), "a killed writer must never commit"
