"""``AisOpener.read_batch`` (AIStore GetBatch, ``/v1/ml/moss``) against the real AIStore 5.0 cluster.

Ranges of objects and of the members of a shard, in any order and repeated; the bytes equal
the objects' own bytes and ``read_range``; the SDK's own parser reads the same answers; missing
objects and buckets (an error naming URL and offset, or skipped and counted); a batch cut into
several requests; a range past the end of an object (a stale index); a connection cut in the
middle of the answer (resumed from the first incomplete entry); AuthN tokens.

AIStore's proxy redirects GetBatch to a target (307), so the cut is made by an HTTP forward
proxy (``HTTP_PROXY``) that sees both requests, not by a TCP proxy in front of the AIS proxy.
"""

from __future__ import annotations

import io
import random
import socket
import tarfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.servers.aistore import NO_ACCESS, READER, Cluster
from tests.support.tarbuild import tar_bytes
from wds_cloud.core.handlers import ContinueHandler
from wds_cloud.errors import ShardError, ShardReadError
from wds_cloud.openers.ais.batch import BatchStats, pieces
from wds_cloud.openers.ais.batchtar import TarMemberReader
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.capabilities import BatchReader, RangeRequest

aistore_sdk = pytest.importorskip("aistore.sdk")

pytestmark = [pytest.mark.ais, pytest.mark.timeout(1800)]


def _client(cluster: Cluster, token: str | None = None) -> Any:
    return aistore_sdk.Client(cluster.endpoint, token=token, timeout=(2, 60))


@pytest.fixture(scope="module")
def objects(ais_cluster: Cluster) -> dict[str, bytes]:
    """A few objects in two buckets, by URL (cheap: many ranges of few objects)."""
    rng = random.Random(25)
    tag = uuid.uuid4().hex[:6]
    client = _client(ais_cluster)
    found: dict[str, bytes] = {}
    for bucket_name, sizes in ((f"gb-a-{tag}", (1, 4096, 300_000)), (f"gb-b-{tag}", (1 << 20,))):
        bucket = client.bucket(bucket_name).create(exist_ok=True)
        for i, size in enumerate(sizes):
            name = f"dir/obj {i}.bin" if i != 2 else "d/" + "long-name-" * 12 + f"{i}.bin"
            data = rng.randbytes(size)
            bucket.object(name).get_writer().put_content(data)
            found[f"ais://{bucket_name}/{name.replace(' ', '%20')}"] = data
    return found


def _opener(cluster: Cluster, **overrides: Any) -> AisOpener:
    return AisOpener(endpoint=cluster.endpoint, token=None, timeout=(3, 60), **overrides)


def _ranges(objects: dict[str, bytes], count: int, seed: int) -> list[RangeRequest]:
    rng = random.Random(seed)
    urls = sorted(objects)
    out = []
    for _ in range(count):
        url = rng.choice(urls)
        size = len(objects[url])
        offset = rng.choice((0, size - 1, rng.randrange(size)))
        length = rng.choice((1, size - offset, rng.randint(0, min(size - offset, 20_000))))
        out.append(RangeRequest(url, offset, length))
    return out


def test_thousands_of_ranges_equal_the_objects_and_read_range(
    ais_cluster: Cluster, objects: dict[str, bytes]
) -> None:
    opener = _opener(ais_cluster)
    assert isinstance(opener, BatchReader)
    requests = _ranges(objects, 3000, seed=1)
    stats = BatchStats()
    got = opener.read_batch(requests, stats=stats)

    assert [len(g) for g in got] == [r.length for r in requests]
    for r, data in zip(requests, got, strict=True):  # order kept, duplicates included
        assert data == objects[r.url][r.offset : r.offset + r.length], r
    with ThreadPoolExecutor(8) as pool:  # one ranged GET per entry, the same bytes
        ranged = list(pool.map(lambda r: opener.read_range(r.url, r.offset, r.length), requests))
    assert ranged == got
    nonzero = [r.length for r in requests if r.length]
    assert stats.requests == len(pieces(nonzero, 1000, 64 << 20)) == 3
    assert (stats.entries, stats.rereads, stats.resumes) == (len(nonzero), 0, 0)


def test_members_of_a_shard_by_their_offsets(ais_cluster: Cluster) -> None:
    bucket_name = f"gb-shard-{uuid.uuid4().hex[:6]}"
    bucket = _client(ais_cluster).bucket(bucket_name).create()
    rng = random.Random(3)
    members = [
        (f"s/{i:04d}.{ext}", rng.randbytes(rng.randint(0, 3000)))
        for i in range(200)
        for ext in ("jpg", "cls")
    ]
    shard = tar_bytes(members)
    bucket.object("shard-0.tar").get_writer().put_content(shard)
    url = f"ais://{bucket_name}/shard-0.tar"
    with tarfile.open(fileobj=io.BytesIO(shard)) as tar:
        spans = {m.name: (m.offset_data, m.size) for m in tar.getmembers()}
    order = list(range(len(members)))
    rng.shuffle(order)
    requests = [RangeRequest(url, *spans[members[i][0]]) for i in order]

    got = _opener(ais_cluster).read_batch(requests)

    assert got == [members[i][1] for i in order]


