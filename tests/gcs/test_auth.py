"""Credentials files against a real local OAuth token endpoint and fake-gcs-server.

fake-gcs-server checks no credentials, so what can be tested here is our side: a service-account
file is loaded, a token is fetched from the file's ``token_uri`` (a local server) and sent as
``Authorization: Bearer``; a token endpoint that refuses the key surfaces as ShardOpenError with
the endpoint's message. Real GCS 401/403 answers cannot be produced locally (see
``test_errors.py`` for the mapping of those exceptions).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from wds_cloud.errors import ShardOpenError
from wds_cloud.openers.gcs.opener import GcsOpener

pytestmark = pytest.mark.gcs


class _TokenHandler(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.requests += 1
        body: dict[str, Any]
        if self.server.refuse:
            status, body = (
                400,
                {"error": "invalid_grant", "error_description": "Invalid JWT Signature."},
            )
        else:
            status, body = (
                200,
                {"access_token": "tok-123", "expires_in": 3600, "token_type": "Bearer"},
            )
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def token_server() -> Iterator[Any]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _TokenHandler)
    server.requests = 0  # type: ignore[attr-defined]
    server.refuse = False  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(10)


def _service_account_file(tmp_path: Path, token_uri: str) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    path = tmp_path / "sa.json"
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "test-project",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": "loader@test-project.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": token_uri,
            }
        )
    )
    return path


def test_service_account_token_is_sent(
    tmp_path: Path, token_server: Any, fake_gcs: Any, bucket: Any, faulty_proxy: Any
) -> None:
    bucket.blob("x").upload_from_string(b"payload")
    heads: list[bytes] = []
    proxy = faulty_proxy(fake_gcs.port, cut_after=None)

    def record(index: int, head: bytes) -> bool:
        heads.append(head)
        return False

    proxy.set_fault(cut_after=1 << 40, match=record)
    creds = _service_account_file(tmp_path, f"http://127.0.0.1:{token_server.server_port}/token")
    opener = GcsOpener(endpoint=proxy.url, credentials=str(creds))
    assert opener.config.anonymous is False
    with opener.open(f"gs://{bucket.name}/x") as stream:
        assert stream.read() == b"payload"
    assert token_server.requests >= 1  # the SDK may refresh from its own background thread too
    assert heads and all(b"authorization: bearer tok-123" in h.lower() for h in heads)


def test_refused_credentials_are_an_open_error(
    tmp_path: Path, token_server: Any, fake_gcs: Any, bucket: Any
) -> None:
    token_server.refuse = True
    creds = _service_account_file(tmp_path, f"http://127.0.0.1:{token_server.server_port}/token")
    opener = GcsOpener(endpoint=fake_gcs.endpoint, credentials=str(creds), retries=0)
    url = f"gs://{bucket.name}/x"
    with pytest.raises(ShardOpenError) as info:
        opener.open(url)
    assert "credentials could not be used" in str(info.value)
    assert "Invalid JWT Signature" in str(info.value)
    assert info.value.url == url
