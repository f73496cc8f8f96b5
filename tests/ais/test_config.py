"""AisConfig resolution, the missing-SDK error, and DataLoader workers under spawn."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.ais.conftest import ETL_NAME, Shards
from tests.emulators.ais.server import AisEmulator
from wds_cloud.errors import ConfigError
from wds_cloud.openers.ais.opener import AisConfig, AisOpener
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.ais


def test_endpoint_and_token_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIS_ENDPOINT", raising=False)
    monkeypatch.delenv("AIS_AUTHN_TOKEN", raising=False)
    assert AisConfig().resolve().endpoint == "http://localhost:8080"
    assert AisConfig().resolve().token is None
    monkeypatch.setenv("AIS_ENDPOINT", "http://ais.example:51080/")
    monkeypatch.setenv("AIS_AUTHN_TOKEN", "tok-env")
    cfg = AisConfig().resolve()
    assert (cfg.endpoint, cfg.token) == ("http://ais.example:51080", "tok-env")
    cfg = AisConfig(endpoint="http://explicit:1", token="tok-arg").resolve()
    assert (cfg.endpoint, cfg.token) == ("http://explicit:1", "tok-arg")


def test_defaults_and_normalisation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIS_ENDPOINT", raising=False)
    cfg = AisConfig(provider="s3", etl_args={"a": 1, "b": [1, 2]}).resolve()
    assert cfg.provider == "aws"
    assert cfg.etl_args == '{"a":1,"b":[1,2]}'
    assert (cfg.retries, cfg.backoff, cfg.page_size, cfg.part_size) == (3, 0.5, 0, 16 << 20)


def test_stall_timeout_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WDS_CLOUD_AIS_STALL_TIMEOUT", raising=False)
    assert AisConfig(endpoint="http://x").resolve().stall_timeout == 60
    monkeypatch.setenv("WDS_CLOUD_AIS_STALL_TIMEOUT", "30")
    assert AisConfig(endpoint="http://x").resolve().stall_timeout == 30
    assert AisConfig(endpoint="http://x", stall_timeout=5).resolve().stall_timeout == 5
    monkeypatch.setenv("WDS_CLOUD_AIS_STALL_TIMEOUT", "0")
    with pytest.raises(ConfigError, match="WDS_CLOUD_AIS_STALL_TIMEOUT"):
        AisConfig(endpoint="http://x").resolve()


def test_bad_config() -> None:
    with pytest.raises(ConfigError, match="http"):
        AisConfig(endpoint="ais.example:8080").resolve()
    with pytest.raises(ConfigError, match="provider"):
        AisConfig(provider="ftp").resolve()
    with pytest.raises(ConfigError):
        AisConfig(endpoint="http://x", part_size=0).resolve()


def test_overrides_replace_config_fields() -> None:
    base = AisConfig(endpoint="http://a:1", etl="first-etl")
    opener = AisOpener(base, etl="second-etl")
    assert opener.config.endpoint == "http://a:1"
    assert opener.config.etl == "second-etl"


def test_missing_sdk_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['aistore'] = None\n"
        "from wds_cloud.errors import MissingDependencyError\n"
        "from wds_cloud.openers.ais.opener import AisOpener\n"
        "try:\n"
        "    AisOpener(endpoint='http://127.0.0.1:9').open('ais://b/x.tar')\n"
        "except MissingDependencyError as e:\n"
        "    print('EXTRA', e.extra, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "EXTRA ais" in out.stdout
    assert "pip install 'wds_cloud[ais]'" in out.stdout


def test_import_wds_cloud_does_not_import_the_sdk() -> None:
    code = (
        "import sys, wds_cloud\n"
        "from wds_cloud.openers.registry import default_registry\n"
        "assert 'ais' in default_registry()\n"
        "print('aistore' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
@pytest.mark.emulator_only("inline ETL needs Kubernetes")
@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_dataloader_two_workers(
    ais_emulator: AisEmulator, shards: Shards, upper_etl: str, start: str
) -> None:
    torch = pytest.importorskip("torch")
    from wds_cloud.pytorch import WebDataset

    registry = OpenerRegistry()
    registry.register("ais", AisOpener(endpoint=ais_emulator.url, retries=1), override=True)
    ds = WebDataset(shards.urls, registry=registry, etl=ETL_NAME, shardshuffle=False)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=2, multiprocessing_context=start
    )
    got = sorted((s["__key__"], s["txt"]) for s in loader)
    want = sorted(
        (s["__key__"], s["txt"].upper()) for url in shards.urls for s in shards.expected[url]
    )
    assert got == want
