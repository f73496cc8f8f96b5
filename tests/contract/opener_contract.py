"""The behaviour every opener must show, as a base test class (fsspec ``tests/abstract`` style).

To run it for a backend, subclass :class:`OpenerContract` in a ``test_*.py`` module (the class
name must start with ``Test``) and provide an ``opener_case`` fixture returning an
:class:`OpenerCase`: the opener, the URL of an existing shard, the URL of a missing one, and the
bytes the existing one holds (at least 300 KiB, so chunked and early-close reads mean
something). The fixture owns any server it starts::

    from tests.contract.opener_contract import OpenerCase, OpenerContract

    class TestS3Contract(OpenerContract):
        @pytest.fixture
        def opener_case(self, seaweed, tmp_path):
            data = os.urandom(1 << 20)
            seaweed.put("bkt", "x.tar", data)
            return OpenerCase(S3Opener(endpoint_url=seaweed.url), "s3://bkt/x.tar",
                              "s3://bkt/missing.tar", data)

Openers must also pickle (for DataLoader workers and spawned processes): a copy, made before
or after the original was used, reads the same bytes.

Set ``missing_is_lazy = True`` on the subclass when a missing shard is only reported on the
first read (as for ``pipe:`` commands); the check then reads before expecting the error.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from typing import Any

import pytest

from wds_cloud.errors import ShardNotFoundError, WdsCloudError


@dataclass
class OpenerCase:
    """What a backend's fixture provides to the contract."""

    opener: Any
    url: str
    missing_url: str
    data: bytes


class OpenerContract:
    """Contract tests; subclasses provide the ``opener_case`` fixture."""

    missing_is_lazy = False
    missing_error: type[BaseException] = ShardNotFoundError

    @pytest.fixture
    def opener_case(self) -> OpenerCase:  # pragma: no cover - overridden
        raise NotImplementedError("subclasses provide opener_case")

    def test_read_all(self, opener_case: OpenerCase) -> None:
        stream = opener_case.opener.open(opener_case.url)
        try:
            assert stream.readable()
            assert stream.read() == opener_case.data
            assert stream.read(100) == b""
        finally:
            stream.close()

    def test_read_small_chunks(self, opener_case: OpenerCase) -> None:
        stream = opener_case.opener.open(opener_case.url)
        chunks = []
        try:
            while True:
                chunk = stream.read(4093)
                assert len(chunk) <= 4093
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            stream.close()
        assert b"".join(chunks) == opener_case.data

    def test_readinto(self, opener_case: OpenerCase) -> None:
        stream = opener_case.opener.open(opener_case.url)
        out = io.BytesIO()
        buffer = bytearray(1 << 16)
        try:
            while n := stream.readinto(buffer):
                out.write(memoryview(buffer)[:n])
        finally:
            stream.close()
        assert out.getvalue() == opener_case.data

    def test_close_early(self, opener_case: OpenerCase) -> None:
        stream = opener_case.opener.open(opener_case.url)
        head = stream.read(1000)
        stream.close()
        assert head == opener_case.data[: len(head)] and head
        assert stream.closed
        stream.close()  # closing twice is harmless

    def test_reopen_after_close(self, opener_case: OpenerCase) -> None:
        first = opener_case.opener.open(opener_case.url)
        first.read(10)
        first.close()
        second = opener_case.opener.open(opener_case.url)
        try:
            assert second.read() == opener_case.data
        finally:
            second.close()

    def _open_missing(self, opener_case: OpenerCase) -> None:
        stream = opener_case.opener.open(opener_case.missing_url)
        try:
            if self.missing_is_lazy:
                stream.read()
        finally:
            stream.close()

    def test_missing(self, opener_case: OpenerCase) -> None:
        with pytest.raises(self.missing_error) as info:
            self._open_missing(opener_case)
        assert isinstance(info.value, WdsCloudError)
        assert opener_case.missing_url in str(info.value)
        if self.missing_error is ShardNotFoundError:
            assert isinstance(info.value, FileNotFoundError)
            assert info.value.url == opener_case.missing_url

    def test_pickled_copy_reads_the_same_bytes(self, opener_case: OpenerCase) -> None:
        fresh = pickle.loads(pickle.dumps(opener_case.opener))
        stream = opener_case.opener.open(opener_case.url)  # the original holds a client now
        try:
            assert stream.read(10) == opener_case.data[:10]
            used = pickle.loads(pickle.dumps(opener_case.opener))
        finally:
            stream.close()
        for copy in (fresh, used):
            assert type(copy) is type(opener_case.opener)
            copied = copy.open(opener_case.url)
            try:
                assert copied.read() == opener_case.data
            finally:
                copied.close()