def test_the_sdk_parses_the_same_answer(ais_cluster: Cluster, objects: dict[str, bytes]) -> None:
    """The SDK's own reading (tarfile over the same request) gives the same bytes."""
    opener = _opener(ais_cluster)
    requests = [r for r in _ranges(objects, 400, seed=4) if r.length]
    ours = opener.read_batch(requests)
    batch = _client(ais_cluster).batch(cont_on_err=True, streaming_get=True)
    for r in requests:
        target = opener.target(r.url)
        batch.add(target.name, bck=target.bucket, provider="ais", start=r.offset, length=r.length)
    theirs = [content for _, content in batch.get()]
    assert theirs == ours


def test_the_parser_reads_real_answers_through_tiny_reads(
    ais_cluster: Cluster, objects: dict[str, bytes]
) -> None:
    """Answers of the real cluster (PAX headers of long names, ``__404__`` members), read by
    :class:`TarMemberReader` one to a few hundred bytes at a time, equal ``tarfile``'s reading."""
    opener = _opener(ais_cluster)
    requests = [r for r in _ranges(objects, 200, seed=8) if r.length]
    batch = _client(ais_cluster).batch(cont_on_err=True, streaming_get=True)
    for r in requests:
        target = opener.target(r.url)
        batch.add(target.name, bck=target.bucket, provider="ais", start=r.offset, length=r.length)
    batch.add("no-such-object", bck=opener.target(requests[0].url).bucket, provider="ais")
    raw = batch.get(raw=True)
    answer = raw.read()
    raw.release_conn()
    with tarfile.open(fileobj=io.BytesIO(answer)) as tar:
        expected = [(m.name, (tar.extractfile(m) or io.BytesIO()).read()) for m in tar]
    assert any(len(name) > 100 for name, _ in expected) and expected[-1][0].startswith("__404__/")
    for seed, most in ((1, 1), (2, 7), (3, 300), (4, 100_000)):
        rng = random.Random(seed)
        body = _Tiny(answer, rng, most)
        reader = TarMemberReader(body)  # type: ignore[arg-type]  # a Body by shape
        got = []
        while (member := reader.next_member()) is not None:
            got.append(member)
        assert got == expected


class _Tiny:
    def __init__(self, data: bytes, rng: random.Random, most: int) -> None:
        self.data, self.rng, self.most, self.pos = data, rng, most, 0

    def read1(self, n: int) -> bytes:
        chunk = self.data[self.pos : self.pos + min(n, self.rng.randint(1, self.most))]
        self.pos += len(chunk)
        return chunk

    def close(self) -> None:
        pass


def test_missing_entries_raise_naming_the_url_and_offset_or_are_skipped_and_counted(
    ais_cluster: Cluster, objects: dict[str, bytes]
) -> None:
    opener = _opener(ais_cluster)
    good = _ranges(objects, 20, seed=5)
    bucket = urlsplit(good[0].url).netloc
    missing = RangeRequest(f"ais://{bucket}/no-such-object", 100, 7)
    requests = [*good[:10], missing, *good[10:]]

    with pytest.raises(ShardReadError) as info:
        opener.read_batch(requests)
    assert info.value.url == missing.url and info.value.offset == 100
    assert "no-such-object" in str(info.value)

    handler = ContinueHandler()
    stats = BatchStats()
    got = opener.read_batch(requests, handler=handler, stats=stats)
    assert handler.count == stats.skipped == 1 and stats.requests == 1
    assert got[10] == b""
    assert got[:10] + got[11:] == opener.read_batch(good)

    gone = RangeRequest(f"ais://no-such-bucket-{uuid.uuid4().hex[:6]}/x", 0, 5)
    handler, stats = ContinueHandler(), BatchStats()
    got = opener.read_batch([*good[:3], gone, *good[3:6]], handler=handler, stats=stats)
    assert handler.count == 1 and got[3] == b""
    assert (stats.requests, stats.rereads) == (2, 0)
    assert got[:3] + got[4:] == opener.read_batch(good[:6])
    with pytest.raises(ShardError) as err:
        opener.read_batch([gone])
    assert err.value.url == gone.url


