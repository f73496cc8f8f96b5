"""The default registry follows a changed ``AIS_ENDPOINT``/``AIS_AUTHN_TOKEN`` (AuthN tokens
expire and get refreshed), and a 401 says where the token comes from.

Against the AIStore emulator with a required token (``tests/ais_real/test_authn.py`` runs the
same against a real AuthN cluster).
"""

from __future__ import annotations

from typing import Any

import pytest

import wds_cloud
from tests.emulators.ais.server import AisEmulator
from tests.support.tarbuild import tar_bytes
from wds_cloud.errors import ShardOpenError
from wds_cloud.openers.ais.opener import AisOpener
from wds_cloud.openers.registry import OpenerRegistry, default_registry

pytest.importorskip("aistore.sdk")
pytestmark = pytest.mark.ais

TOKEN = "token-one"


@pytest.fixture
def private_bucket(ais_emulator: AisEmulator, monkeypatch: pytest.MonkeyPatch) -> str:
    ais_emulator.store.create_bucket("b")
    ais_emulator.store.put_object("b", "s.tar", tar_bytes([("k.txt", b"hello")]))
    ais_emulator.required_token = TOKEN
    monkeypatch.setenv("AIS_ENDPOINT", ais_emulator.url)
    for name in ("WDS_CLOUD_AIS_ENDPOINT", "WDS_CLOUD_AIS_TOKEN", "AIS_AUTHN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return "ais://b/s.tar"


def _texts(url: str, registry: OpenerRegistry | None = None) -> list[bytes]:
    return [s["txt"] for s in wds_cloud.WebDataset(url, registry=registry)]


def test_the_default_registry_follows_a_refreshed_token(
    private_bucket: str, ais_emulator: AisEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIS_AUTHN_TOKEN", TOKEN)
    assert _texts(private_bucket) == [b"hello"]
    first = default_registry().get("ais")

    ais_emulator.required_token = "token-two"  # the old token expired
    with pytest.raises(ShardOpenError, match="rejected the AuthN token"):
        _texts(private_bucket)
    monkeypatch.setenv("AIS_AUTHN_TOKEN", "token-two")  # ... and the user refreshed it
    assert _texts(private_bucket) == [b"hello"]
    assert default_registry().get("ais") is not first
    assert ais_emulator.authorizations[-1] == "Bearer token-two"


def test_an_unchanged_environment_keeps_the_opener(
    private_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIS_AUTHN_TOKEN", TOKEN)
    registry = OpenerRegistry()
    opener = registry.get("ais")
    assert registry.get("ais") is opener and not opener.environment_changed()
    monkeypatch.setenv("AIS_ENDPOINT", "http://127.0.0.1:1")
    assert opener.environment_changed() and registry.get("ais") is not opener


def test_an_opener_registered_as_an_object_is_never_replaced(
    private_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIS_AUTHN_TOKEN", TOKEN)
    registry = OpenerRegistry()
    mine = AisOpener()
    registry.register("ais", mine, override=True)
    monkeypatch.setenv("AIS_AUTHN_TOKEN", "another")
    assert registry.get("ais") is mine and mine.config.token == TOKEN


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (None, r"AIStore requires an AuthN token and none was sent \(401\): set AIS_AUTHN_TOKEN"),
        ("wrong", r"AIStore rejected the AuthN token: .*\(401: invalid token.*set AIS_AUTHN_TOKEN"),
    ],
    ids=["missing", "wrong"],
)
def test_a_401_names_the_endpoint_and_the_variable(
    private_bucket: str,
    ais_emulator: AisEmulator,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    token: str | None,
    expected: str,
) -> None:
    if token is not None:
        monkeypatch.setenv("AIS_AUTHN_TOKEN", token)
    caplog.set_level("DEBUG")
    with pytest.raises(ShardOpenError, match=expected) as info:
        _texts(private_bucket, OpenerRegistry())
    assert f"AIStore at {ais_emulator.url}" in str(info.value)
    assert info.value.url == private_bucket
    opener: Any = AisOpener()
    if token is not None:
        for shown in (str(info.value), repr(info.value), repr(opener), repr(opener.config)):
            assert token not in shown
        assert f"Bearer {token}" not in caplog.text
