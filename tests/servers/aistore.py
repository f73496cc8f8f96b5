"""A real AIStore 5.0 cluster for tests: one proxy, two targets, optionally AuthN.

Usage::

    with Cluster() as cluster:                 # builds the binaries on first use (minutes)
        Client(cluster.endpoint)               # http://127.0.0.1:<port>
    with Cluster(authn=True) as cluster:
        cluster.token_for("reader")            # a JWT that may read and list, nothing more
    with Cluster(aws=AwsBackend(port, key, secret)) as cluster:
        ...                                    # s3://b/k as ais://b/k?provider=aws, from port

    python -m tests.servers.aistore up [--authn]   # prints AIS_ENDPOINT=..., runs until Ctrl-C
    python -m tests.servers.aistore build          # only build (or find) the binaries

Each target has two mountpaths in the cluster's directory, which must be on a filesystem with
user extended attributes (targets keep object metadata in them; tmpfs may lack them): it is
checked before anything starts. The nodes and AuthN run in a private network namespace
(:mod:`tests.servers.netns`: AIStore 5.0 listens on every interface for its public port, AuthN
always does), and only their public ports are relayed to the host's ``127.0.0.1``, each with
the same number, so the proxy's redirects to targets work unchanged; an AWS backend's S3
server on the host is reached from inside through :meth:`PrivateNetwork.reach`. Every process
the cluster
starts is stopped by its PID on exit (SIGTERM, then SIGKILL); logs stay in the directory and
:meth:`Cluster.logs_tail` quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from tests.servers.aistore_build import (
    BinariesUnavailable,
    GoNotFound,
    Paths,
    ensure_binaries,
)
from tests.servers.aistore_config import (
    AUTHN_PORT,
    READ_ONLY_ACCESS,
    S3_INNER_PORT,
    AwsBackend,
    Node,
    authn_config,
    cluster_config,
    local_config,
)
from tests.servers.netns import NamespaceUnavailable, PrivateNetwork, stop_process

__all__ = [
    "AwsBackend",
    "BinariesUnavailable",
    "Cluster",
    "ClusterStartError",
    "GoNotFound",
    "NamespaceUnavailable",
    "Paths",
    "ensure_binaries",
]

ADMIN = "admin"
#: the users an AuthN-enabled cluster has: a reader (read and list any bucket) and a user
#: with no permission at all; the admin may do everything
READER, NO_ACCESS = "reader", "nobody"
_READER_ROLE = "wds-read-only"


class ClusterStartError(RuntimeError):
    """A node or AuthN exited or did not become ready (the message quotes the logs)."""


def xattrs_supported(directory: Path) -> bool:
    """Whether files in ``directory`` take user extended attributes."""
    probe = directory / ".xattr-probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, "user.wds_cloud_probe", b"1")
        return os.getxattr(probe, "user.wds_cloud_probe") == b"1"
    except OSError:
        return False
    finally:
        probe.unlink()


def _request(url: str, *, method: str = "GET", body: Any = None, token: str | None = None) -> bytes:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return bytes(resp.read())


class Cluster:
    """One proxy and ``targets`` targets of AIStore, each target with ``mountpaths`` mountpaths.

    Args:
        authn: also run AuthN and make the cluster require its tokens (HMAC, one shared secret).
        aws: enable the ``aws`` backend, pointed at this S3 server of the host instead of AWS.
        workdir: directory for configs, logs and data (a new temporary one when None). It is
            left in place on exit, logs included.
        binaries: the binaries to run (:func:`ensure_binaries` when None).
        targets: number of targets.
        mountpaths: mountpaths per target.
        startup_timeout: seconds for the cluster to become ready.

    Attributes:
        endpoint: the proxy's URL, ``http://127.0.0.1:<port>`` (set by :meth:`start`).
        authn_url: AuthN's URL when ``authn`` (else None).
        nodes: the nodes, proxy first.
        startup_seconds: how long :meth:`start` took, binaries already built.
    """

    def __init__(
        self,
        *,
        authn: bool = False,
        aws: AwsBackend | None = None,
        workdir: str | os.PathLike[str] | None = None,
        binaries: Paths | None = None,
        targets: int = 2,
        mountpaths: int = 2,
        startup_timeout: float = 120.0,
    ) -> None:
        self.authn = authn
        self.aws = aws
        self.workdir = Path(workdir) if workdir is not None else None
        self.binaries = binaries
        self.n_targets = targets
        self.n_mountpaths = mountpaths
        self.startup_timeout = startup_timeout
        self.endpoint = ""
        self.authn_url: str | None = None
        self.nodes: list[Node] = []
        self.startup_seconds: float | None = None
        self.root = Path()
        self._net: PrivateNetwork | None = None
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._passwords: dict[str, str] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Start AuthN (if asked), the proxy and the targets; wait until the cluster is ready.

        Raises:
            BinariesUnavailable: no binaries and no way to build them (see its message).
            NamespaceUnavailable: no private network namespace can be made here.
            ClusterStartError: the directory lacks user xattrs, or a process exited or did
                not become ready in time (log tails included).
        """
        paths = self.binaries or ensure_binaries()
        began = time.monotonic()
        if self.workdir is None:
            self.root = Path(tempfile.mkdtemp(prefix="wds-ais-"))
        else:
            self.root = self.workdir
            self.root.mkdir(parents=True, exist_ok=True)
        if not xattrs_supported(self.root):
            raise ClusterStartError(
                f"{self.root} is on a filesystem without user extended attributes, which "
                "AIStore targets need (tmpfs may lack them): pass a workdir on a disk"
            )
        try:
            self._start(paths)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _start(self, paths: Paths) -> None:
        net = self._net = PrivateNetwork(self.root / "relay.log")
        roles = ["proxy"] + ["target"] * self.n_targets
        for i, role in enumerate(roles):
            name = "proxy" if role == "proxy" else f"target{i}"
            port = net.forward()
            root = self.root / name
            self.nodes.append(Node(name, role, port, 9080 + i, 10080 + i, root, self.n_mountpaths))
        authn_port = net.forward(AUTHN_PORT) if self.authn else None
        if self.aws is not None:
            net.reach(self.aws.port, S3_INNER_PORT)
        net.start()
        self.endpoint = self.nodes[0].url

        secret = secrets.token_hex(32) if self.authn else None
        if authn_port is not None and secret is not None:
            self.authn_url = f"http://127.0.0.1:{authn_port}"
            self._start_authn(paths, secret)
        shared = self.root / "ais.json"
        config = cluster_config(self.endpoint, auth_secret=secret, aws=self.aws is not None)
        shared.write_text(json.dumps(config, indent=1))
        node_env = self.aws.environ(self.root) if self.aws is not None else None
        for node in self.nodes:
            for path in (node.root / "conf", node.log_dir):
                path.mkdir(parents=True, exist_ok=True)
            local = node.root / "ais_local.json"
            local.write_text(json.dumps(local_config(node), indent=1))
            args = [str(paths.aisnode), f"-config={shared}", f"-local_config={local}"]
            args.append(f"-role={node.role}")
            if node.role == "proxy":
                args.append(f"-ntargets={self.n_targets}")
            self._spawn(node.name, args, node.root, node_env)
        self._wait_ready()

    def _spawn(
        self, name: str, args: list[str], cwd: Path, env: dict[str, str] | None = None
    ) -> None:
        """Start ``args`` inside the namespace, output to ``<cwd>/stdout.log``."""
        assert self._net is not None
        # AIS_* variables of the caller (an endpoint, a token, a key) must not reach the servers,
        # nor its AWS_* and S3_ENDPOINT (an aws backend gets its own, see AwsBackend)
        clean = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AIS_", "AWS_")) and k != "S3_ENDPOINT"
        }
        clean.update(env or {})
        with open(cwd / "stdout.log", "ab") as out:
            self._processes[name] = subprocess.Popen(
                self._net.command(args),
                cwd=cwd,
                env=clean,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def stop(self, timeout: float = 15.0) -> None:
        """Stop every process this cluster started, by PID: SIGTERM all, SIGKILL stragglers."""
        processes, self._processes = self._processes, {}
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in processes.values():
            stop_process(process, max(0.1, deadline - time.monotonic()))
        net, self._net = self._net, None
        if net is not None:
            net.stop()

    def kill(self, name: str) -> None:
        """SIGKILL the node ``name`` (``proxy``, ``target1``, ...) by its PID, as a crash would
        end it; :meth:`stop` still stops the others.

        Raises:
            KeyError: no running process of that name.
        """
        process = self._processes[name]
        process.kill()
        process.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- readiness ---------------------------------------------------------------------------

    def _check_alive(self) -> None:
        for name, process in self._processes.items():
            if process.poll() is not None:
                raise ClusterStartError(
                    f"{name} exited with {process.returncode}\n{self.logs_tail()}"
                )

    def _poll(self, what: str, probe: Any, deadline: float) -> Any:
        """Call ``probe()`` until it returns without an HTTP or socket error."""
        while True:
            self._check_alive()
            try:
                return probe()
            except (OSError, ValueError) as exc:
                if time.monotonic() > deadline:
                    raise ClusterStartError(
                        f"{what} not ready after {self.startup_timeout:.0f}s ({exc})\n"
                        f"{self.logs_tail()}"
                    ) from exc
                time.sleep(0.2)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        # the primary answers ?prr=true ("ready to rebalance") with 200 once the cluster has
        # started; a target answers ?readiness=true with 200 once it has joined and started
        health = [(self.nodes[0], "prr=true")] + [(n, "readiness=true") for n in self.nodes[1:]]
        for node, query in health:
            url = f"{node.url}/v1/health?{query}"
            self._poll(node.name, lambda url=url: _request(url), deadline)
        token = self.token_for(ADMIN) if self.authn else None

        def targets_joined() -> None:
            smap = json.loads(_request(f"{self.endpoint}/v1/daemon?what=smap", token=token))
            joined = len(smap.get("tmap") or {})
            if joined != self.n_targets:
                raise ValueError(f"{joined} of {self.n_targets} targets in the cluster map")

        self._poll("cluster map", targets_joined, deadline)

    # -- AuthN -------------------------------------------------------------------------------

    def _start_authn(self, paths: Paths, secret: str) -> None:
        home = self.root / "authn"
        (home / "log").mkdir(parents=True, exist_ok=True)
        (home / "authn.json").write_text(json.dumps(authn_config(home / "log", secret), indent=1))
        self._passwords = {name: secrets.token_urlsafe(12) for name in (ADMIN, READER, NO_ACCESS)}
        env = {"AIS_AUTHN_SU_NAME": ADMIN, "AIS_AUTHN_SU_PASS": self._passwords[ADMIN]}
        self._spawn("authn", [str(paths.authn), f"-config={home}"], home, env)
        deadline = time.monotonic() + self.startup_timeout
        admin = self._poll("authn", lambda: self.token_for(ADMIN), deadline)
        role = {
            "name": _READER_ROLE,
            "desc": "read and list objects in every bucket of any cluster",
            "clusters": [{"id": "", "perm": str(READ_ONLY_ACCESS)}],
            "buckets": [],
            "admin": False,
        }
        _request(f"{self.authn_url}/v1/roles", method="POST", body=role, token=admin)
        for user, roles in ((READER, [{"name": _READER_ROLE}]), (NO_ACCESS, [])):
            body = {"id": user, "pass": self._passwords[user], "roles": roles}
            _request(f"{self.authn_url}/v1/users", method="POST", body=body, token=admin)

    def token_for(self, user: str) -> str:
        """A fresh AuthN token of ``user``: ``admin``, ``reader`` or ``nobody``.

        Raises:
            KeyError: an unknown user, or a cluster without AuthN.
        """
        if self.authn_url is None:
            raise KeyError(f"no AuthN on this cluster (user {user!r})")
        body = {"password": self._passwords[user]}
        reply = _request(f"{self.authn_url}/v1/users/{user}", method="POST", body=body)
        return str(json.loads(reply)["token"])

    # -- diagnostics -------------------------------------------------------------------------

    def logs_tail(self, lines: int = 25) -> str:
        """The last ``lines`` of each process's output and AIStore log, for failure messages."""
        parts = []
        logs = [self.root / "relay.log"]
        for name in [n.name for n in self.nodes] + (["authn"] if self.authn else []):
            home = self.root / name
            logs += [home / "stdout.log", *sorted((home / "log").glob("*.INFO*"))]
            logs += sorted((home / "log").glob("*.ERROR*"))
        for log in logs:
            if log.is_file() and not log.is_symlink():
                text = log.read_text(errors="replace").rstrip().splitlines()[-lines:]
                if text:
                    parts.append(f"--- {log.relative_to(self.root)}\n" + "\n".join(text))
        return "\n".join(parts) or f"(no logs under {self.root})"

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of each running process (from ``/proc``), by name."""
        sizes = {}
        for name, process in self._processes.items():
            try:
                status = Path(f"/proc/{process.pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    sizes[name] = int(line.split()[1]) * 1024
        return sizes


def main(argv: list[str] | None = None) -> int:
    """``up [--authn] [--workdir DIR]`` or ``build``."""
    parser = argparse.ArgumentParser(prog="python -m tests.servers.aistore")
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start a cluster and run until Ctrl-C")
    up.add_argument("--authn", action="store_true", help="also run AuthN; tokens required")
    up.add_argument("--workdir", help="directory for configs, logs and data")
    commands.add_parser("build", help="find or build aisnode and authn, print where")
    args = parser.parse_args(argv)

    try:
        paths = ensure_binaries()
    except GoNotFound as exc:
        from tests.servers.conftest_plugin import REQUIRE_ENV
        from wds_cloud.settings import env_bool

        if args.command == "build" and not env_bool(REQUIRE_ENV, False):
            # the README's test command runs this first: without go, the real-cluster tests
            # are skipped (with this reason), as they are when pytest runs alone
            print(f"# no real AIStore: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 0
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BinariesUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    built = "cached" if paths.build_seconds is None else f"built in {paths.build_seconds:.0f}s"
    print(f"# binaries in {paths.directory} ({built})", flush=True)
    if args.command == "build":
        return 0

    stop = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    # both, explicitly: a shell starts background jobs with SIGINT ignored, and Python then
    # leaves it ignored
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    cluster = Cluster(authn=args.authn, workdir=args.workdir, binaries=paths)
    try:
        cluster.start()
    except (NamespaceUnavailable, ClusterStartError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        print(f"AIS_ENDPOINT={cluster.endpoint}")
        if cluster.authn_url is not None:
            print(f"AIS_AUTHN_URL={cluster.authn_url}")
            print(f"AIS_AUTHN_TOKEN={cluster.token_for(ADMIN)}")
        print(f"# started in {cluster.startup_seconds:.1f}s; files in {cluster.root}")
        rss = ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in cluster.rss_bytes().items())
        print(f"# resident memory: {rss}; Ctrl-C stops the cluster", flush=True)
        while not stop:
            time.sleep(0.5)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
