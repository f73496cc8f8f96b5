"""The real-cluster machinery itself: the binaries' cache, the fixture's skip rule, the namespace.

None of these needs ``go`` or the AIStore binaries.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.servers import conftest_plugin
from tests.servers.aistore_build import BIN_DIR_ENV, GoNotFound, cache_dir, ensure_binaries
from tests.servers.netns import NamespaceUnavailable, PrivateNetwork, stop_process


@pytest.fixture
def no_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty binaries directory and a PATH without ``go``; returns the directory."""
    bin_dir = tmp_path / "ais-bin"
    monkeypatch.setenv(BIN_DIR_ENV, str(bin_dir))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.delenv(conftest_plugin.REQUIRE_ENV, raising=False)
    return bin_dir


def test_cache_dir_is_keyed_by_version() -> None:
    env = {"HOME": "/home/u", "XDG_CACHE_HOME": "/c"}
    assert cache_dir("v1.5.0", env) == Path("/c/wds_cloud/aistore/v1.5.0")
    assert cache_dir("v1.5.0", {**env, BIN_DIR_ENV: "/opt/ais"}) == Path("/opt/ais")


def test_missing_go_is_a_one_line_reason(no_go: Path) -> None:
    with pytest.raises(GoNotFound) as info:
        ensure_binaries()
    message = str(info.value)
    assert "\n" not in message
    assert "`go` is not on PATH" in message and str(no_go) in message


def test_cached_binaries_need_no_go(no_go: Path) -> None:
    no_go.mkdir()
    for name in ("aisnode", "authn"):
        (no_go / name).write_text("#!/bin/sh\n")
        (no_go / name).chmod(0o755)
    paths = ensure_binaries()
    assert (paths.aisnode, paths.authn, paths.build_seconds) == (
        no_go / "aisnode",
        no_go / "authn",
        None,
    )


def test_fixture_skips_without_go_unless_required(
    no_go: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(pytest.skip.Exception, match=r"no real AIStore: .*`go` is not on PATH"):
        conftest_plugin._start(tmp_path_factory, authn=False)
    monkeypatch.setenv(conftest_plugin.REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{conftest_plugin.REQUIRE_ENV}=1"):
        conftest_plugin._start(tmp_path_factory, authn=False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, deadline: float) -> bytes:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return bytes(resp.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _host_listeners(port: int) -> set[str]:
    """Local addresses (hex, as in /proc/net/tcp*) of this namespace's listeners on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.rpartition(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def test_private_network_relays_only_its_forwarded_ports(tmp_path: Path) -> None:
    """Servers listening on every interface inside are reachable on the host only through
    the relayed ports, on 127.0.0.1."""
    (tmp_path / "page.txt").write_text("inside")
    net = PrivateNetwork(tmp_path / "relay.log")
    relayed, hidden = net.forward(), _free_port()
    try:
        net.start()
    except NamespaceUnavailable as exc:
        pytest.skip(str(exc))
    servers = [
        subprocess.Popen(
            net.command([sys.executable, "-m", "http.server", str(port), "--bind", "0.0.0.0"]),
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in (relayed, hidden)
    ]
    try:
        deadline = time.monotonic() + 20
        assert _get(f"http://127.0.0.1:{relayed}/page.txt", deadline) == b"inside"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", hidden), timeout=2).close()
        # on the host, the relay's 127.0.0.1 listener is the only one: no wildcard address
        assert _host_listeners(relayed) == {"0100007F"}
        assert _host_listeners(hidden) == set()
    finally:
        for server in servers:
            stop_process(server, 5)
        net.stop()


def test_build_step_passes_without_go_unless_required(no_go: Path) -> None:
    """The README's test command runs ``python -m tests.servers.aistore build`` before pytest:
    without ``go`` it says why and exits 0 (the tests then skip), but 2 where CI requires the
    real cluster."""
    import os
    import subprocess
    import sys

    command = [sys.executable, "-m", "tests.servers.aistore", "build"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop(conftest_plugin.REQUIRE_ENV, None)
    quiet = subprocess.run(command, env=env, capture_output=True, text=True)
    assert quiet.returncode == 0 and "no real AIStore" in quiet.stderr
    required = subprocess.run(
        command, env={**env, conftest_plugin.REQUIRE_ENV: "1"}, capture_output=True, text=True
    )
    assert required.returncode == 2 and "`go` is not on PATH" in required.stderr


def test_a_failed_test_on_a_cluster_quotes_its_node_logs() -> None:
    class Logged:
        def logs_tail(self) -> str:
            return "proxy: E 12:00 bucket missing"

    assert conftest_plugin.logs_section({"ais_cluster": Logged(), "tmp_path": 1}) == (
        "AIStore node logs (ais_cluster)",
        "proxy: E 12:00 bucket missing",
    )
    assert conftest_plugin.logs_section({"ais_emulator": Logged()}) is None


def test_the_report_hook_adds_the_logs_to_a_failure(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
import pytest

pytest_plugins = ["tests.servers.conftest_plugin"]


class Logged:
    def logs_tail(self):
        return "target t1: mountpath mp2 is full"


@pytest.fixture
def ais_cluster():
    return Logged()
"""
    )
    pytester.makepyfile(
        """
def test_fails(ais_cluster):
    assert False

def test_passes(ais_cluster):
    pass
"""
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-n", "0")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*AIStore node logs (ais_cluster)*", "*mountpath mp2 is full*"])
    assert result.stdout.str().count("mountpath mp2 is full") == 1


_TWO_WRITE_SERVER = """
import socket, sys, time
server = socket.create_server(("0.0.0.0", int(sys.argv[1])))
conn, _ = server.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while conn.recv(1):
    conn.sendall(b"h")  # a reply in two writes, as an HTTP server sends headers, then a body
    time.sleep(0.002)
    conn.sendall(b"b")
"""


def test_relay_forwards_each_write_without_waiting_for_an_ack(tmp_path: Path) -> None:
    """A reply written in two pieces crosses the relay in about a loopback round trip, not
    after the peer's delayed ACK (Nagle's algorithm on the relay's sockets: ~40 ms a request,
    which made small GETs on the real cluster 10x slower than without the relay)."""
    net = PrivateNetwork(tmp_path / "relay.log")
    port = net.forward()
    try:
        net.start()
    except NamespaceUnavailable as exc:
        pytest.skip(str(exc))
    server = subprocess.Popen(
        net.command([sys.executable, "-c", _TWO_WRITE_SERVER, str(port)]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            conn = socket.create_connection(("127.0.0.1", port), timeout=5)
            try:
                conn.sendall(b"?")
                if conn.recv(2):  # the relay closes at once while nothing listens inside yet
                    break
            except OSError:
                pass
            conn.close()
            assert time.monotonic() < deadline, "the server never answered through the relay"
            time.sleep(0.1)
        conn.recv(2)
        times = []
        for _ in range(20):
            began = time.perf_counter()
            conn.sendall(b"?")
            reply = b""
            while len(reply) < 2:
                reply += conn.recv(2 - len(reply))
            times.append(time.perf_counter() - began)
        conn.close()
        assert sorted(times)[10] < 0.02, f"median round trip {sorted(times)[10] * 1000:.0f} ms"
    finally:
        stop_process(server, 5)
        net.stop()
