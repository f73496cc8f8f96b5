"""ais:// reads through the real aistore SDK, on the emulator and the real cluster (``ais_backend``):
samples, ETL (emulator only), resume, errors, odd names."""

from __future__ import annotations

import os
import pickle
from typing import Any

import pytest

from tests.ais.backends import AisBackend
from tests.ais.conftest import ETL_NAME, Shards
from tests.contract.opener_contract import OpenerCase, OpenerContract
from tests.emulators.ais.server import AisEmulator
from tests.support.ownership import refused_port
from wds_cloud.core.samples import tar_samples
from wds_cloud.errors import ConfigError, ShardNotFoundError, ShardOpenError, ShardReadError
from wds_cloud.openers.ais.opener import AisOpener

pytestmark = pytest.mark.ais

# inline ETL runs in Kubernetes pods on a real cluster; there is none here
ETL_ONLY_ON_EMULATOR = pytest.mark.emulator_only("inline ETL needs Kubernetes")
# cut_after/requests are emulator hooks; test_net_faults cuts real reads through a proxy
HOOKS_ONLY_ON_EMULATOR = pytest.mark.emulator_only("uses the emulator's cut_after hook")


def samples_of(opener: AisOpener, url: str, **options: object) -> list[dict[str, object]]:
    stream = opener.open(url, **options)
    try:
        return list(tar_samples(stream, url))
    finally:
        stream.close()


def strip(samples: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: v for k, v in s.items() if k != "__url__"} for s in samples]


def upper(expected: list[dict[str, bytes]], suffix: bytes = b"") -> list[dict[str, bytes]]:
    return [{**s, "txt": s["txt"].upper() + suffix} for s in expected]


class TestAisContract(OpenerContract):
    @pytest.fixture
    def opener_case(self, ais_backend: AisBackend, opener: AisOpener) -> OpenerCase:
        data = os.urandom(1 << 20)
        bucket = ais_backend.create_bucket("contract")
        ais_backend.put_object(bucket, "x.tar", data)
        return OpenerCase(opener, f"ais://{bucket}/x.tar", f"ais://{bucket}/missing.tar", data)


def test_reads_every_sample(opener: AisOpener, shards: Shards) -> None:
    for url in shards.urls:
        got = samples_of(opener, url)
        assert strip(got) == shards.expected[url]
        assert {s["__url__"] for s in got} == {url}


@ETL_ONLY_ON_EMULATOR
def test_etl_by_open_option(opener: AisOpener, shards: Shards, upper_etl: str) -> None:
    url = shards.urls[0]
    assert strip(samples_of(opener, url, etl=upper_etl)) == upper(shards.expected[url])


@ETL_ONLY_ON_EMULATOR
def test_etl_per_url(opener: AisOpener, shards: Shards, upper_etl: str) -> None:
    url = shards.urls[1]
    got = samples_of(opener, f"{url}?etl={upper_etl}")
    assert strip(got) == upper(shards.expected[url])


@ETL_ONLY_ON_EMULATOR
def test_etl_from_config(ais_emulator: AisEmulator, shards: Shards, upper_etl: str) -> None:
    opener = AisOpener(endpoint=ais_emulator.url, etl=upper_etl, etl_args={"suffix": "?"})
    url = shards.urls[2]
    assert strip(samples_of(opener, url)) == upper(shards.expected[url], b"?")


@ETL_ONLY_ON_EMULATOR
def test_etl_args_dict_sent_as_compact_json(
    ais_emulator: AisEmulator, opener: AisOpener, shards: Shards, upper_etl: str
) -> None:
    url = shards.urls[0]
    got = samples_of(opener, url, etl=upper_etl, etl_args={"suffix": "!"})
    assert strip(got) == upper(shards.expected[url], b"!")
    gets = [q for m, p, q, _ in ais_emulator.requests if m == "GET" and "etl_name" in q]
    assert gets[-1]["etl_name"] == ETL_NAME
    assert gets[-1]["etl_args"] == '{"suffix":"!"}'


@ETL_ONLY_ON_EMULATOR
def test_etl_args_in_url_are_verbatim_and_win(
    opener: AisOpener, shards: Shards, upper_etl: str
) -> None:
    url = shards.urls[0]
    got = samples_of(opener, f'{url}?etl={upper_etl}&etl_args={{"suffix":"%2B"}}', etl_args="{}")
    assert strip(got) == upper(shards.expected[url], b"+")


@HOOKS_ONLY_ON_EMULATOR
def test_resume_without_etl_uses_range(
    ais_emulator: AisEmulator, opener: AisOpener, shards: Shards
) -> None:
    url = shards.urls[3]
    ais_emulator.cut_after(7000, times=2)
    stream = opener.open(url)
    try:
        got = list(tar_samples(stream, url))
        assert stream.resumes == 2  # type: ignore[attr-defined]
    finally:
        stream.close()
    assert strip(got) == shards.expected[url]
    assert ais_emulator.pending_cuts() == 0
    ranges = [r for m, p, q, r in ais_emulator.requests if m == "GET" and r]
    assert ranges == ["bytes=7000-", "bytes=14000-"]


@ETL_ONLY_ON_EMULATOR
def test_resume_through_etl_restarts_and_skips(
    ais_emulator: AisEmulator, opener: AisOpener, shards: Shards, upper_etl: str
) -> None:
    url = shards.urls[1]
    ais_emulator.cut_after(5000)
    stream = opener.open(url, etl=upper_etl)
    try:
        got = list(tar_samples(stream, url))
        assert stream.resumes == 1  # type: ignore[attr-defined]
    finally:
        stream.close()
    assert strip(got) == upper(shards.expected[url])
    etl_gets = [r for m, p, q, r in ais_emulator.requests if m == "GET" and "etl_name" in q]
    assert etl_gets == [None, None]  # re-requested from the start: AIStore ignores Range here


