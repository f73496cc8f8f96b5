"""s3:// through the faulty proxy: resets keep what arrived (streaming and prefetch chunks),
stalls fail within the bound."""

from __future__ import annotations

import hashlib
import io
import os
from typing import Any

import pytest

from tests.s3.conftest import make_config
from tests.support.netfaults import NetCase, NetFaultContract
from wds_cloud.openers.s3.opener import S3Opener
from wds_cloud.openers.s3.read import raw_body

pytestmark = pytest.mark.s3


class TestS3NetFaults(NetFaultContract):
    @pytest.fixture
    def net_case(self, seaweed: Any, raw_client: Any, bucket: str) -> NetCase:
        def put(name: str, data: bytes) -> None:
            raw_client.put_object(Bucket=bucket, Key=name, Body=data)

        def opener(
            endpoint: str, read_timeout: float | None = None, stall_timeout: float | None = None
        ) -> S3Opener:
            settings: dict[str, Any] = {}
            if read_timeout is not None:
                settings["read_timeout"] = read_timeout
            if stall_timeout is not None:
                settings["stall_timeout"] = stall_timeout
            return S3Opener(make_config(endpoint, **settings))

        return NetCase(
            port=seaweed.ports["s3.port"],
            put=put,
            url=lambda proxy, name: f"s3://{bucket}/{name}",
            opener=opener,
            default_opener=S3Opener,
        )


@pytest.mark.parametrize("reset", [False, True], ids=["close", "rst"])
def test_prefetch_chunk_resumes_from_the_last_byte(
    seaweed: Any, raw_client: Any, bucket: str, faulty_proxy: Any, reset: bool
) -> None:
    # Every connection ends after 384 KiB, well inside each 1 MiB chunk: a chunk that restarted
    # from its beginning would never complete.
    data = os.urandom(5 << 20)
    raw_client.put_object(Bucket=bucket, Key="p.bin", Body=data)
    proxy = faulty_proxy(seaweed.ports["s3.port"], cut_after=384 << 10, reset=reset)
    opener = S3Opener(make_config(proxy.url, prefetch=3, prefetch_chunk=1 << 20))
    with opener.open(f"s3://{bucket}/p.bin") as stream:
        assert stream.read() == data
        assert stream.resumes >= 5  # type: ignore[attr-defined]


def test_prefetch_with_default_chunks_and_4mib_closes(
    seaweed: Any, raw_client: Any, bucket: str, faulty_proxy: Any
) -> None:
    # The reproduction: 40 MB, default 8 MiB chunks, prefetch 4, closes after 4 MiB.
    data = os.urandom(40_000_000)
    raw_client.put_object(Bucket=bucket, Key="big.bin", Body=data)
    proxy = faulty_proxy(seaweed.ports["s3.port"], cut_after=4 << 20)
    opener = S3Opener(make_config(proxy.url, prefetch=4))
    digest = hashlib.sha256()
    with opener.open(f"s3://{bucket}/big.bin") as stream:
        while chunk := stream.read(4 << 20):
            digest.update(chunk)
    assert digest.digest() == hashlib.sha256(data).digest()
    assert proxy.cuts >= 5


def test_body_without_a_urllib3_response_is_read_in_small_pieces() -> None:
    # botocore's StreamingBody over something that is not a urllib3 response (another
    # botocore layout, a test double): 64 KiB reads bound what a reset could cost.
    from botocore.response import StreamingBody

    data = os.urandom(300_000)
    body = raw_body(StreamingBody(io.BytesIO(data), len(data)))
    pieces = []
    while piece := body.read1(1 << 20):
        pieces.append(piece)
    body.close()
    assert b"".join(pieces) == data
    assert max(len(p) for p in pieces) == 1 << 16
