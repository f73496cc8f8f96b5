"""executor="threads" equals executor="processes" on every backend, each on its real local
server: the HTTP file server, SeaweedFS (S3), fake-gcs-server (GCS) and the AIStore emulator
(through the aistore SDK). The same shards on each give the same batches as on local disk."""

from __future__ import annotations

import io
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.pytorch.test_threads import _batches, _pipeline, write_image_shard
from tests.support.faulty_proxy import faulty_proxy  # noqa: F401 - fixture
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.pytorch.builder import make_loader

NSHARDS, PER_SHARD = 4, 8
BACKENDS = [
    "http",
    pytest.param("s3", marks=pytest.mark.s3),
    pytest.param("gcs", marks=pytest.mark.gcs),
    pytest.param("ais", marks=pytest.mark.ais),
]


@dataclass
class Stored:
    """Shards stored on one backend: their URLs and the registry that reads them."""

    urls: list[str]
    registry: OpenerRegistry | None


def _shards(tmp_path: Path) -> list[tuple[str, bytes]]:
    out = []
    for s in range(NSHARDS):
        path = tmp_path / f"img-{s:03d}.tar"
        write_image_shard(path, s * PER_SHARD, PER_SHARD)
        out.append((path.name, path.read_bytes()))
    return out


def _registry(scheme: str, opener: Any) -> OpenerRegistry:
    registry = OpenerRegistry()
    registry.register(scheme, opener, override=True)
    return registry


def _http(
    request: pytest.FixtureRequest, shards: list[tuple[str, bytes]], tmp_path: Path
) -> Stored:
    from tests.support.http_server import HttpFileServer

    root = tmp_path / "www"
    root.mkdir()
    for name, data in shards:
        (root / name).write_bytes(data)
    server = HttpFileServer(root).__enter__()
    request.addfinalizer(lambda: server.__exit__(None, None, None))
    return Stored([f"http://127.0.0.1:{server.port}/{name}" for name, _ in shards], None)


def _s3(request: pytest.FixtureRequest, shards: list[tuple[str, bytes]], tmp_path: Path) -> Stored:
    from tests.s3.conftest import make_config
    from tests.support.seaweed import boto3_client, create_bucket
    from wds_cloud.openers.s3.opener import S3Opener

    seaweed = request.getfixturevalue("seaweed")
    client = boto3_client(seaweed.endpoint_url)
    bucket = create_bucket(client, f"threads-{random.randrange(10**9)}")
    for name, data in shards:
        client.put_object(Bucket=bucket, Key=name, Body=io.BytesIO(data))
    registry = _registry("s3", S3Opener(make_config(seaweed.endpoint_url)))
    return Stored([f"s3://{bucket}/{name}" for name, _ in shards], registry)


def _gcs(request: pytest.FixtureRequest, shards: list[tuple[str, bytes]], tmp_path: Path) -> Stored:
    from wds_cloud.openers.gcs.opener import GcsOpener

    server = request.getfixturevalue("fake_gcs")
    client = server.client()
    bucket = client.create_bucket(f"threads-{random.randrange(10**9)}")
    for name, data in shards:
        bucket.blob(name).upload_from_string(data)
    registry = _registry("gs", GcsOpener(endpoint=f"http://127.0.0.1:{server.port}", backoff=0.0))
    return Stored([f"gs://{bucket.name}/{name}" for name, _ in shards], registry)


def _ais(request: pytest.FixtureRequest, shards: list[tuple[str, bytes]], tmp_path: Path) -> Stored:
    from wds_cloud.openers.ais.opener import AisOpener

    emu = request.getfixturevalue("ais_emulator")
    emu.store.create_bucket("threads")
    for name, data in shards:
        emu.store.put_object("threads", name, data)
    opener = AisOpener(endpoint=f"http://127.0.0.1:{emu.port}", retries=2, backoff=0.0)
    return Stored([f"ais://threads/{name}" for name, _ in shards], _registry("ais", opener))


_MAKERS: dict[str, Callable[..., Stored]] = {"http": _http, "s3": _s3, "gcs": _gcs, "ais": _ais}


@pytest.fixture(params=BACKENDS)
def stored(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Stored, Stored]]:
    """The same shards on a backend and on local disk."""
    shards = _shards(tmp_path)
    local = Stored([str(tmp_path / name) for name, _ in shards], None)
    yield _MAKERS[request.param](request, shards, tmp_path), local


@pytest.mark.parametrize("case", range(3))
def test_threads_equal_processes_on_backend(stored: tuple[Stored, Stored], case: int) -> None:
    remote, local = stored
    kw = _pipeline(random.Random(2000 + case))
    extra: dict[str, Any] = {} if remote.registry is None else {"registry": remote.registry}
    got = _batches(make_loader(remote.urls, executor="threads", **kw, **extra))
    want = _batches(make_loader(remote.urls, executor="processes", **kw, **extra))
    assert got == want, kw
    # and the same as the same shards on local disk
    assert got == _batches(make_loader(local.urls, executor="threads", **kw)), kw


def test_stalled_source_hits_the_stall_bound(
    tmp_path: Path,
    faulty_proxy: Callable[..., Any],  # noqa: F811 - the fixture imported above
) -> None:
    """A shard whose server never answers fails the loader within the opener's stall bound,
    naming the shard, and leaves no reader thread behind."""
    from tests.pytorch.test_threads import _reader_threads
    from tests.support.http_server import HttpFileServer
    from wds_cloud.errors import ShardError
    from wds_cloud.openers.http.opener import HttpOpener

    root = tmp_path / "www"
    root.mkdir()
    for name, data in _shards(tmp_path):
        (root / name).write_bytes(data)
    with HttpFileServer(root) as server:
        proxy = faulty_proxy(server.port, stall_after=0, match=b"img-002.tar")
        urls = [f"{proxy.url}/img-{s:03d}.tar" for s in range(NSHARDS)]
        registry = _registry("http", HttpOpener(backoff=0.0, stall_timeout=1))
        loader = make_loader(
            urls,
            batch_size=4,
            num_workers=2,
            shardshuffle=False,
            to_tuple="cls",
            registry=registry,
            executor="threads",
        )
        began = time.monotonic()
        with pytest.raises(ShardError) as info:
            list(loader)
        assert time.monotonic() - began < 30  # a hang guard, not a timing check
        assert "stalled" in str(info.value)
        assert info.value.url is not None and info.value.url.endswith("img-002.tar")
        assert proxy.stalls >= 1
        assert not _reader_threads()
