"""Resuming mid-epoch over http://, gs://, az:// and ais:// shards, each on its real local server
(the HTTP file server, fake-gcs-server, Azurite, the AIStore emulator through the aistore SDK).

- Every sample of the epoch is delivered exactly once across checkpoints, and the shard being
  read at a checkpoint is read again from its offset (``open_at``), not from 0.
- Resuming does not read the bytes already consumed: a TCP proxy in front of the server counts
  the bytes the server sent during the resumed run. With ``open_at`` that is the shard's tail
  plus response headers; an opener without ``open_at`` (the reader's fallback: open and read up
  to the offset) is measured the same way and sends the whole shard, which shows the count can
  tell the two apart.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.ais.conftest import etl_url, upper_etl  # noqa: F401 - fixtures
from tests.resume.helpers import (
    assert_exactly_once,
    counting,
    key_of,
    run_interrupted,
    shard_bytes,
)
from tests.support.faulty_proxy import FaultyProxy
from tests.support.http_server import HttpFileServer
from wds_cloud.openers.registry import OpenerRegistry

BACKENDS = [
    "http",
    pytest.param("gcs", marks=pytest.mark.gcs),
    pytest.param("azure", marks=pytest.mark.azure),
    pytest.param("ais", marks=pytest.mark.ais),
]


@dataclass
class Backend:
    """Shards on one backend's server, reached directly or through a proxy.

    Attributes:
        scheme: the URL scheme the registry routes.
        port: the server's port (proxies forward to it).
        put: stores ``(name, data)``.
        url: ``(name, base)`` -> the shard URL when requests go to ``base`` (http://HOST:PORT).
        opener: ``(cls, base)`` -> an opener of class ``cls`` sending its requests to ``base``.
        opener_class: the backend's opener class.
    """

    scheme: str
    port: int
    put: Callable[[str, bytes], None]
    url: Callable[[str, str], str]
    opener: Callable[[type, str], Any]
    opener_class: type

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _http(tmp_path: Path) -> Iterator[Backend]:
    from wds_cloud.openers.http.opener import HttpOpener

    root = tmp_path / "www"
    root.mkdir()
    with HttpFileServer(root) as server:
        yield Backend(
            "http",
            server.port,
            lambda name, data: (root / name).write_bytes(data) and None,
            lambda name, base: f"{base}/{name}",
            lambda cls, base: cls(backoff=0.0),
            HttpOpener,
        )


def _gcs(server: Any) -> Iterator[Backend]:
    from wds_cloud.openers.gcs.opener import GcsOpener

    client = server.client()
    bucket = client.create_bucket(f"resume-{id(client)}")
    try:
        yield Backend(
            "gs",
            server.port,
            lambda name, data: bucket.blob(name).upload_from_string(data),
            lambda name, base: f"gs://{bucket.name}/{name}",
            lambda cls, base: cls(endpoint=base, backoff=0.0),
            GcsOpener,
        )
    finally:
        for blob in client.list_blobs(bucket.name):
            blob.delete()


def _azure(server: Any) -> Iterator[Backend]:
    from wds_cloud.openers.azure.opener import AzureOpener

    container = server.container(f"resume-{id(server)}")

    def opener(cls: type, base: str) -> Any:
        endpoint = f"{base}/{server.account}"
        return cls(account_name=server.account, account_key=server.key, endpoint=endpoint)

    try:
        yield Backend(
            "az",
            server.port,
            lambda name, data: container.upload_blob(name, data, overwrite=True) and None,
            lambda name, base: f"az://{container.container_name}/{name}",
            opener,
            AzureOpener,
        )
    finally:
        container.delete_container()


def _ais(emu: Any) -> Iterator[Backend]:
    from wds_cloud.openers.ais.opener import AisOpener

    emu.store.create_bucket("resume")
    yield Backend(
        "ais",
        emu.port,
        lambda name, data: emu.store.put_object("resume", name, data),
        lambda name, base: f"ais://resume/{name}",
        lambda cls, base: cls(endpoint=base, retries=2, backoff=0.0),
        AisOpener,
    )


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    name = request.param
    if name == "http":
        yield from _http(tmp_path)
    elif name == "gcs":
        yield from _gcs(request.getfixturevalue("fake_gcs"))
    elif name == "azure":
        yield from _azure(request.getfixturevalue("azurite"))
    else:
        yield from _ais(request.getfixturevalue("ais_emulator"))


class StreamOnly:
    """An opener with ``open`` only (no ``open_at``, no ``read_range``), wrapping a real one:
    what the resumable reader falls back to for a backend without ranged reads."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def open(self, url: str, **options: Any) -> Any:
        return self.inner.open(url, **options)


def _registry(scheme: str, opener: Any) -> OpenerRegistry:
    registry = OpenerRegistry()
    registry.register(scheme, opener, override=True)
    return registry


@pytest.mark.parametrize("stops", [[20, 40, 33], [7, 61, 1, 50]])
def test_resume_exactly_once(backend: Backend, stops: list[int]) -> None:
    import wds_cloud as wds

    urls, keys = [], []
    for i in range(5):
        data, k = shard_bytes(i, 30, payload=2000)
        backend.put(f"shard-{i}.tar", data)
        urls.append(backend.url(f"shard-{i}.tar", backend.base))
        keys.extend(k)
    opener = backend.opener(counting(backend.opener_class), backend.base)
    opener.starts = []
    registry = _registry(backend.scheme, opener)

    def make() -> Any:
        return (
            wds.WebDataset(urls, shardshuffle=True, seed=4, registry=registry)
            .shuffle(15)
            .to_tuple("txt", "cls")
        )

    delivered, states = run_interrupted(make, stops)
    assert_exactly_once(delivered, keys)
    # each resume reads the shard being read at the checkpoint from its offset, not from 0
    assert sum(1 for s in opener.starts if s > 0) >= len(stops)
    assert all(s["open"] for s in states)  # every checkpoint fell inside a shard


def _resume_bytes(
    backend: Backend, proxy: FaultyProxy, opener: Any, consumed: int
) -> tuple[int, int]:
    """Write one shard, read ``consumed`` samples through ``proxy``, take the state, resume
    with ``opener`` (reached through the proxy too); return the bytes the server sent during
    the resumed run and the size of the shard's unread tail. Checks every sample came once."""
    import wds_cloud as wds

    data, keys = shard_bytes(0, 200, payload=5000)
    backend.put("big.tar", data)
    url = backend.url("big.tar", proxy.url)
    first = _registry(backend.scheme, backend.opener(backend.opener_class, proxy.url))
    delivered = []
    pipeline = wds.WebDataset([url], shardshuffle=False, registry=first).to_tuple("txt")
    for n, item in enumerate(pipeline, 1):
        delivered.append(key_of(item))
        if n == consumed:
            state = json.loads(json.dumps(pipeline.state_dict()))
            break
    tail = max(state["open"][url])
    assert tail > len(data) // 2  # the checkpoint is deep in the shard
    before = proxy.bytes_forwarded
    resumed = wds.WebDataset([url], shardshuffle=False, registry=_registry(backend.scheme, opener))
    resumed = resumed.to_tuple("txt")
    resumed.load_state_dict(state)
    delivered.extend(key_of(item) for item in resumed)
    assert_exactly_once(delivered, keys)
    return proxy.bytes_forwarded - before, len(data) - tail


def test_resume_does_not_read_consumed_bytes(backend: Backend) -> None:
    with FaultyProxy(backend.port) as proxy:
        opener = backend.opener(backend.opener_class, proxy.url)
        sent, tail_bytes = _resume_bytes(backend, proxy, opener, consumed=150)
        ranged = proxy.ranged_requests
    # the tail of the shard and the headers of the request that fetched it, nothing before
    assert tail_bytes <= sent < tail_bytes + 4096
    assert ranged >= 1


def test_the_fallback_without_open_at_reads_them(backend: Backend) -> None:
    """The control of the test above: without ``open_at`` the consumed bytes are sent again."""
    with FaultyProxy(backend.port) as proxy:
        opener = StreamOnly(backend.opener(backend.opener_class, proxy.url))
        sent, tail_bytes = _resume_bytes(backend, proxy, opener, consumed=150)
    assert sent > 3 * tail_bytes  # the whole shard: 200 samples, 150 of them consumed


def _etl_shards(emulator: Any, bucket: str, etl: str) -> tuple[list[str], list[str]]:
    """Three shards of 25 samples in ``bucket``, as URLs read through ``etl``, and their keys."""
    emulator.store.create_bucket(bucket)
    urls, keys = [], []
    for i in range(3):
        data, k = shard_bytes(i, 25, payload=500)
        emulator.store.put_object(bucket, f"shard-{i}.tar", data)
        urls.append(f"ais://{bucket}/shard-{i}.tar?etl={etl}")
        keys.extend(k)
    return urls, keys


@pytest.mark.ais
def test_resume_through_an_ais_etl(ais_emulator: Any, upper_etl: str) -> None:  # noqa: F811
    """Through an inline ETL the tail is read from the transformed object's start up to the
    position (AIStore ignores Range there); the samples are the transformed ones, once each."""
    import wds_cloud as wds
    from wds_cloud.openers.ais.opener import AisOpener

    urls, keys = _etl_shards(ais_emulator, "etl", upper_etl)
    opener = counting(AisOpener)(endpoint=ais_emulator.url, retries=2, backoff=0.0)
    opener.starts = []
    registry = _registry("ais", opener)

    def make() -> Any:
        return wds.WebDataset(urls, shardshuffle=False, registry=registry).to_tuple("txt")

    delivered, _ = run_interrupted(make, [10, 30, 3])
    assert_exactly_once([k.lower() for k in delivered], keys)
    assert all(k == k.upper() for k in delivered)  # transformed by the ETL
    assert sum(1 for s in opener.starts if s > 0) == 3
    etl_gets = [r for m, p, q, r in ais_emulator.requests if m == "GET" and "etl_name" in q]
    assert etl_gets and all(r is None for r in etl_gets)


@pytest.mark.ais
def test_resume_through_an_ais_etl_with_samples_in_buffers(
    ais_emulator: Any,
    upper_etl: str,  # noqa: F811
) -> None:
    """Samples that sat in a shuffle buffer cannot be fetched by range through an ETL (its
    offsets are the transformed stream's): such a shard is read again from its start and the
    wanted samples picked; every sample once, transformed."""
    import wds_cloud as wds
    from wds_cloud.openers.ais.opener import AisOpener

    urls, keys = _etl_shards(ais_emulator, "etlbuf", upper_etl)
    registry = _registry("ais", AisOpener(endpoint=ais_emulator.url, retries=2, backoff=0.0))

    def make() -> Any:
        return (
            wds.WebDataset(urls, shardshuffle=False, registry=registry, seed=5)
            .shuffle(20)
            .to_tuple("txt")
        )

    delivered, _ = run_interrupted(make, [12, 30, 5])
    assert_exactly_once([k.lower() for k in delivered], keys)
    assert all(k == k.upper() for k in delivered)


def test_resume_over_an_http_server_that_ignores_range(tmp_path: Path) -> None:
    """A server answering every ranged GET with 200 and the whole shard: tails and buffered
    samples are still the right bytes (read from the start and skipped), each sample once."""
    import wds_cloud as wds
    from wds_cloud.openers.http.opener import HttpOpener

    root = tmp_path / "www"
    root.mkdir()
    with HttpFileServer(root) as server:
        server.ignore_range = True
        urls, keys = [], []
        for i in range(4):
            data, k = shard_bytes(i, 30, payload=1000)
            (root / f"shard-{i}.tar").write_bytes(data)
            urls.append(server.url(f"shard-{i}.tar"))
            keys.extend(k)
        registry = _registry("http", HttpOpener(backoff=0.0))

        def make() -> Any:
            return (
                wds.WebDataset(urls, shardshuffle=True, seed=9, registry=registry)
                .shuffle(15)
                .to_tuple("txt")
            )

        delivered, states = run_interrupted(make, [17, 45, 20])
    assert_exactly_once(delivered, keys)
    assert all(s["open"] for s in states)
