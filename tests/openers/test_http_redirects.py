"""Redirects of the HTTP opener between two real local servers: credentials stay with their
origin on every read path, no https -> http downgrade, loops and long chains are refused."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.openers.conftest import make_shard
from tests.support.http_server import HttpFileServer
from wds_cloud.errors import ShardOpenError
from wds_cloud.openers.http.config import HttpConfig
from wds_cloud.openers.http.opener import HttpOpener
from wds_cloud.openers.http.redirects import next_hop, origin

SECRETS = {
    "Authorization": "Bearer T",
    "Cookie": "session=c",
    "Proxy-Authorization": "Basic p",
    "X-Api-Key": "k",  # secret by name (the rule that masks HttpConfig.headers in reprs)
}
HARMLESS = {"X-Trace": "t-1"}


@pytest.fixture
def other(tmp_path: Path) -> Iterator[HttpFileServer]:
    """A second server (another port): the target of cross-origin redirects."""
    root = tmp_path / "other"
    root.mkdir()
    with HttpFileServer(root) as server:
        yield server


def _opener(**kw: object) -> HttpOpener:
    config = HttpConfig(headers={**SECRETS, **HARMLESS}, backoff=0.0)
    return HttpOpener(config, **kw)  # type: ignore[arg-type]


def _shard(server: HttpFileServer, name: str = "real.tar") -> bytes:
    make_shard(server.root / name, 0, samples=30)
    return (server.root / name).read_bytes()


def _seen(server: HttpFileServer, path: str) -> list[dict[str, str]]:
    """The headers of every request for ``path`` (header names compared case-insensitively)."""
    return [
        {k.lower(): v for k, v in h.items()}
        for target, h in server.received
        if urlsplit(target).path == path
    ]


def _assert_stripped(headers: list[dict[str, str]]) -> None:
    assert headers, "the redirect target was never asked"
    for sent in headers:
        assert not {k.lower() for k in SECRETS} & set(sent), sent
        assert sent["x-trace"] == "t-1"  # harmless configured headers go on
        assert sent["accept-encoding"] == "identity"


# -- every read path -------------------------------------------------------------------------


def _first_get(opener: HttpOpener, url: str, data: bytes) -> None:
    with opener.open(url) as stream:
        assert stream.read() == data


def _resumed(opener: HttpOpener, url: str, data: bytes) -> None:
    with opener.open(url) as stream:
        assert stream.read() == data


def _from_offset(opener: HttpOpener, url: str, data: bytes) -> None:
    with opener.open_at(url, 1000) as stream:
        assert stream.read() == data[1000:]


def _read_range(opener: HttpOpener, url: str, data: bytes) -> None:
    assert opener.read_range(url, 512, 3000) == data[512:3512]


def _prefetch(opener: HttpOpener, url: str, data: bytes) -> None:
    with opener.open(url, prefetch=3, prefetch_chunk=16 << 10) as stream:
        assert stream.read() == data


PATHS: dict[str, Callable[[HttpOpener, str, bytes], None]] = {
    "first_get": _first_get,
    "resume": _resumed,
    "open_at": _from_offset,
    "read_range": _read_range,
    "prefetch": _prefetch,
}


@pytest.mark.parametrize("path", PATHS)
def test_a_redirect_to_another_port_drops_credentials(
    http_server: HttpFileServer, other: HttpFileServer, path: str
) -> None:
    data = _shard(other)
    http_server.redirects["/x.tar"] = other.url("real.tar")
    if path == "resume":
        other.cut_after = 20_000  # every answer breaks: each resume is redirected again
    PATHS[path](_opener(), http_server.url("x.tar"), data)
    seen = _seen(other, "/real.tar")
    _assert_stripped(seen)
    if path == "resume":
        assert other.cuts >= 2 and any("range" in h for h in seen)
    if path == "prefetch":
        assert len(seen) >= 3  # parts after the first went through the redirect too


@pytest.mark.parametrize("path", PATHS)
def test_a_redirect_to_another_host_name_drops_credentials(
    http_server: HttpFileServer, path: str
) -> None:
    """Same server and port, named ``localhost`` instead of ``127.0.0.1``: another origin."""
    data = _shard(http_server)
    http_server.redirects["/x.tar"] = f"http://localhost:{http_server.port}/real.tar"
    if path == "resume":
        http_server.cut_after = 20_000
    PATHS[path](_opener(), http_server.url("x.tar"), data)
    seen = _seen(http_server, "/real.tar")
    _assert_stripped(seen)
    assert all(h["host"].startswith("localhost") for h in seen)


@pytest.mark.parametrize("path", PATHS)
def test_a_redirect_on_the_same_origin_keeps_credentials(
    http_server: HttpFileServer, path: str
) -> None:
    data = _shard(http_server)
    http_server.redirects["/x.tar"] = "/real.tar"  # relative Location
    if path == "resume":
        http_server.cut_after = 20_000
    PATHS[path](_opener(), http_server.url("x.tar"), data)
    seen = _seen(http_server, "/real.tar")
    assert seen
    for sent in seen:
        assert sent["authorization"] == "Bearer T"
        assert sent["cookie"] == "session=c"
        assert sent["x-api-key"] == "k"


def test_credentials_stay_dropped_when_a_later_hop_comes_back(
    http_server: HttpFileServer, other: HttpFileServer
) -> None:
    data = _shard(http_server)
    http_server.redirects["/x.tar"] = other.url("bounce.tar")
    other.redirects["/bounce.tar"] = http_server.url("real.tar")
    _first_get(_opener(), http_server.url("x.tar"), data)
    _assert_stripped(_seen(other, "/bounce.tar") + _seen(http_server, "/real.tar"))


def test_a_kept_connection_of_the_redirect_target_never_serves_the_first_host(
    http_server: HttpFileServer, other: HttpFileServer
) -> None:
    """A ranged read that was redirected hands its connection back under the target's host,
    so the next ranged read of the first host goes to the first host (with its token)."""
    data = _shard(other)
    own = _shard(http_server, "own.tar")
    http_server.redirects["/x.tar"] = other.url("real.tar")
    opener = _opener()
    assert opener.read_range(http_server.url("x.tar"), 0, 100) == data[:100]
    assert opener.read_range(http_server.url("own.tar"), 0, 100) == own[:100]
    assert _seen(http_server, "/own.tar")[0]["authorization"] == "Bearer T"
    assert not _seen(other, "/own.tar")


def test_the_query_of_the_first_url_is_not_carried_over(
    http_server: HttpFileServer, other: HttpFileServer
) -> None:
    data = _shard(other)
    http_server.redirects["/x.tar"] = other.url("real.tar")
    _first_get(_opener(), http_server.url("x.tar") + "?X-Amz-Signature=s3cret", data)
    assert [target for target, _ in other.received] == ["/real.tar"]
    assert "s3cret" not in str(other.received)


# -- bounds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["first_get", "read_range"])
def test_a_redirect_loop_fails_naming_the_url_and_the_count(
    http_server: HttpFileServer, other: HttpFileServer, path: str
) -> None:
    _shard(http_server)
    http_server.redirects["/x.tar"] = other.url("y.tar")
    other.redirects["/y.tar"] = http_server.url("x.tar")
    with pytest.raises(ShardOpenError, match=r"redirect loop \(2 redirects followed\)") as info:
        PATHS[path](_opener(), http_server.url("x.tar"), b"")
    assert info.value.url == http_server.url("x.tar")
    assert len(http_server.received) + len(other.received) == 2


@pytest.mark.parametrize("path", ["first_get", "open_at", "read_range", "prefetch"])
def test_max_redirects_bounds_every_path(http_server: HttpFileServer, path: str) -> None:
    data = _shard(http_server)
    http_server.redirects["/a.tar"] = "/b.tar"
    http_server.redirects["/b.tar"] = "/c.tar"
    http_server.redirects["/c.tar"] = "/real.tar"
    PATHS[path](_opener(max_redirects=3), http_server.url("a.tar"), data)
    with pytest.raises(ShardOpenError, match=r"more than 2 redirects.*after 3 hop") as info:
        PATHS[path](_opener(max_redirects=2), http_server.url("a.tar"), data)
    assert info.value.url == http_server.url("a.tar")


# -- https -> http ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "same"),
    [
        ("http://h/a", "http://h:80/b?q=1", True),
        ("https://H:443/a", "https://h/b", True),
        ("http://h/a", "http://h:8080/a", False),
        ("http://h/a", "https://h/a", False),  # an upgrade is another origin too
        ("http://127.0.0.1:9/a", "http://localhost:9/a", False),
    ],
)
def test_origin_is_scheme_host_and_port(before: str, after: str, same: bool) -> None:
    assert (origin(before) == origin(after)) is same


def test_next_hop_refuses_a_downgrade_unless_allowed() -> None:
    headers = {"Authorization": "Bearer T", "Range": "bytes=0-"}
    config = HttpConfig().resolve(environ={})
    with pytest.raises(ShardOpenError, match="https to http") as info:
        next_hop(config, ["https://a/x.tar?sig=s3cret"], "http://b/x.tar", headers)
    assert "s3cret" not in str(info.value) and "http://b/x.tar" in str(info.value)
    allowed = HttpConfig(allow_downgrade=True).resolve(environ={})
    url, sent = next_hop(allowed, ["https://a/x.tar"], "http://a/x.tar", headers)
    assert (url, sent) == ("http://a/x.tar", {"Range": "bytes=0-"})
    same = next_hop(config, ["https://a/x.tar"], "https://a/y.tar", headers)
    assert same == ("https://a/y.tar", headers)


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpFileServer]:
    """An HTTPS server on 127.0.0.1 with a self-signed certificate that this process trusts
    (``SSL_CERT_FILE``, read by ``ssl.create_default_context``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    root = tmp_path / "tls"
    root.mkdir()
    with HttpFileServer(root, tls=context) as server:
        yield server


def test_an_https_to_http_redirect_is_refused_unless_allowed(
    tls_server: HttpFileServer, other: HttpFileServer
) -> None:
    data = _shard(other)
    _shard(tls_server, "direct.tar")
    _first_get(
        _opener(), tls_server.url("direct.tar"), (tls_server.root / "direct.tar").read_bytes()
    )
    tls_server.redirects["/x.tar"] = other.url("real.tar")
    for path in ("first_get", "read_range"):
        with pytest.raises(ShardOpenError, match="https to http") as info:
            PATHS[path](_opener(), tls_server.url("x.tar"), data)
        assert tls_server.url("x.tar") in str(info.value)
        assert other.url("real.tar") in str(info.value)
    assert not other.received
    _first_get(_opener(allow_downgrade=True), tls_server.url("x.tar"), data)
    _assert_stripped(_seen(other, "/real.tar"))
