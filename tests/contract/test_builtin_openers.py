"""The opener contract for the built-in backends: local paths, file://, pipe:cat, http, hf."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.contract.opener_contract import OpenerCase, OpenerContract
from tests.support.http_server import HttpFileServer
from tests.support.hub_server import HubServer
from wds_cloud.errors import ShardOpenError
from wds_cloud.openers.hf.opener import HfConfig, HfOpener
from wds_cloud.openers.http.config import HttpConfig
from wds_cloud.openers.http.opener import HttpOpener
from wds_cloud.openers.local import LocalOpener
from wds_cloud.openers.pipe import PipeOpener

DATA = os.urandom(300_000) + bytes(range(256)) * 100


@pytest.fixture
def shard_dir(tmp_path: Path) -> Path:
    (tmp_path / "shard.tar").write_bytes(DATA)
    return tmp_path


class TestLocalPathContract(OpenerContract):
    @pytest.fixture
    def opener_case(self, shard_dir: Path) -> OpenerCase:
        return OpenerCase(
            LocalOpener(), str(shard_dir / "shard.tar"), str(shard_dir / "missing.tar"), DATA
        )


class TestFileUrlContract(OpenerContract):
    @pytest.fixture
    def opener_case(self, shard_dir: Path) -> OpenerCase:
        return OpenerCase(
            LocalOpener(),
            (shard_dir / "shard.tar").as_uri(),
            (shard_dir / "missing.tar").as_uri(),
            DATA,
        )


class TestPipeCatContract(OpenerContract):
    # a command cannot say "not found" before it runs: its failure arrives at end of stream
    missing_is_lazy = True
    missing_error = ShardOpenError

    @pytest.fixture
    def opener_case(self, shard_dir: Path) -> OpenerCase:
        return OpenerCase(
            PipeOpener(allow=True),
            f"pipe:cat {shard_dir / 'shard.tar'}",
            f"pipe:cat {shard_dir / 'missing.tar'}",
            DATA,
        )


class TestHttpContract(OpenerContract):
    @pytest.fixture
    def opener_case(self, shard_dir: Path) -> Iterator[OpenerCase]:
        with HttpFileServer(shard_dir) as server:
            yield OpenerCase(
                HttpOpener(retries=2, backoff=0.0),
                server.url("shard.tar"),
                server.url("missing.tar"),
                DATA,
            )


class TestHttpCuttingServerContract(OpenerContract):
    """The same contract while the server drops every response after 50 000 bytes."""

    @pytest.fixture
    def opener_case(self, shard_dir: Path) -> Iterator[OpenerCase]:
        with HttpFileServer(shard_dir) as server:
            server.cut_after = 50_000
            yield OpenerCase(
                HttpOpener(retries=2, backoff=0.0),
                server.url("shard.tar"),
                server.url("missing.tar"),
                DATA,
            )


class TestHfContract(OpenerContract):
    """``hf://`` on the local Hub: a private repo, read with its token, from the CDN the Hub
    redirects to, which drops every response after 50 000 bytes (each resume goes through the
    Hub again)."""

    @pytest.fixture
    def opener_case(self, tmp_path: Path) -> Iterator[OpenerCase]:
        with HubServer(tmp_path / "hub") as hub:
            hub.add("datasets/org/repo", "train/shard.tar", DATA)
            hub.private.add("datasets/org/repo")
            hub.tokens.add("hf_contract")
            hub.cdn.cut_after = 50_000
            yield OpenerCase(
                HfOpener(
                    HfConfig(endpoint=hub.endpoint, token="hf_contract"), HttpConfig(backoff=0)
                ),
                "hf://datasets/org/repo/train/shard.tar",
                "hf://datasets/org/repo/train/missing.tar",
                DATA,
            )
