"""S3Config resolution: explicit > WDS_CLOUD_S3_* > AWS_* > defaults; pickling of openers."""

from __future__ import annotations

import pickle

import pytest

from wds_cloud.errors import ConfigError
from wds_cloud.openers.s3.opener import S3Config, S3Opener, split_s3_url


def test_defaults() -> None:
    cfg = S3Config().resolve(environ={})
    assert cfg.endpoint_url is None
    assert cfg.addressing_style == "auto"
    assert cfg.prefetch == 0
    assert cfg.multipart_chunksize == 16 << 20
    assert cfg.requester_pays is False


def test_precedence() -> None:
    env = {
        "AWS_ENDPOINT_URL": "http://generic:1",
        "AWS_ENDPOINT_URL_S3": "http://s3specific:2",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_REGION": "eu-central-1",
        "AWS_PROFILE": "p",
        "WDS_CLOUD_S3_PREFETCH": "4",
        "WDS_CLOUD_S3_REQUESTER_PAYS": "yes",
        "WDS_CLOUD_S3_READ_TIMEOUT": "2.5",
        "WDS_CLOUD_S3_STALL_TIMEOUT": "30",
    }
    cfg = S3Config().resolve(environ=env)
    assert cfg.endpoint_url == "http://s3specific:2"
    assert cfg.region == "eu-central-1"
    assert cfg.profile == "p"
    assert cfg.prefetch == 4
    assert cfg.requester_pays is True
    assert cfg.read_timeout == 2.5
    assert cfg.stall_timeout == 30
    assert cfg.addressing_style == "path"  # custom endpoint
    env["WDS_CLOUD_S3_ENDPOINT_URL"] = "http://wds:3"
    assert S3Config().resolve(environ=env).endpoint_url == "http://wds:3"
    assert (
        S3Config(endpoint_url="http://explicit:4").resolve(environ=env).endpoint_url
        == "http://explicit:4"
    )
    del env["AWS_REGION"]
    assert S3Config().resolve(environ=env).region == "eu-west-1"


def test_opener_reads_environment_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WDS_CLOUD_S3_PREFETCH_CHUNK", "1048576")
    opener = S3Opener(prefetch=2)
    monkeypatch.setenv("WDS_CLOUD_S3_PREFETCH_CHUNK", "7")
    assert opener.config.prefetch_chunk == 1 << 20
    assert opener.config.prefetch == 2


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"WDS_CLOUD_S3_PREFETCH": "many"}, "WDS_CLOUD_S3_PREFETCH"),
        ({"WDS_CLOUD_S3_REQUESTER_PAYS": "maybe"}, "REQUESTER_PAYS"),
        ({"WDS_CLOUD_S3_MULTIPART_CHUNKSIZE": "1000"}, "at least 5 MiB"),
        (
            {"WDS_CLOUD_S3_ADDRESSING_STYLE": "sideways"},
            "ADDRESSING_STYLE='sideways' is not one of",
        ),
        ({"WDS_CLOUD_S3_PREFETCH": "-1"}, "WDS_CLOUD_S3_PREFETCH='-1' must be at least 0"),
        ({"WDS_CLOUD_S3_STALL_TIMEOUT": "0"}, "WDS_CLOUD_S3_STALL_TIMEOUT='0' must be > 0"),
        ({"WDS_CLOUD_S3_STALL_TIMEOUT": "later"}, "WDS_CLOUD_S3_STALL_TIMEOUT"),
    ],
)
def test_bad_values(env: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        S3Config().resolve(environ=env)


def test_unknown_setting() -> None:
    with pytest.raises(ConfigError, match="unknown S3 settings"):
        S3Opener(endpoint="http://x")


def test_split_url() -> None:
    assert split_s3_url("s3://b/dir/k?x#y") == ("b", "dir/k?x#y")
    assert split_s3_url("s3://b") == ("b", "")
    with pytest.raises(ConfigError, match="no bucket"):
        split_s3_url("s3:///k")
    with pytest.raises(ConfigError, match="not an s3"):
        split_s3_url("gs://b/k")


def test_opener_pickles_without_client() -> None:
    opener = S3Opener(endpoint_url="http://127.0.0.1:1", region="us-east-1")
    opener.client()
    clone = pickle.loads(pickle.dumps(opener))
    assert clone.config == opener.config
    assert clone._client.peek() is None and clone._read_client.peek() is None
