"""Fixtures of the ``hf://`` tests: a local Hub (:mod:`tests.support.hub_server`) with its CDN,
and registries whose ``hf://`` opener reads from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.hub_server import HubServer
from wds_cloud.openers.hf.opener import HfConfig, HfOpener
from wds_cloud.openers.http.config import HttpConfig
from wds_cloud.openers.registry import OpenerRegistry

TOKEN = "hf_reader_0001"


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[HubServer]:
    """A local Hub over ``tmp_path / "hub"``, pages of 2 entries, ``TOKEN`` a valid token."""
    with HubServer(tmp_path / "hub", page_size=2) as server:
        server.tokens.add(TOKEN)
        yield server


def hf_registry(hub: HubServer, token: str = TOKEN, **http: Any) -> OpenerRegistry:
    """A registry whose ``hf://`` opener reads from ``hub`` with ``token`` (no backoff)."""
    registry = OpenerRegistry()
    opener = HfOpener(HfConfig(endpoint=hub.endpoint, token=token), HttpConfig(backoff=0, **http))
    registry.register("hf", opener, override=True)
    return registry
