"""AisOpener.open_at through the real aistore SDK, on the emulator and the real cluster: bytes
from an offset (ranged GETs), resumed after cuts, through an inline ETL (read up to the offset;
emulator only), past the end."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

from tests.ais.backends import AisBackend
from tests.ais.conftest import Shards
from tests.emulators.ais.server import AisEmulator
from tests.openers.open_at_cases import check_ends, check_open_at
from wds_cloud.errors import ConfigError, ShardNotFoundError, ShardOpenError
from wds_cloud.openers.ais.opener import AisOpener

pytestmark = pytest.mark.ais


def _gets(emu: AisEmulator) -> list[str | None]:
    """The Range header of every object GET the emulator answered (None: no Range)."""
    return [r for m, p, q, r in emu.requests if m == "GET" and p.startswith("/v1/objects/")]


@pytest.mark.parametrize("size", [1, 513, 10_240, 250_001, 1_300_000])
def test_open_at_equals_the_bytes_from_the_offset(
    ais_backend: AisBackend, opener: AisOpener, size: int
) -> None:
    data = random.Random(size).randbytes(size)
    bucket = ais_backend.create_bucket("oa")
    ais_backend.put_object(bucket, f"obj-{size}.bin", data)
    url = f"ais://{bucket}/obj-{size}.bin"
    checked = check_open_at(opener, url, data, seed=size)
    assert len(checked) == 40
    if ais_backend.emulator is not None:
        # offset 0 is a plain GET, every other offset one GET from that offset
        assert _gets(ais_backend.emulator) == [f"bytes={o}-" if o else None for o in checked]


@pytest.mark.emulator_only("checks each Range sent, from the emulator's request log")
def test_open_at_resumes_after_cuts(ais_emulator: AisEmulator, opener: AisOpener) -> None:
    data = os.urandom(400_000)
    ais_emulator.store.create_bucket("oa")
    ais_emulator.store.put_object("oa", "x.bin", data)
    ais_emulator.cut_after(30_000, times=3)
    with opener.open_at("ais://oa/x.bin", 100_000) as stream:
        assert stream.read() == data[100_000:]
        assert stream.resumes == 3  # type: ignore[attr-defined]
    assert _gets(ais_emulator) == [f"bytes={100_000 + 30_000 * i}-" for i in range(4)]


def test_open_at_resumes_after_resets(ais_backend: AisBackend, faulty_proxy: Any) -> None:
    """Connections reset after 30,000 bytes three times, in front of the owning target."""
    data = os.urandom(400_000)
    bucket = ais_backend.create_bucket("oa")
    ais_backend.put_object(bucket, "x.bin", data)
    port = ais_backend.port_for(bucket, "x.bin")
    proxy = faulty_proxy(port, cut_after=30_000, first=3, reset=True)
    opener = ais_backend.opener(endpoint=proxy.url)
    with opener.open_at(f"ais://{bucket}/x.bin", 100_000) as stream:
        assert stream.read() == data[100_000:]
        assert stream.resumes == 3  # type: ignore[attr-defined]
    assert proxy.cuts == 3 and proxy.ranged_requests == 4


def test_open_at_reads_only_from_the_offset(ais_backend: AisBackend, faulty_proxy: Any) -> None:
    """The server sends the bytes from the offset, not the ones before (counted by a proxy in
    front of the node that serves the bytes)."""
    data = os.urandom(1_000_000)
    bucket = ais_backend.create_bucket("oa")
    ais_backend.put_object(bucket, "x.bin", data)
    proxy = faulty_proxy(ais_backend.port_for(bucket, "x.bin"))
    opener = AisOpener(endpoint=proxy.url, retries=0)
    with opener.open_at(f"ais://{bucket}/x.bin", 900_000) as stream:
        assert stream.read() == data[900_000:]
    assert proxy.ranged_requests == 1
    assert 100_000 <= proxy.bytes_forwarded < 100_000 + 4_000  # the tail and its headers


@pytest.mark.emulator_only("inline ETL needs Kubernetes")
def test_open_at_through_an_etl_reads_up_to_the_offset(
    ais_emulator: AisEmulator, opener: AisOpener, shards: Shards, upper_etl: str
) -> None:
    url = f"{shards.urls[0]}?etl={upper_etl}"
    with opener.open(url) as stream:
        transformed = stream.read()
    stored = ais_emulator.store.get_object(shards.bucket, "train/shard-0000.tar").data
    assert transformed != stored and len(transformed) > 10_000
    ais_emulator.requests.clear()
    assert len(check_open_at(opener, url, transformed, seed=3, count=12, tiny=3)) == 12
    assert _gets(ais_emulator) == [None] * 12  # no Range through the ETL: read from the start
    with pytest.raises(ShardOpenError, match="beyond the end"):
        opener.open_at(url, len(transformed) + 1)


def test_offsets_at_and_past_the_end(ais_backend: AisBackend, opener: AisOpener) -> None:
    bucket = ais_backend.create_bucket("oa")
    ais_backend.put_object(bucket, "x.bin", os.urandom(5000))
    url = f"ais://{bucket}/x.bin"
    check_ends(opener, url, 5000)
    with pytest.raises(ConfigError, match="unknown option"):
        opener.open_at(url, 1, prefetch=2)


def test_missing_object(ais_backend: AisBackend, opener: AisOpener) -> None:
    bucket = ais_backend.create_bucket("oa")
    with pytest.raises(ShardNotFoundError) as info:
        opener.open_at(f"ais://{bucket}/nope.tar", 10)
    assert info.value.url == f"ais://{bucket}/nope.tar"
