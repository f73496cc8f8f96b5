"""pytest fixtures for a real AIStore cluster (loaded by ``pytest_plugins`` in tests/conftest.py).

``ais_cluster`` and ``ais_cluster_authn`` start one cluster each per session, only when a test
asks for one (:class:`tests.servers.aistore.Cluster`; the AuthN one requires tokens, see
``Cluster.token_for``). The binaries are built on first use, which takes minutes: CI should
run ``python -m tests.servers.aistore build`` before pytest. Without ``go`` (and no cached
binaries), or where no private network namespace can be made, the tests that use them are
skipped with the reason, unless ``WDS_CLOUD_REQUIRE_REAL_AIS=1``, which makes that a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.servers.aistore import Cluster

REQUIRE_ENV = "WDS_CLOUD_REQUIRE_REAL_AIS"


def _start(tmp_path_factory: pytest.TempPathFactory, *, authn: bool) -> Cluster:
    from tests.servers.aistore import Cluster, GoNotFound, NamespaceUnavailable
    from wds_cloud.settings import env_bool

    cluster = Cluster(authn=authn, workdir=tmp_path_factory.mktemp("ais-real"))
    try:
        return cluster.start()
    except (GoNotFound, NamespaceUnavailable) as exc:
        reason = f"no real AIStore: {str(exc).splitlines()[0]}"
        if env_bool(REQUIRE_ENV, False):
            pytest.fail(f"{reason} ({REQUIRE_ENV}=1)", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def ais_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The session's AIStore 5.0 cluster (one proxy, two targets), no authentication."""
    cluster = _start(tmp_path_factory, authn=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def ais_cluster_authn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The session's AIStore 5.0 cluster with AuthN: every request needs a token."""
    cluster = _start(tmp_path_factory, authn=True)
    try:
        yield cluster
    finally:
        cluster.stop()


CLUSTER_FIXTURES = ("ais_cluster", "ais_cluster_authn")


def logs_section(funcargs: dict[str, Any]) -> tuple[str, str] | None:
    """The report section quoting the node logs of the cluster a failed test used, if any."""
    for name in CLUSTER_FIXTURES:
        cluster = funcargs.get(name)
        if cluster is not None:
            return (f"AIStore node logs ({name})", cluster.logs_tail())
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """A test that fails while using a real cluster shows the tail of its nodes' logs."""
    outcome: Any = yield
    report = outcome.get_result()
    if report.failed and (section := logs_section(getattr(item, "funcargs", {}))) is not None:
        report.sections.append(section)
