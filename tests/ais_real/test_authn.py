"""AuthN on the real cluster (``ais_cluster_authn``): a token in ``AIS_AUTHN_TOKEN`` works for
reads, listings, writes and dSort; a missing, wrong or too weak one gives wds_cloud's typed
error naming the endpoint and the variable, never an SDK traceback; the token shows nowhere.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

import wds_cloud
from tests.servers.aistore import NO_ACCESS, READER, Cluster
from tests.support.tarbuild import tar_bytes
from wds_cloud.aistore import dsort
from wds_cloud.errors import ShardOpenError, UploadError
from wds_cloud.listing import list_shards

aistore_sdk = pytest.importorskip("aistore.sdk")

pytestmark = [pytest.mark.ais, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parents[2]
FORGED = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJl"


@pytest.fixture
def private(ais_cluster_authn: Cluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """A bucket with two shards put by the admin; the environment points at the cluster."""
    cluster = ais_cluster_authn
    name = f"auth-{uuid.uuid4().hex[:6]}"
    admin = aistore_sdk.Client(cluster.endpoint, token=cluster.token_for("admin"))
    bucket = admin.bucket(name).create()
    for s in range(2):
        members = [(f"s{s}-{i}.txt", f"{s}/{i}".encode()) for i in range(3)]
        bucket.object(f"shard-{s}.tar").get_writer().put_content(tar_bytes(members))
    monkeypatch.setenv("AIS_ENDPOINT", cluster.endpoint)
    for variable in ("AIS_AUTHN_TOKEN", "WDS_CLOUD_AIS_TOKEN", "WDS_CLOUD_AIS_ENDPOINT"):
        monkeypatch.delenv(variable, raising=False)
    return name


def _read(url: str) -> list[bytes]:
    """Through the default registry, which follows the environment."""
    return sorted(s["txt"] for s in wds_cloud.WebDataset(url))


def test_a_token_works_for_reads_listings_writes_and_dsort(
    ais_cluster_authn: Cluster, private: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIS_AUTHN_TOKEN", ais_cluster_authn.token_for(READER))
    assert list_shards(f"ais://{private}/") == [f"ais://{private}/shard-{s}.tar" for s in (0, 1)]
    assert len(_read(f"ais://{private}/shard-{{0..1}}.tar")) == 6
    refused = wds_cloud.ShardWriter(f"ais://{private}/out-%02d.tar", maxcount=2)
    with pytest.raises(UploadError, match="not allowed to do this \\(403"), refused as sink:
        sink.write({"__key__": "x", "txt": b"y"})  # a reader may not write

    monkeypatch.setenv("AIS_AUTHN_TOKEN", ais_cluster_authn.token_for("admin"))
    with wds_cloud.ShardWriter(f"ais://{private}/out-%02d.tar", maxcount=2) as sink:
        for i in range(3):
            sink.write({"__key__": f"w{i}", "txt": str(i).encode()})
    assert _read(f"ais://{private}/out-{{00..01}}.tar") == [b"0", b"1", b"2"]
    summary = dsort.reshard_via_dsort(
        f"ais://{private}/shard-{{0..1}}.tar",
        f"ais://{private}-out/",
        maxsize="1KiB",
        seed=1,
        progress=False,
        poll_interval=0.2,
        timeout=120,
    )
    assert summary.samples == 6 and summary.input_shards == 2


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        (None, "AIStore requires an AuthN token and none was sent (401)"),
        ("forged", "AIStore rejected the AuthN token"),
        (NO_ACCESS, "the AuthN token's user is not allowed to do this (403"),
    ],
    ids=["missing", "forged", "no permission"],
)
def test_a_bad_token_is_a_typed_error_naming_the_endpoint(
    ais_cluster_authn: Cluster,
    private: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    user: str | None,
    expected: str,
) -> None:
    token = FORGED if user == "forged" else user and ais_cluster_authn.token_for(user)
    if token is not None:
        monkeypatch.setenv("AIS_AUTHN_TOKEN", token)
    caplog.set_level("DEBUG")
    url = f"ais://{private}/shard-0.tar"
    failures: list[Any] = []
    for attempt in (
        lambda: _read(url),
        lambda: list_shards(f"ais://{private}/"),
        lambda: dsort.start(
            {
                "input_bck": {"name": private},
                "input_format": {"template": "shard-{0..1}.tar"},
                "output_format": "o-{0..9}.tar",
                "output_shard_size": "1KiB",
            }
        ),
    ):
        with pytest.raises(wds_cloud.WdsCloudError) as info:
            attempt()
        failures.append(info.value)
    read, listed, started = failures
    assert isinstance(read, ShardOpenError) and read.url == url
    assert isinstance(listed, ShardOpenError)
    assert isinstance(started, dsort.DsortJobError)
    for error in failures:
        assert expected in str(error), str(error)
    for error in (read, listed):
        assert f"AIStore at {ais_cluster_authn.endpoint}" in str(error)
        if user is None or user == "forged":
            assert "set AIS_AUTHN_TOKEN" in str(error)
    if token is not None:
        shown = [str(e) for e in failures] + [repr(e) for e in failures] + [caplog.text]
        assert not [text for text in shown if token in text]


def test_the_cli_says_it_in_one_line(ais_cluster_authn: Cluster, private: str) -> None:
    env = {**os.environ, "AIS_ENDPOINT": ais_cluster_authn.endpoint, "PYTHONPATH": str(ROOT)}
    env["AIS_AUTHN_TOKEN"] = FORGED
    done = subprocess.run(
        [sys.executable, "-m", "wds_cloud.cli", "ls", f"ais://{private}/"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode != 0 and done.stdout == ""
    assert "Traceback" not in done.stderr and FORGED not in done.stderr
    (line,) = done.stderr.splitlines()
    assert "AIStore rejected the AuthN token" in line and ais_cluster_authn.endpoint in line


def _get(url: str, token: str | None) -> tuple[int, str | None, bytes]:
    """One GET with ``http.client``, redirects not followed: status, Location, body."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        conn.request(
            "GET", parts.path + ("?" + parts.query if parts.query else ""), headers=headers
        )
        resp = conn.getresponse()
        return resp.status, resp.getheader("Location"), resp.read()
    finally:
        conn.close()


