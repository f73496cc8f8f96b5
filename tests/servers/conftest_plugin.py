"""pytest fixtures for a real AIStore cluster (loaded by ``pytest_plugins`` in tests/conftest.py).

``ais_cluster`` and ``ais_cluster_authn`` start one cluster each per session, only when a test
asks for one (:class:`tests.servers.aistore.Cluster`; the AuthN one requires tokens, see
``Cluster.token_for``). ``ais_cluster_s3`` is a third one, one target and one mountpath (about
12 s to start on 2 cores), whose ``aws`` backend is the session's SeaweedFS server (``seaweed``)
behind a request-counting proxy: ``s3://b/k`` is ``ais://b/k?provider=aws`` there. It is a
cluster of its own so that the shared one neither waits for SeaweedFS nor has a cloud backend. The binaries are built on first use, which takes minutes: CI should
run ``python -m tests.servers.aistore build`` before pytest. Without ``go`` (and no cached
binaries), or where no private network namespace can be made, the tests that use them are
skipped with the reason, unless ``WDS_CLOUD_REQUIRE_REAL_AIS=1``, which makes that a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.servers.aistore import Cluster
    from tests.support.faulty_proxy import FaultyProxy
    from tests.support.seaweed import SeaweedServer

REQUIRE_ENV = "WDS_CLOUD_REQUIRE_REAL_AIS"


def _start(tmp_path_factory: pytest.TempPathFactory, *, authn: bool, **options: Any) -> Cluster:
    from tests.servers.aistore import Cluster, GoNotFound, NamespaceUnavailable
    from wds_cloud.settings import env_bool

    cluster = Cluster(authn=authn, workdir=tmp_path_factory.mktemp("ais-real"), **options)
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


@dataclass
class S3FrontedCluster:
    """A real AIStore cluster in front of the session's SeaweedFS server (``ais_cluster_s3``).

    Attributes:
        cluster: the cluster; its ``aws`` buckets are SeaweedFS's buckets.
        seaweed: the SeaweedFS server (for direct S3 reads and arranging data).
        counter: the proxy between the cluster and SeaweedFS; its ``requests`` counts the
            HTTP requests the cluster sent to SeaweedFS so far.
    """

    cluster: Cluster
    seaweed: SeaweedServer
    counter: FaultyProxy


@pytest.fixture(scope="session")
def ais_cluster_s3(
    tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedServer
) -> Iterator[S3FrontedCluster]:
    """The session's AIStore 5.0 cluster (one proxy, one target) whose ``aws`` backend is
    ``seaweed``, through a counting proxy; no authentication."""
    from tests.servers.aistore import AwsBackend
    from tests.support.faulty_proxy import FaultyProxy
    from tests.support.seaweed import ACCESS_KEY, REGION, SECRET_KEY

    with FaultyProxy(seaweed.ports["s3.port"]) as counter:
        aws = AwsBackend(counter.port, ACCESS_KEY, SECRET_KEY, REGION)
        cluster = _start(tmp_path_factory, authn=False, aws=aws, targets=1, mountpaths=1)
        try:
            yield S3FrontedCluster(cluster, seaweed, counter)
        finally:
            cluster.stop()


CLUSTER_FIXTURES = ("ais_cluster", "ais_cluster_authn", "ais_cluster_s3")


def logs_section(funcargs: dict[str, Any]) -> tuple[str, str] | None:
    """The report section quoting the node logs of the cluster a failed test used, if any."""
    for name in CLUSTER_FIXTURES:
        value = funcargs.get(name)
        if value is not None:
            cluster = getattr(value, "cluster", value)
            return (f"AIStore node logs ({name})", cluster.logs_tail())
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """A test that fails while using a real cluster shows the tail of its nodes' logs."""
    outcome: Any = yield
    report = outcome.get_result()
    if report.failed and (section := logs_section(getattr(item, "funcargs", {}))) is not None:
        report.sections.append(section)
