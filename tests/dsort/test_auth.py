"""dSort requests go through the AIStore opener's client, so the AuthN token reaches the cluster."""

from __future__ import annotations

import pytest

from tests.dsort.conftest import make_shards, read_shards
from tests.dsort.test_jobs import spec
from tests.emulators.ais.server import AisEmulator
from wds_cloud.aistore import dsort
from wds_cloud.openers.ais.opener import AisConfig

pytestmark = pytest.mark.ais

SPEC = spec()


def _run(**where: object) -> dsort.DsortResult:
    job = dsort.start(SPEC, **where)  # type: ignore[arg-type]
    return dsort.wait(job, progress=False, poll_interval=0.02, timeout=60, **where)  # type: ignore[arg-type]


def test_token_from_config(ais_emulator: AisEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIS_AUTHN_TOKEN", raising=False)
    make_shards(ais_emulator.store, "src")
    ais_emulator.required_token = "cfg-token-1"
    result = _run(config=AisConfig(endpoint=ais_emulator.url, token="cfg-token-1", retries=0))
    assert result.success and read_shards(ais_emulator.store, "dst")
    assert ais_emulator.authorizations
    assert set(ais_emulator.authorizations) == {"Bearer cfg-token-1"}


def test_token_from_environment(ais_emulator: AisEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    make_shards(ais_emulator.store, "src")
    ais_emulator.required_token = "env-token-2"
    monkeypatch.setenv("AIS_ENDPOINT", ais_emulator.url)
    monkeypatch.setenv("AIS_AUTHN_TOKEN", "env-token-2")
    assert _run().success
    job = dsort.start(SPEC, endpoint=ais_emulator.url)
    dsort.abort(job)
    assert set(ais_emulator.authorizations) == {"Bearer env-token-2"}


def test_wrong_token_is_refused_without_showing_it(
    ais_emulator: AisEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIS_AUTHN_TOKEN", raising=False)
    make_shards(ais_emulator.store, "src")
    ais_emulator.required_token = "right-token"
    config = AisConfig(endpoint=ais_emulator.url, token="wrong-token-3", retries=0)
    with pytest.raises(dsort.DsortJobError, match="invalid token") as err:
        dsort.start(SPEC, config=config)
    assert "wrong-token-3" not in str(err.value) and "wrong-token-3" not in repr(config)
    assert set(ais_emulator.authorizations) == {"Bearer wrong-token-3"}
