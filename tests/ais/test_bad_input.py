"""Bad input on ``ais://``: a cluster that is down, a target killed mid-read (a cluster of its
own), odd object names, an empty listing (missing buckets: ``test_read``, ``test_list_write``)."""

from __future__ import annotations

import os
import socket
import time

import pytest

import wds_cloud as wds
from tests.ais.backends import AisBackend, RealBackend
from tests.servers import conftest_plugin
from wds_cloud.errors import ShardError, ShardNotFoundError, ShardOpenError
from wds_cloud.listing import list_shards
from wds_cloud.openers.ais.opener import AisOpener

pytestmark = pytest.mark.ais

ODD = "dir with space/ünïcødé 名前 #1?.tar"


def test_odd_object_names_round_trip(ais_backend: AisBackend, opener: AisOpener) -> None:
    """A name with spaces, non-ASCII letters, ``#`` and ``?``: written through the opener,
    listed as a percent-encoded URL, read back from that URL."""
    bucket = ais_backend.create_bucket("odd-names")
    data = os.urandom(70_000)
    encoded = "dir%20with%20space/%C3%BCn%C3%AFc%C3%B8d%C3%A9%20%E5%90%8D%E5%89%8D%20%231%3F.tar"
    with opener.create(f"ais://{bucket}/{encoded}") as writer:
        writer.write(data)
    assert ais_backend.get_object(bucket, ODD) == data
    assert opener.list_sizes(f"ais://{bucket}/dir%20with") == [
        (f"ais://{bucket}/{encoded}", len(data))
    ]
    with opener.open(f"ais://{bucket}/{encoded}") as stream:
        assert stream.read() == data
    with opener.open_at(f"ais://{bucket}/{encoded}", 69_000) as stream:
        assert stream.read() == data[69_000:]


def test_empty_prefix_lists_nothing(ais_backend: AisBackend, opener: AisOpener) -> None:
    bucket = ais_backend.create_bucket("sparse")
    ais_backend.put_object(bucket, "train/a.tar", b"x")
    assert opener.list(f"ais://{bucket}/val/") == []
    registry = ais_backend.registry()
    with pytest.raises(ShardNotFoundError, match="no shards") as info:
        list_shards(f"ais://{bucket}/val/", registry=registry)
    assert info.value.url == f"ais://{bucket}/val/"


def test_endpoint_with_nothing_listening_fails_fast_naming_it() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{sock.getsockname()[1]}"
    began = time.monotonic()
    with pytest.raises(ShardOpenError, match=f"cannot reach AIStore at {endpoint}"):
        AisOpener(endpoint=endpoint).open("ais://b/x.tar")  # default retries and backoff
    assert time.monotonic() - began < 30  # a hang guard, not a timing check
    with pytest.raises(ShardOpenError, match=f"cannot reach AIStore at {endpoint}"):
        AisOpener(endpoint=endpoint, retries=0).list("ais://b/")


@pytest.mark.slow
def test_target_killed_mid_read_then_cluster_down(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A cluster of its own (killing a target of the session's cluster would break the other
    tests): a read whose target is SIGKILLed fails naming the URL and the offset it reached,
    within the stall bound (the object lived on that target only); then, with the whole
    cluster stopped, an open is refused at once, naming the endpoint."""
    cluster = conftest_plugin._start(tmp_path_factory, authn=False)
    try:
        backend = RealBackend(cluster)
        bucket = backend.create_bucket("doomed")
        data = os.urandom(48 << 20)
        backend.put_object(bucket, "big.tar", data)
        url = f"ais://{bucket}/big.tar"
        opener = AisOpener(endpoint=cluster.endpoint, retries=2, backoff=0.0, stall_timeout=5)
        stream = opener.open(url)
        assert stream.read(1 << 20) == data[: 1 << 20]
        port = backend.port_for(bucket, "big.tar")
        (owner,) = [node.name for node in cluster.nodes if node.port == port]
        cluster.kill(owner)
        began = time.monotonic()
        got = 1 << 20
        with stream, pytest.raises(ShardError) as info:
            while chunk := stream.read(1 << 20):
                assert chunk == data[got : got + len(chunk)]
                got += len(chunk)
        assert time.monotonic() - began < opener.stall_bound() + 30
        assert info.value.url == url
        assert info.value.offset == got < len(data)

        cluster.stop()
        began = time.monotonic()
        with pytest.raises(ShardOpenError, match=f"cannot reach AIStore at {cluster.endpoint}"):
            AisOpener(endpoint=cluster.endpoint, retries=0).open(url)
        assert time.monotonic() - began < 10
    finally:
        cluster.stop()


def test_webdataset_on_a_missing_bucket_names_the_url(ais_backend: AisBackend) -> None:
    url = f"ais://{ais_backend.bucket_name('absent')}/shard-0.tar"
    with pytest.raises(ShardNotFoundError) as info:
        list(wds.WebDataset([url], registry=ais_backend.registry()))
    assert info.value.url == url