def test_a_batch_larger_than_one_request_is_sent_in_pieces(
    ais_cluster: Cluster, objects: dict[str, bytes]
) -> None:
    requests = [r for r in _ranges(objects, 1000, seed=6) if r.length]
    expected = [objects[r.url][r.offset : r.offset + r.length] for r in requests]

    stats = BatchStats()
    assert _opener(ais_cluster, batch_entries=64).read_batch(requests, stats=stats) == expected
    assert stats.requests == -(-len(requests) // 64)

    stats = BatchStats()
    opener = _opener(ais_cluster, batch_bytes=256 << 10)
    assert opener.read_batch(requests, stats=stats) == expected
    lengths = [r.length for r in requests]
    assert stats.requests == len(pieces(lengths, 1000, 256 << 10)) > 4


def test_a_range_past_the_end_raises_naming_the_url_and_offset(
    ais_cluster: Cluster, objects: dict[str, bytes]
) -> None:
    """AIStore 5.0 answers such an entry with the whole object (after ~20 s): the size check
    catches it and the ranged GET that follows names the problem."""
    url = next(u for u, d in objects.items() if len(d) == 4096)
    good = RangeRequest(url, 10, 20)
    with pytest.raises(ShardReadError, match="range ends at byte 4100") as info:
        _opener(ais_cluster).read_batch([good, RangeRequest(url, 4000, 100), good])
    assert (info.value.url, info.value.offset) == (url, 4000)


class CuttingForwardProxy:
    """An HTTP forward proxy for ``HTTP_PROXY`` on 127.0.0.1: one request per connection,
    forwarded with ``Connection: close`` to the origin its absolute URI names; the responses to
    the first ``cuts`` requests whose path contains ``match`` are cut after ``cut_after`` bytes.
    """

    def __init__(self, *, cut_after: int, match: bytes, cuts: int) -> None:
        self.cut_after, self.match, self.left = cut_after, match, cuts
        self.cuts = 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.threads: list[threading.Thread] = []
        self._spawn(self._accept)

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self._spawn(self._serve, client)

    def _serve(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                data = client.recv(65536)
                if not data:
                    return
                head += data
            head, _, body = head.partition(b"\r\n\r\n")
            line, *headers = head.split(b"\r\n")
            method, target, version = line.split(b" ")
            length = 0
            kept = []
            for h in headers:
                name = h.split(b":", 1)[0].strip().lower()
                if name == b"content-length":
                    length = int(h.split(b":", 1)[1])
                if name not in (b"connection", b"proxy-connection", b"keep-alive"):
                    kept.append(h)
            while len(body) < length:
                body += client.recv(65536)
            parts = urlsplit(target.decode())
            path = (parts.path + (f"?{parts.query}" if parts.query else "")).encode()
            request = (
                b"\r\n".join([b" ".join([method, path, version]), *kept, b"Connection: close"])
                + b"\r\n\r\n"
                + body
            )
            with self.lock:
                cut = self.match in path and self.left > 0
                if cut:
                    self.left -= 1
            with socket.create_connection((parts.hostname, parts.port)) as upstream:
                upstream.sendall(request)
                sent = 0
                while data := upstream.recv(65536):
                    if cut and sent + len(data) >= self.cut_after:
                        client.sendall(data[: self.cut_after - sent])
                        with self.lock:
                            self.cuts += 1
                        return
                    client.sendall(data)
                    sent += len(data)

    def close(self) -> None:
        self.listener.close()


def test_a_connection_cut_mid_answer_resumes_from_the_first_incomplete_entry(
    ais_cluster: Cluster, objects: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = [r for r in _ranges(objects, 600, seed=7) if r.length]
    expected = [objects[r.url][r.offset : r.offset + r.length] for r in requests]
    answer = sum(512 + -(-r.length // 512) * 512 for r in requests)
    proxy = CuttingForwardProxy(cut_after=answer // 2, match=b"/v1/ml/moss/", cuts=2)
    try:
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        stats = BatchStats()
        got = _opener(ais_cluster, retries=3, backoff=0.05).read_batch(requests, stats=stats)
    finally:
        proxy.close()
    assert proxy.cuts == 2
    assert got == expected
    assert stats.resumes == 2 and stats.requests == 3 and stats.rereads == 0


def test_authn_token_is_sent_and_a_missing_one_is_a_typed_error(
    ais_cluster_authn: Cluster,
) -> None:
    cluster = ais_cluster_authn
    name = f"gb-auth-{uuid.uuid4().hex[:6]}"
    admin = _client(cluster, cluster.token_for("admin"))
    admin.bucket(name).create().object("o").get_writer().put_content(b"0123456789")
    url = f"ais://{name}/o"
    requests = [RangeRequest(url, 2, 3), RangeRequest(url, 0, 10)]

    reader = AisOpener(endpoint=cluster.endpoint, token=cluster.token_for(READER))
    assert reader.read_batch(requests) == [b"234", b"0123456789"]
    for token in (None, cluster.token_for(NO_ACCESS)):
        with pytest.raises(ShardError) as info:
            AisOpener(endpoint=cluster.endpoint, token=token, retries=0).read_batch(requests)
        assert info.value.url == url
        assert "AuthN token" in str(info.value)