def test_the_target_of_a_proxy_redirect_needs_no_token(
    ais_cluster_authn: Cluster, private: str
) -> None:
    """With AuthN the proxy checks the token and redirects (301) to a target URL it stamps
    (``pid``, ``utm``); the target ignores ``Authorization`` and refuses a GET without the
    stamp. So a client may (and ``requests``, hence the SDK, does) drop the token on that
    cross-origin redirect, and wds_cloud's HTTP opener reads through it with the token dropped.
    """
    token = ais_cluster_authn.token_for(READER)
    url = f"{ais_cluster_authn.endpoint}/v1/objects/{private}/shard-0.tar?provider=ais"
    assert _get(url, None)[0] == 401
    status, location, _ = _get(url, token)
    assert status == 301 and location
    target = urlsplit(location)
    assert target.port != urlsplit(url).port  # another origin
    assert {"pid", "utm"} <= {k for k, _ in parse_qsl(target.query)}
    data = _get(location, None)
    assert data[0] == 200 and data[2].startswith(b"s0-0.txt")
    assert _get(location, FORGED)[0] == 200  # the target does not look at the token
    unstamped = location.split("?")[0] + "?provider=ais"
    assert _get(unstamped, token)[0] == 403  # "direct target access denied"

    from wds_cloud.openers.http import HttpOpener

    opener = HttpOpener(headers={"Authorization": f"Bearer {token}"})
    with opener.open(url) as stream:
        assert stream.read() == data[2]
    assert opener.read_range(url, 0, 8) == b"s0-0.txt"
    with pytest.raises(ShardOpenError, match="401"):
        HttpOpener(retries=0).open(url).read()
