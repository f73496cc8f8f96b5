"""``JobOptions``: how the dSort and offline-ETL functions reach the cluster and wait, built from
the keyword arguments every public function keeps (emulator)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from tests.dsort.conftest import make_shards, read_shards
from tests.emulators.ais.server import AisEmulator
from wds_cloud.aistore import dsort, transform as at
from wds_cloud.aistore.cluster import JobOptions
from wds_cloud.errors import ConfigError
from wds_cloud.openers.ais.opener import AisConfig

pytestmark = pytest.mark.ais

CLUSTER = {"client": None, "endpoint": None, "config": None}


def waiting(timeout: float) -> dict[str, Any]:
    return {**CLUSTER, "timeout": timeout, "progress": True, "poll_interval": 1.0}


# each public function -> the documented keyword arguments of the group, with their defaults
PUBLIC: list[tuple[Callable[..., Any], dict[str, Any]]] = [
    (dsort.start, CLUSTER),
    (dsort.abort, CLUSTER),
    (dsort.wait, waiting(300.0)),
    (dsort.reshard_via_dsort, waiting(3600.0)),
    (at.plan_transform, CLUSTER),
    (at.start_transform, CLUSTER),
    (at.transform_status, CLUSTER),
    (at.transform, waiting(3600.0)),
    (at.wait_transform, waiting(3600.0)),
]


@pytest.mark.parametrize(("function", "expected"), PUBLIC, ids=lambda v: getattr(v, "__name__", ""))
def test_public_functions_keep_their_keyword_arguments(
    function: Callable[..., Any], expected: dict[str, Any]
) -> None:
    params = inspect.signature(function).parameters
    assert {name: params[name].default for name in expected if name in params} == expected


def test_the_options_are_that_group() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(JobOptions)}
    assert fields == waiting(3600.0)


def test_client_endpoint_and_config(
    ais_emulator: AisEmulator, ais_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = JobOptions(client=ais_client, endpoint="http://127.0.0.1:9")
    assert given.sdk_client() is ais_client and given.connected() is given
    monkeypatch.delenv("AIS_ENDPOINT", raising=False)
    monkeypatch.delenv("WDS_CLOUD_AIS_ENDPOINT", raising=False)
    with pytest.raises(
        ConfigError,
        match="pass endpoint=, config= or client=, or set WDS_CLOUD_AIS_ENDPOINT or AIS_ENDPOINT",
    ):
        JobOptions().sdk_client()
    make_shards(ais_emulator.store, "src", shards=2)
    # the endpoint wins over the config's (nothing listens on port 9)
    dead = AisConfig(endpoint="http://127.0.0.1:9", retries=0)
    options = JobOptions(endpoint=ais_emulator.url, config=dead, timeout=5.0)
    connected = options.connected()
    assert connected.client is not None and connected.connected() is connected
    assert dataclasses.replace(connected, client=None) == options
    names = [e.name for e in connected.client.bucket("src").list_objects_iter()]
    assert names == ["samples-00.tar", "samples-01.tar"]
    for variable in ("WDS_CLOUD_AIS_ENDPOINT", "AIS_ENDPOINT"):
        monkeypatch.setenv(variable, ais_emulator.url)
        assert JobOptions().connected().client is not None
        monkeypatch.delenv(variable)


def test_reshard_with_an_endpoint_only(ais_emulator: AisEmulator) -> None:
    make_shards(ais_emulator.store, "raw", shards=3, per_shard=4)
    summary = dsort.reshard_via_dsort(
        "ais://raw/samples-{00..02}.tar",
        "ais://out/",
        maxsize=700,
        seed=5,
        endpoint=ais_emulator.url,
        progress=False,
        poll_interval=0.02,
        timeout=60,
    )
    assert summary.samples == 12
    assert [f"ais://out/{name}" for name, _ in read_shards(ais_emulator.store, "out")] == (
        summary.shards
    )
