"""No credential is ever shown: secrets set every supported way, every error class triggered on
every backend against the real servers, and all text people can see searched for them.

Per backend, secrets go in as a URL password, request headers, presigned query values, config
fields and environment variables (for the ``wds-cloud`` runs). Then not-found, open, read,
upload and config errors are triggered in-process (through ``WebDataset`` and the openers)
and through the real command line (with and without ``--debug``). Searched: ``str``/``repr``
of every exception, the ``repr`` of configs, openers and datasets, wds_cloud's log records at
DEBUG (third-party loggers such as botocore's are the application's to configure), and the
stdout/stderr of every command. This module lives in ``tests/s3`` to share the session's
SeaweedFS; it covers all backends.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import wds_cloud
from tests.s3.conftest import ACCESS_KEY, REGION, SECRET_KEY, make_config
from tests.support import tarbuild
from tests.support.faulty_proxy import FaultyProxy
from tests.support.http_server import HttpFileServer
from wds_cloud.errors import (
    ConfigError,
    ShardNotFoundError,
    ShardOpenError,
    ShardReadError,
    UploadError,
    WdsCloudError,
)
from wds_cloud.openers.registry import OpenerRegistry

CORRUPT = b"this is not a tar archive\n" * 100


def good_shard() -> bytes:
    return tarbuild.tar_bytes((f"s{i:03d}.bin", bytes([i]) * 2000) for i in range(40))


@dataclass
class Probe:
    """Collects every text people could see, and the error classes raised."""

    secrets: list[str]
    texts: list[tuple[str, str]] = field(default_factory=list)
    raised: set[type[BaseException]] = field(default_factory=set)

    def fails(self, label: str, action: Callable[[], Any]) -> None:
        with pytest.raises(WdsCloudError) as err:
            action()
        exc = err.value
        self.raised.update(type(exc).__mro__)
        self.texts += [(f"{label}: str", str(exc)), (f"{label}: repr", repr(exc))]
        self.texts.append((f"{label}: reason", str(getattr(exc, "reason", ""))))

    def runs(self, label: str, action: Callable[[], Any]) -> None:
        """An action that may succeed (a dropped stream that resumes logs the URL)."""
        try:
            action()
        except WdsCloudError as exc:
            self.texts += [(f"{label}: str", str(exc)), (f"{label}: repr", repr(exc))]

    def shows(self, label: str, obj: object) -> None:
        self.texts.append((f"repr of {label}", repr(obj)))

    def cli(self, label: str, *args: str, env: dict[str, str] | None = None) -> None:
        for debug in ((), ("--debug",)):
            out = subprocess.run(
                [sys.executable, "-m", "wds_cloud.cli", *debug, *args],
                capture_output=True,
                text=True,
                env={**os.environ, **(env or {})},
                timeout=300,
                check=False,
            )
            name = f"wds-cloud {' '.join(debug + args[:1])} ({label})"
            self.texts += [(f"{name} stdout", out.stdout), (f"{name} stderr", out.stderr)]

    def logs(self, caplog: pytest.LogCaptureFixture) -> None:
        for record in caplog.records:
            if record.name.startswith("wds_cloud"):
                self.texts.append((f"log {record.name}", record.getMessage()))

    def leaks(self) -> list[str]:
        return [
            f"{secret!r} in {label}: {text[:300]!r}"
            for label, text in self.texts
            for secret in self.secrets
            if secret in text
        ]


def read_all(url: str, scheme: str, opener: Any) -> None:
    registry = OpenerRegistry()
    registry.register(scheme, opener, override=True)
    list(wds_cloud.WebDataset(url, registry=registry, shardshuffle=False))


def write_one(url: str, scheme: str, opener: Any) -> None:
    registry = OpenerRegistry()
    registry.register(scheme, opener, override=True)
    with wds_cloud.ShardWriter(url, registry=registry) as sink:
        sink.write({"__key__": "a", "bin": b"x" * 1000})


# -- backends ---------------------------------------------------------------------------------


def http_case(request: pytest.FixtureRequest, probe: Probe) -> None:
    from wds_cloud.openers.http.opener import HttpConfig, HttpOpener

    root = request.getfixturevalue("tmp_path") / "www"
    root.mkdir()
    (root / "good.tar").write_bytes(good_shard())
    (root / "corrupt.tar").write_bytes(CORRUPT)
    server = HttpFileServer(root).start()
    request.addfinalizer(server.stop)
    base = f"http://reader:HTTP-PW-0001@127.0.0.1:{server.port}"
    signed = "?X-Amz-Credential=AKID-0002&X-Amz-Signature=SIG-0003&token=TOK-0004"
    probe.secrets += ["HTTP-PW-0001", "AKID-0002", "SIG-0003", "TOK-0004", "HDR-0005", "CK-0006"]
    config = HttpConfig(
        headers={"Authorization": "Bearer HDR-0005", "Cookie": "s=CK-0006"}, retries=1, backoff=0
    )
    opener = HttpOpener(config)
    server.status_for["/denied.tar"] = 403
    probe.fails("not found", lambda: read_all(f"{base}/missing.tar{signed}", "http", opener))
    probe.fails("open error", lambda: read_all(f"{base}/denied.tar{signed}", "http", opener))
    probe.fails("corrupt", lambda: read_all(f"{base}/corrupt.tar{signed}", "http", opener))
    server.cut_after, server.ignore_range = 5000, True
    probe.runs("dropped", lambda: read_all(f"{base}/good.tar{signed}", "http", opener))
    probe.cli("dropped", "verify", f"{base}/good.tar{signed}")  # --debug shows resume logs
    server.cut_after, server.ignore_range = None, False
    probe.fails("config", lambda: wds_cloud.WebDataset(f"{base}/x-{{0..9.tar{signed}"))
    probe.fails("upload", lambda: write_one(f"{base}/out-%04d.tar{signed}", "http", opener))
    probe.shows("HttpConfig", config)
    probe.shows("HttpOpener", opener)
    probe.shows("WebDataset", wds_cloud.WebDataset(f"{base}/good.tar{signed}", shardshuffle=False))
    for path in ("missing.tar", "corrupt.tar", "denied.tar"):
        probe.cli(path, "verify", f"{base}/{path}{signed}")
    probe.cli("ls", "ls", "--samples", f"{base}/good.tar{signed}", f"{base}/missing.tar")
    probe.cli("stats", "stats", f"{base}/corrupt.tar{signed}", "--json")
    probe.cli("pipe", "ls", "--samples", f"pipe:curl -s -f {base}/missing.tar{signed}")
    pipe = f"pipe:curl -s -f {base}/missing.tar{signed}"
    probe.fails("pipe", lambda: list(wds_cloud.WebDataset(pipe, shardshuffle=False)))


def s3_case(request: pytest.FixtureRequest, probe: Probe) -> None:
    from wds_cloud.openers.s3.opener import S3Opener

    endpoint = request.getfixturevalue("s3_endpoint")
    raw = request.getfixturevalue("raw_client")
    bucket = request.getfixturevalue("bucket")
    raw.put_object(Bucket=bucket, Key="good.tar", Body=good_shard())
    raw.put_object(Bucket=bucket, Key="corrupt.tar", Body=CORRUPT)
    probe.secrets += [SECRET_KEY, "S3-WRONG-0011", "S3-TOKEN-0012", "S3-SIG-0013", "S3-PW-0014"]
    good = make_config(endpoint, max_attempts=1, retries=0)
    wrong = make_config(endpoint, secret_access_key="S3-WRONG-0011", session_token="S3-TOKEN-0012")
    opener, denied = S3Opener(good), S3Opener(wrong)
    signed = "?X-Amz-Signature=S3-SIG-0013"
    url = f"s3://{bucket}"
    probe.fails("not found", lambda: read_all(f"{url}/missing.tar{signed}", "s3", opener))
    probe.fails("open error", lambda: read_all(f"{url}/good.tar", "s3", denied))
    probe.fails("corrupt", lambda: read_all(f"{url}/corrupt.tar", "s3", opener))
    probe.fails("upload denied", lambda: write_one(f"{url}/o-%04d.tar", "s3", denied))
    probe.fails("config", lambda: S3Opener(good, multipart_chunksize=1))
    unreachable = S3Opener(make_config("http://u:S3-PW-0014@127.0.0.1:9", max_attempts=1))
    probe.fails("unreachable", lambda: read_all(f"{url}/good.tar", "s3", unreachable))
    for obj in (good, wrong, opener, denied, unreachable):
        probe.shows(type(obj).__name__, obj)
    env = {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "WDS_CLOUD_S3_ENDPOINT_URL": endpoint,
        "WDS_CLOUD_S3_MAX_ATTEMPTS": "1",
    }
    probe.cli("good env", "verify", f"{url}/corrupt.tar", f"{url}/missing.tar{signed}", env=env)
    probe.cli("ls", "ls", "--samples", f"{url}/", env=env)
    probe.cli("uploads", "uploads", "list", f"{url}/", env=env)
    bad = {**env, "AWS_SECRET_ACCESS_KEY": "S3-WRONG-0011", "AWS_SESSION_TOKEN": "S3-TOKEN-0012"}
    probe.cli("wrong env", "stats", f"{url}/good.tar", env=bad)
    probe.cli("wrong env", "ls", f"{url}/", env=bad)


def gcs_case(request: pytest.FixtureRequest, probe: Probe) -> None:
    from wds_cloud.openers.gcs.opener import GcsConfig, GcsOpener

    server = request.getfixturevalue("fake_gcs")
    client = server.client()
    bucket = client.create_bucket(f"leaks-{os.getpid()}-{len(probe.texts)}")
    bucket.blob("good.tar").upload_from_string(good_shard())
    bucket.blob("corrupt.tar").upload_from_string(CORRUPT)
    tmp = request.getfixturevalue("tmp_path")
    keyfile = tmp / "service-account.json"
    keyfile.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "p",
                "private_key_id": "GCS-KEYID-0021",
                "private_key": "-----BEGIN PRIVATE KEY-----\nGCS-KEY-0022\n-----END PRIVATE KEY-----\n",
                "client_email": "x@p.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": "http://127.0.0.1:9/token?token=GCS-TOK-0023",
            }
        )
    )
    probe.secrets += ["GCS-KEYID-0021", "GCS-KEY-0022", "GCS-TOK-0023", "GCS-PW-0024"]
    opener = GcsOpener(endpoint=server.endpoint, backoff=0.0, retries=0)
    keyed = GcsOpener(GcsConfig(credentials=str(keyfile), endpoint=server.endpoint, retries=0))
    host = server.endpoint.split("://", 1)[1]
    userinfo = GcsOpener(endpoint=f"http://u:GCS-PW-0024@{host}", retries=0, anonymous=True)
    url = f"gs://{bucket.name}"
    probe.fails(
        "not found", lambda: read_all(f"{url}/missing.tar?token=GCS-TOK-0023", "gs", opener)
    )
    probe.fails("open error", lambda: read_all(f"{url}/good.tar", "gs", keyed))
    probe.fails("corrupt", lambda: read_all(f"{url}/corrupt.tar", "gs", opener))
    probe.fails("upload", lambda: write_one("gs://no-such-bucket-x/o-%04d.tar", "gs", opener))
    probe.fails("config", lambda: GcsOpener(GcsConfig(credentials=str(keyfile), chunk_size=1000)))
    probe.fails("endpoint password", lambda: read_all(f"{url}/missing.tar", "gs", userinfo))
    for name, obj in (("GcsOpener", opener), ("keyed", keyed), ("config", keyed.config)):
        probe.shows(name, obj)
    env = {"STORAGE_EMULATOR_HOST": server.endpoint, "GOOGLE_APPLICATION_CREDENTIALS": str(keyfile)}
    probe.cli("credentials env", "verify", f"{url}/good.tar", env=env)
    env = {"WDS_CLOUD_GCS_ENDPOINT": f"http://u:GCS-PW-0024@{host}", "WDS_CLOUD_GCS_RETRIES": "0"}
    probe.cli("endpoint env", "verify", f"{url}/corrupt.tar", f"{url}/missing.tar", env=env)


def ais_case(request: pytest.FixtureRequest, probe: Probe) -> None:
    from wds_cloud.openers.ais.opener import AisConfig, AisOpener

    emu = request.getfixturevalue("ais_emulator")
    emu.store.create_bucket("data")
    emu.store.put_object("data", "good.tar", good_shard())
    emu.store.put_object("data", "corrupt.tar", CORRUPT)
    emu.required_token = "AIS-TOKEN-0031"
    probe.secrets += ["AIS-TOKEN-0031", "AIS-WRONG-0032", "AIS-PW-0033", "AIS-Q-0034"]
    config = AisConfig(endpoint=emu.url, token="AIS-TOKEN-0031", retries=1, backoff=0.0)
    opener = AisOpener(config)
    wrong = AisOpener(AisConfig(endpoint=emu.url, token="AIS-WRONG-0032", retries=0))
    away = AisOpener(AisConfig(endpoint="http://u:AIS-PW-0033@127.0.0.1:9", retries=0))
    probe.fails("not found", lambda: read_all("ais://data/missing.tar", "ais", opener))
    probe.fails("open error", lambda: read_all("ais://data/good.tar", "ais", wrong))
    probe.fails("unreachable", lambda: read_all("ais://data/good.tar", "ais", away))
    probe.fails("corrupt", lambda: read_all("ais://data/corrupt.tar", "ais", opener))
    emu.cut_after(3000, times=5)
    probe.runs("dropped", lambda: read_all("ais://data/good.tar", "ais", opener))
    probe.fails("upload", lambda: write_one("ais://data/o-%04d.tar", "ais", wrong))
    probe.fails("config", lambda: read_all("ais://data/good.tar?token=AIS-Q-0034", "ais", opener))
    for name, obj in (("AisConfig", config), ("AisOpener", opener), ("away", away.config)):
        probe.shows(name, obj)
    env = {"AIS_ENDPOINT": emu.url, "AIS_AUTHN_TOKEN": "AIS-TOKEN-0031"}
    probe.cli("token env", "verify", "ais://data/corrupt.tar", "ais://data/missing.tar", env=env)
    probe.cli("token env", "ls", "--samples", "ais://data/", env=env)
    probe.cli(
        "wrong token",
        "stats",
        "ais://data/good.tar",
        env={**env, "AIS_AUTHN_TOKEN": "AIS-WRONG-0032"},
    )


def azure_case(request: pytest.FixtureRequest, probe: Probe) -> None:
    import datetime

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    from wds_cloud.openers.azure.opener import AzureConfig, AzureOpener

    server = request.getfixturevalue("azurite")
    container = server.container(f"leaks-{os.getpid()}-{len(probe.texts)}")
    container.upload_blob("good.tar", good_shard())
    container.upload_blob("corrupt.tar", CORRUPT)
    sas = generate_container_sas(
        server.account,
        container.container_name,
        account_key=server.key,
        permission=ContainerSasPermissions(read=True, list=True),
        expiry=datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1),
    )
    sig = dict(p.split("=", 1) for p in sas.split("&"))["sig"]
    wrong_key = "QVpVUkUtV1JPTkctMDA0MQ" + "A" * 66  # base64 of "AZURE-WRONG-0041"...
    # the key, its URL-encoded SAS signature (as sent) and its raw form, a wrong key
    probe.secrets += [server.key, sig, urllib.parse.unquote(sig), wrong_key]
    account = {"account_name": server.account, "endpoint": server.endpoint, "retries": 0}
    opener = AzureOpener(AzureConfig(account_key=server.key, **account))
    by_string = AzureOpener(connection_string=server.connection_string, retries=0)
    by_sas = AzureOpener(AzureConfig(sas_token=sas, **account))
    wrong = AzureOpener(AzureConfig(account_key=wrong_key, **account))
    url = f"az://{container.container_name}"
    probe.fails("not found", lambda: read_all(f"{url}/missing.tar", "az", by_string))
    probe.fails("sas not found", lambda: read_all(f"{url}/missing.tar", "az", by_sas))
    probe.fails("open error", lambda: read_all(f"{url}/good.tar", "az", wrong))
    probe.fails("corrupt", lambda: read_all(f"{url}/corrupt.tar", "az", opener))
    probe.fails("corrupt sas", lambda: read_all(f"{url}/corrupt.tar", "az", by_sas))
    # resumes log the error of each dropped connection: the SAS travels in the query string
    proxy = FaultyProxy(server.port, cut_after=3000, first=4, reset=True).start()
    request.addfinalizer(proxy.stop)
    cut = AzureOpener(
        AzureConfig(
            sas_token=sas,
            account_name=server.account,
            endpoint=f"{proxy.url}/{server.account}",
            backoff=0.0,
        )
    )
    probe.runs("dropped", lambda: read_all(f"{url}/good.tar", "az", cut))
    # requests names the URL it could not reach, SAS query included
    away = AzureOpener(
        AzureConfig(sas_token=sas, account_name="a", endpoint="http://127.0.0.1:9/a", retries=0)
    )
    probe.fails("unreachable", lambda: read_all(f"{url}/good.tar", "az", away))
    probe.fails("upload", lambda: write_one("az://no-such-container/o-%04d.tar", "az", opener))
    probe.fails("sas upload", lambda: write_one(f"{url}/o-%04d.tar", "az", by_sas))
    probe.fails("list", lambda: by_sas.list("az://no-such-container/"))
    bad_string = server.connection_string.replace("AccountKey=", "AccountKey")
    probe.fails("config", lambda: AzureOpener(connection_string=bad_string).open(f"{url}/x"))
    for name, obj in (("AzureOpener", opener), ("sas", by_sas), ("string", by_string.config)):
        probe.shows(name, obj)
    probe.shows("account", by_sas.account(f"{url}/good.tar"))
    env = {"AZURE_STORAGE_CONNECTION_STRING": server.connection_string}
    probe.cli("string env", "verify", f"{url}/corrupt.tar", f"{url}/missing.tar", env=env)
    probe.cli("string env", "ls", "--samples", f"{url}/", env=env)
    env = {
        "AZURE_STORAGE_ACCOUNT_NAME": server.account,
        "WDS_CLOUD_AZURE_ENDPOINT": server.endpoint,
        "AZURE_STORAGE_SAS_TOKEN": sas,
    }
    probe.cli("sas env", "verify", f"{url}/corrupt.tar", f"{url}/missing.tar", env=env)
    probe.cli(
        "wrong env",
        "stats",
        f"{url}/good.tar",
        env={**env, "AZURE_STORAGE_SAS_TOKEN": "sv=1&sig=" + sig[:-3] + "abc"},
    )


def hf_case(request: pytest.FixtureRequest, probe: Probe) -> None:
    from tests.support.hub_server import HubServer
    from wds_cloud.openers.hf.opener import HfConfig, HfOpener

    hub = HubServer(request.getfixturevalue("tmp_path") / "hub").start()
    request.addfinalizer(hub.stop)
    for name, data in (("good.tar", good_shard()), ("corrupt.tar", CORRUPT)):
        hub.add("datasets/org/private", f"train/{name}", data)
    hub.private.add("datasets/org/private")
    hub.tokens.add("HF-TOKEN-0041")
    # the CDN's signed query (X-Amz-Signature=cdn-signature) must never be shown either
    probe.secrets += ["HF-TOKEN-0041", "HF-WRONG-0042", "cdn-signature"]
    config = HfConfig(endpoint=hub.endpoint, token="HF-TOKEN-0041")
    opener = HfOpener(config)
    wrong = HfOpener(HfConfig(endpoint=hub.endpoint, token="HF-WRONG-0042"))
    base = "hf://datasets/org/private/train"
    probe.fails("not found", lambda: read_all(f"{base}/missing.tar", "hf", opener))
    probe.fails("open error", lambda: read_all(f"{base}/good.tar", "hf", wrong))
    probe.fails("listing refused", lambda: wds_cloud.list_shards(f"{base}/", registry=_with(wrong)))
    probe.fails("corrupt", lambda: read_all(f"{base}/corrupt.tar", "hf", opener))
    hub.cdn.cut_after = 5000
    probe.runs("dropped", lambda: read_all(f"{base}/good.tar", "hf", opener))
    hub.cdn.cut_after = None
    probe.fails("config", lambda: read_all("hf://datasets/org", "hf", opener))
    probe.fails("upload", lambda: write_one(f"{base}/out-%04d.tar", "hf", opener))
    probe.shows("HfConfig", config)
    probe.shows("HfOpener", opener)
    probe.shows("WebDataset", wds_cloud.WebDataset(f"{base}/good.tar", registry=_with(opener)))
    env = {"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": "HF-TOKEN-0041"}
    probe.cli("token env", "verify", f"{base}/corrupt.tar", f"{base}/missing.tar", env=env)
    probe.cli("token env", "ls", "--samples", f"{base}/", env=env)
    probe.cli("wrong token", "stats", f"{base}/good.tar", env={**env, "HF_TOKEN": "HF-WRONG-0042"})


def _with(opener: Any) -> OpenerRegistry:
    registry = OpenerRegistry()
    registry.register("hf", opener, override=True)
    return registry


EVERY_CLASS = {ShardNotFoundError, ShardOpenError, ShardReadError, UploadError, ConfigError}
CASES = {  # backend: (scenario, error classes it triggers; http has no uploads)
    "http+pipe": (http_case, EVERY_CLASS - {UploadError}),
    "s3": (s3_case, EVERY_CLASS),
    "gcs": (gcs_case, EVERY_CLASS),
    "ais": (ais_case, EVERY_CLASS),
    "azure": (azure_case, EVERY_CLASS),
    "hf": (hf_case, EVERY_CLASS - {UploadError}),
}


@pytest.mark.parametrize("backend", sorted(CASES))
@pytest.mark.slow
def test_no_secret_is_shown(
    backend: str, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="wds_cloud")
    probe = Probe(secrets=[])
    scenario, expected = CASES[backend]
    scenario(request, probe)
    probe.logs(caplog)
    assert probe.raised >= expected, expected - probe.raised
    assert len(probe.texts) > 20
    assert not probe.leaks(), "\n".join(probe.leaks())


def test_probe_finds_a_leak(tmp_path: Path) -> None:
    probe = Probe(secrets=["LEAK-0099"])
    probe.cli("echo", "ls", str(tmp_path / "LEAK-0099-{0..9.tar"))
    assert probe.leaks() and "stderr" in probe.leaks()[0]
