"""redact_url and mask: what people see never carries a credential."""

from __future__ import annotations

import pytest

from wds_cloud.redact import mask, redact_text, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:PW@host:8/x.tar", "http://user:***@host:8/x.tar"),
        ("https://TOKEN@host/x.tar", "https://***@host/x.tar"),
        (
            "https://b.s3.amazonaws.com/k.tar?X-Amz-Credential=AK&X-Amz-Signature=S&v=1",
            "https://b.s3.amazonaws.com/k.tar?X-Amz-Credential=***&X-Amz-Signature=***&v=1",
        ),
        ("https://h/x.tar?token=T#frag", "https://h/x.tar?token=***#frag"),
        ("pipe:curl -s http://u:PW@h/x.tar", "pipe:curl -s http://u:***@h/x.tar"),
        ("s3://bucket/key.tar", "s3://bucket/key.tar"),
        ("/data/shard:1.tar", "/data/shard:1.tar"),
        ("http://h/x.tar?a=1&b=2", "http://h/x.tar?a=1&b=2"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    for secret in ("PW", "TOKEN", "AK", "=S&", "=T#"):
        if secret not in shown:
            assert secret not in redact_url(url)


def test_mask() -> None:
    assert mask("secret") == "'***'"
    assert mask(None) == "None"


def test_redact_text_finds_every_url() -> None:
    from wds_cloud.redact import redact_text

    text = (
        "GET 'http://u:PW1@h/x.tar' failed; retry (https://h/y.tar?sig=SIG2), "
        "then pipe:curl -s https://t:PW3@h/z?x-amz-security-token=TOK4."
    )
    shown = redact_text(text)
    for secret in ("PW1", "SIG2", "PW3", "TOK4"):
        assert secret not in shown
    assert shown.endswith("x-amz-security-token=***.") and "(https://h/y.tar?sig=***)," in shown
    assert redact_text("no urls: a:b@c") == "no urls: a:b@c"
    assert redact_url("http://u:p@ss:w@host/x") == "http://u:***@host/x"


def test_every_error_class_redacts_its_text() -> None:
    import pickle

    from wds_cloud.aistore.dsort import DsortJobError
    from wds_cloud.errors import (
        ConfigError,
        DsortSpecError,
        MissingDependencyError,
        SampleError,
        ShardNotFoundError,
        ShardOpenError,
        ShardReadError,
        UnsupportedSchemeError,
        UploadError,
    )

    url = "https://user:PWSECRET@h/x.tar?X-Amz-Signature=SIGSECRET"
    errors = [
        ConfigError(f"bad {url}"),
        UnsupportedSchemeError(f"no opener for {url!r}"),
        MissingDependencyError(f"need boto3 for {url}", extra="s3"),
        ShardNotFoundError(f"missing {url}", url=url, offset=3, member="a.txt"),
        ShardOpenError("denied", url=url),
        ShardReadError(f"broken: {url}", url=url, offset=9),
        SampleError(f"dup in {url}", url=url, key="k"),
        UploadError(f"failed {url}", url=url),
        DsortSpecError(f"bad {url}", field="input_bck"),
        DsortJobError(f"failed {url}", job_id="srt-1"),
    ]
    for err in errors:
        texts = [str(err), repr(err), str(getattr(err, "reason", "")), repr(err.args)]
        texts.append(str(pickle.loads(pickle.dumps(err))))
        for text in texts:
            assert "PWSECRET" not in text and "SIGSECRET" not in text, (type(err), text)
        assert "***" in str(err)
    # the attribute keeps the URL as given, for programs
    assert errors[3].url == url  # type: ignore[attr-defined]


def test_config_reprs_mask_credentials() -> None:
    from wds_cloud.openers.ais.opener import AisConfig
    from wds_cloud.openers.gcs.config import GcsConfig
    from wds_cloud.openers.http.opener import HttpConfig
    from wds_cloud.openers.s3.config import S3Config

    configs = [
        S3Config(
            endpoint_url="http://k:S1@h:1",
            access_key_id="S2",
            secret_access_key="S3",
            session_token="S4",
        ).resolve({}),
        GcsConfig(credentials="/keys/S5.json", endpoint="http://k:S6@h:1").resolve({}),
        HttpConfig(
            headers={
                "Authorization": "Bearer S7",
                "Cookie": "S8",
                "Proxy-Authorization": "S9",
                "X-Amz-Security-Token": "S10",
                "x-goog-api-client": "S11",
                "X-Api-Token": "S12",
                "Accept": "visible",
            }
        ),
        AisConfig(endpoint="http://k:S13@h:1", token="S14"),
    ]
    for config in configs:
        text = repr(config)
        assert all(f"S{i}" not in text.replace("S3Config", "") for i in range(1, 15)), text
        assert str(config) == text
    assert "'Accept': 'visible'" in repr(configs[2])
    assert "token='***'" in repr(configs[3]) and "secret_access_key='***'" in repr(configs[0])
    assert "session_token=None" in repr(S3Config())


def test_redacting_log_filter() -> None:
    import logging

    from wds_cloud.redact import RedactingFilter

    record = logging.LogRecord(
        "wds_cloud.x", logging.INFO, __file__, 1, "resuming %s at %d", ("http://u:PW@h/x", 5), None
    )
    assert RedactingFilter().filter(record)
    assert record.getMessage() == "resuming http://u:***@h/x at 5"


def test_azure_credentials_outside_urls_are_masked() -> None:
    text = (
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=S3CR3T+/key==;"
        "SharedAccessSignature=sv=2023&sig=SASSIG1; GET /c/b?sv=2023&sp=r&sig=SASSIG2%2F&x=1"
    )
    shown = redact_text(text)
    for secret in ("S3CR3T", "SASSIG1", "SASSIG2"):
        assert secret not in shown
    assert "AccountName=acct;" in shown and "sp=r&sig=***&x=1" in shown


def test_an_azure_container_before_the_at_sign_is_not_a_user() -> None:
    url = "abfs://shards@acct.dfs.core.windows.net/train/a.tar"
    assert redact_url(url) == url
    assert (
        redact_url("abfs://user:pw@acct.dfs.core.windows.net/a")
        != "abfs://user:pw@acct.dfs.core.windows.net/a"
    )
    assert redact_url("https://token@host/a.tar") == "https://***@host/a.tar"
