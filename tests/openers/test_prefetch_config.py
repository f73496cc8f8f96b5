"""``prefetch``/``prefetch_chunk``: one name and one resolution on every backend config
(argument > ``WDS_CLOUD_<BACKEND>_PREFETCH[_CHUNK]`` > default), and as ``open()`` options."""

from __future__ import annotations

from typing import Any

import pytest

from wds_cloud.errors import ConfigError
from wds_cloud.openers.ais.opener import AisConfig
from wds_cloud.openers.gcs.config import GcsConfig
from wds_cloud.openers.http.opener import HttpConfig, HttpOpener
from wds_cloud.openers.s3.config import S3Config
from wds_cloud.openers.streams.prefetch import DEFAULT_PREFETCH, DEFAULT_PREFETCH_CHUNK

CONFIGS: list[tuple[Any, str]] = [
    (S3Config, "S3"),
    (HttpConfig, "HTTP"),
    (GcsConfig, "GCS"),
    (AisConfig, "AIS"),
]


@pytest.mark.parametrize(("cls", "label"), CONFIGS)
def test_defaults_environment_and_arguments(cls: Any, label: str) -> None:
    cfg = cls().resolve(environ={})
    assert (cfg.prefetch, cfg.prefetch_chunk) == (DEFAULT_PREFETCH, DEFAULT_PREFETCH_CHUNK)
    env = {f"WDS_CLOUD_{label}_PREFETCH": "6", f"WDS_CLOUD_{label}_PREFETCH_CHUNK": "1_048_576"}
    cfg = cls().resolve(environ=env)
    assert (cfg.prefetch, cfg.prefetch_chunk) == (6, 1 << 20)
    cfg = cls(prefetch=2).resolve({"prefetch_chunk": 4096}, environ=env)
    assert (cfg.prefetch, cfg.prefetch_chunk) == (2, 4096)
    assert cfg.resolve(environ={}) == cfg  # resolving again changes nothing


@pytest.mark.parametrize(("cls", "label"), CONFIGS)
@pytest.mark.parametrize(
    ("field", "value"), [("PREFETCH", "-1"), ("PREFETCH", "many"), ("PREFETCH_CHUNK", "0")]
)
def test_bad_values_name_the_variable(cls: Any, label: str, field: str, value: str) -> None:
    name = f"WDS_CLOUD_{label}_{field}"
    with pytest.raises(ConfigError, match=name):
        cls().resolve(environ={name: value})
    with pytest.raises(ConfigError):
        cls().resolve({field.lower(): int(value) if value.lstrip("-").isdigit() else value})


def test_open_rejects_unknown_options_naming_prefetch() -> None:
    with pytest.raises(ConfigError, match="prefetch_chunk"):
        HttpOpener().open("http://127.0.0.1:9/x", prefetchh=2)