@HOOKS_ONLY_ON_EMULATOR
def test_resume_gives_up_with_offset(
    ais_emulator: AisEmulator, opener: AisOpener, shards: Shards
) -> None:
    ais_emulator.cut_after(3000)
    ais_emulator.cut_after(0, times=10)  # every retry breaks before its first byte
    stream = opener.open(shards.urls[0])
    with pytest.raises(ShardReadError) as info:
        stream.read()
    stream.close()
    assert info.value.url == shards.urls[0]
    assert info.value.offset == 3000
    assert ais_emulator.pending_cuts() == 10 - 2  # 2 retries (retries=2), then gave up


def test_object_replaced_mid_read_is_an_error(
    ais_backend: AisBackend, shards: Shards, faulty_proxy: Any
) -> None:
    """The first connection is cut after 20,000 bytes; the object is replaced before the
    resume, whose answer carries another checksum (the proxy sits where the bytes flow: in
    front of the target that owns the object on the real cluster)."""
    name = "train/shard-0000.tar"
    proxy = faulty_proxy(ais_backend.port_for(shards.bucket, name), cut_after=20_000, first=1)
    stream = ais_backend.opener(endpoint=proxy.url).open(shards.urls[0])
    head = stream.read(4096)
    assert len(head) == 4096
    ais_backend.put_object(shards.bucket, name, b"x" * 100000)
    with pytest.raises(ShardReadError, match="changed") as info:
        stream.read()
    stream.close()
    assert proxy.cuts == 1
    assert info.value.url == shards.urls[0]
    assert info.value.offset is not None and 4096 <= info.value.offset < 20_000


def test_missing_object(opener: AisOpener, shards: Shards) -> None:
    url = f"ais://{shards.bucket}/train/nope.tar"
    with pytest.raises(ShardNotFoundError) as info:
        opener.open(url)
    assert info.value.url == url
    assert "does not exist" in str(info.value)


def test_missing_bucket(ais_backend: AisBackend, opener: AisOpener) -> None:
    ghost = ais_backend.bucket_name("ghost")
    with pytest.raises(ShardNotFoundError, match=rf'bucket "ais://{ghost}" does not exist') as info:
        opener.open(f"ais://{ghost}/x.tar")
    assert info.value.url == f"ais://{ghost}/x.tar"


@ETL_ONLY_ON_EMULATOR
def test_unknown_etl_names_etl_and_url(opener: AisOpener, shards: Shards) -> None:
    with pytest.raises(ShardOpenError) as info:
        opener.open(shards.urls[0], etl="no-such-etl")
    assert "'no-such-etl'" in str(info.value)
    assert info.value.url == shards.urls[0]
    assert not isinstance(info.value, ShardNotFoundError)


def test_unreachable_endpoint_names_it() -> None:
    with refused_port() as port:
        endpoint = f"http://127.0.0.1:{port}"
        opener = AisOpener(endpoint=endpoint, retries=0)
        with pytest.raises(ShardOpenError, match="cannot reach AIStore at " + endpoint):
            opener.open("ais://b/x.tar")


def test_empty_object(ais_backend: AisBackend, opener: AisOpener) -> None:
    bucket = ais_backend.create_bucket("e")
    ais_backend.put_object(bucket, "empty.tar", b"")
    stream = opener.open(f"ais://{bucket}/empty.tar")
    assert stream.read() == b""
    stream.close()


@pytest.mark.emulator_only("a remote bucket needs a cloud backend configured on the cluster")
def test_remote_provider_via_url(ais_emulator: AisEmulator, opener: AisOpener) -> None:
    ais_emulator.store.create_bucket("cloud", provider="aws")
    ais_emulator.store.put_object("cloud", "a.tar", b"remote bytes", provider="aws")
    stream = opener.open("ais://cloud/a.tar?provider=s3")
    assert stream.read() == b"remote bytes"
    stream.close()
    assert ais_emulator.requests[-1][2]["provider"] == "aws"
    with pytest.raises(ShardNotFoundError):
        opener.open("ais://cloud/a.tar")  # no such ais:// bucket


def test_names_are_percent_decoded(ais_backend: AisBackend, opener: AisOpener) -> None:
    bucket = ais_backend.create_bucket("q")
    ais_backend.put_object(bucket, "dir/a b?.tar", b"odd")
    stream = opener.open(f"ais://{bucket}/dir/a%20b%3F.tar")
    assert stream.read() == b"odd"
    stream.close()


def test_bad_urls_and_options() -> None:
    opener = AisOpener(endpoint="http://127.0.0.1:9")  # refused before any request
    with pytest.raises(ConfigError, match="unknown option"):
        opener.open("ais://b/x.tar?etl_name=x")
    with pytest.raises(ConfigError, match="unknown option"):
        opener.open("ais://b/x.tar", compression="gz")
    with pytest.raises(ConfigError, match="provider"):
        opener.open("ais://b/x.tar?provider=dropbox")
    with pytest.raises(ConfigError):
        opener.open("s3://b/x.tar")


def test_pickle_drops_client_and_keeps_config(opener: AisOpener, shards: Shards) -> None:
    opener.open(shards.urls[0]).close()
    assert opener._read_client.peek() is not None
    clone = pickle.loads(pickle.dumps(opener))
    assert clone._client.peek() is None and clone._read_client.peek() is None
    assert clone.config == opener.config
    assert strip(samples_of(clone, shards.urls[0])) == shards.expected[shards.urls[0]]
