"""GcsConfig resolution and the missing-SDK error (no server needed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from wds_cloud.errors import ConfigError
from wds_cloud.openers.gcs.opener import SCHEMES, GcsConfig, GcsOpener

_VARS = (
    "STORAGE_EMULATOR_HOST",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_CLOUD_PROJECT",
    *(f"WDS_CLOUD_GCS_{f.upper()}" for f in GcsConfig.__dataclass_fields__),
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in _VARS:
        monkeypatch.delenv(var, raising=False)


def test_defaults() -> None:
    cfg = GcsOpener().config
    assert cfg.endpoint is None and cfg.anonymous is False and cfg.credentials is None
    assert (cfg.retries, cfg.backoff, cfg.chunk_size, cfg.page_size) == (5, 0.2, 16 << 20, 1000)
    assert SCHEMES == ("gs", "gcs")


def test_sdk_variables_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "localhost:4443")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "proj-a")
    cfg = GcsOpener().config
    assert cfg.endpoint == "http://localhost:4443"
    assert cfg.project == "proj-a"
    assert cfg.anonymous is True  # an emulator without a credentials file


def test_prefixed_env_beats_sdk_env_and_args_beat_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://sdk:1")
    monkeypatch.setenv("WDS_CLOUD_GCS_ENDPOINT", "http://ours:2/")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/sdk.json")
    monkeypatch.setenv("WDS_CLOUD_GCS_CREDENTIALS", "/ours.json")
    monkeypatch.setenv("WDS_CLOUD_GCS_RETRIES", "9")
    monkeypatch.setenv("WDS_CLOUD_GCS_ANONYMOUS", "yes")
    cfg = GcsOpener().config
    assert (cfg.endpoint, cfg.credentials, cfg.retries, cfg.anonymous) == (
        "http://ours:2",
        "/ours.json",
        9,
        True,
    )
    cfg = GcsOpener(GcsConfig(retries=1), endpoint="https://arg:3", anonymous=False).config
    assert (cfg.endpoint, cfg.retries, cfg.anonymous) == ("https://arg:3", 1, False)


def test_stall_timeout_from_env_and_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WDS_CLOUD_GCS_STALL_TIMEOUT", "45")
    assert GcsOpener().config.stall_timeout == 45
    assert GcsOpener(stall_timeout=5).config.stall_timeout == 5


def test_env_is_read_at_construction_not_later(monkeypatch: pytest.MonkeyPatch) -> None:
    opener = GcsOpener()
    monkeypatch.setenv("WDS_CLOUD_GCS_PAGE_SIZE", "7")
    assert opener.config.page_size == 1000
    assert GcsOpener().config.page_size == 7


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("WDS_CLOUD_GCS_RETRIES", "many", "WDS_CLOUD_GCS_RETRIES='many' is not an integer"),
        ("WDS_CLOUD_GCS_ANONYMOUS", "maybe", "not a boolean"),
        ("WDS_CLOUD_GCS_CHUNK_SIZE", "1000", "multiple of 262144"),
        ("WDS_CLOUD_GCS_READ_TIMEOUT", "soon", "not a number"),
        ("WDS_CLOUD_GCS_PAGE_SIZE", "0", "WDS_CLOUD_GCS_PAGE_SIZE='0' must be at least 1"),
        ("WDS_CLOUD_GCS_STALL_TIMEOUT", "0", "WDS_CLOUD_GCS_STALL_TIMEOUT='0' must be > 0"),
        ("WDS_CLOUD_GCS_STALL_TIMEOUT", "never", "not a number of seconds"),
    ],
)
def test_bad_env_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, message: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=message):
        GcsOpener()


def test_bad_arguments() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown GCS settings \['endpiont'\]; known: \[.*'endpoint'"
    ):
        GcsOpener(endpiont="http://typo")
    with pytest.raises(ConfigError, match=r"GcsConfig.retries=-1 must be at least 0"):
        GcsOpener(retries=-1)


def test_missing_sdk_names_the_extra() -> None:
    # A fresh interpreter in which google.cloud.storage cannot be imported.
    code = textwrap.dedent(
        """
        import sys
        sys.modules["google.cloud.storage"] = None
        from wds_cloud.errors import MissingDependencyError
        from wds_cloud.openers.gcs.opener import GcsOpener
        opener = GcsOpener(endpoint="http://127.0.0.1:9")
        try:
            opener.open("gs://b/k")
        except MissingDependencyError as exc:
            assert exc.extra == "gcs", exc.extra
            print(exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "pip install 'wds_cloud[gcs]'" in out.stdout
