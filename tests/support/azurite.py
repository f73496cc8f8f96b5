"""Azurite (Microsoft's Azure Storage emulator, the npm package ``azurite``) on 127.0.0.1.

Installed by the project's test command, ``python -m tests.support.azurite install``: ``npm
install`` of the pinned version into ``$XDG_CACHE_HOME/wds_cloud/azurite/<version>/``
(``~/.cache`` when unset; ``WDS_CLOUD_AZURITE_DIR`` overrides), once; later calls find it there.
:class:`AzuriteServer` starts ``azurite-blob`` on a free port with a fresh ``--location``, an
account of its own (``AZURITE_ACCOUNTS``: a random key per server, so a leaked key is
recognisable) and ``--skipApiVersionCheck`` (the SDK may be newer than the emulator), and stops
it by PID.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from tests.support.fake_gcs import free_port

VERSION = "3.37.0"
DIR_ENV = "WDS_CLOUD_AZURITE_DIR"
ACCOUNT = "wdsaccount"


def install_dir(version: str = VERSION) -> Path:
    """Where the pinned Azurite is (or goes)."""
    explicit = os.environ.get(DIR_ENV)
    if explicit:
        return Path(explicit)
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "wds_cloud" / "azurite" / version


def binary_path(version: str = VERSION) -> Path:
    """The ``azurite-blob`` launcher of the pinned version."""
    return install_dir(version) / "node_modules" / ".bin" / "azurite-blob"


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{directory.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def install(version: str = VERSION) -> Path:
    """``npm install azurite@version`` into :func:`install_dir` unless it is there already;
    returns the ``azurite-blob`` path.

    Raises:
        RuntimeError: no ``npm``, or the install failed (its output is in the message).
    """
    binary = binary_path(version)
    if binary.exists():
        return binary
    directory = install_dir(version)
    with _locked(directory):
        if binary.exists():  # another worker installed it meanwhile
            return binary
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("npm is needed to install Azurite (apt-get install npm)")
        directory.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(directory),
                "--no-audit",
                "--no-fund",
                f"azurite@{version}",
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0 or not binary.exists():
            raise RuntimeError(
                f"npm install azurite@{version} failed ({done.returncode}):\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            )
    return binary


class AzuriteServer:
    """One ``azurite-blob`` process with an account of its own.

    Args:
        location: the directory Azurite keeps its data and log in.
        port: port to listen on (a free one when None).

    Attributes:
        account: the account name; key: its (random) key; endpoint: the Blob endpoint,
            ``http://127.0.0.1:PORT/ACCOUNT``.
    """

    def __init__(self, location: Path, port: int | None = None) -> None:
        self.location = location
        self.port = port or free_port()
        self.account = ACCOUNT
        self.key = base64.b64encode(secrets.token_bytes(64)).decode()
        self.endpoint = f"http://127.0.0.1:{self.port}/{self.account}"
        self.log_path = location / "azurite.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def connection_string(self) -> str:
        """The connection string of this server's account (it holds the key)."""
        return (
            f"DefaultEndpointsProtocol=http;AccountName={self.account};"
            f"AccountKey={self.key};BlobEndpoint={self.endpoint};"
        )

    def environ(self) -> dict[str, str]:
        """The variables that point the ``az://`` opener at this server (connection string)."""
        return {"AZURE_STORAGE_CONNECTION_STRING": self.connection_string}

    def start(self, timeout: float = 60.0) -> AzuriteServer:
        """Start the server and wait until it answers."""
        binary = install()
        self.location.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(binary),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(self.port),
            "--location",
            str(self.location / "data"),
            "--skipApiVersionCheck",
            "--loose",
            "--silent",
        ]
        env = {**os.environ, "AZURITE_ACCOUNTS": f"{self.account}:{self.key}"}
        self._log = open(self.log_path, "ab")
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, env=env
        )
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self.stop()
                raise RuntimeError(f"azurite-blob exited with {code}; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}?comp=list", timeout=2):
                    return self
            except urllib.error.HTTPError:
                return self  # it answers (403 without credentials): it is up
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"azurite-blob did not answer in {timeout}s; see {self.log_path}"
                )
            time.sleep(0.1)

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        """Terminate the process (by PID) and close the log.

        Azurite closes its server on SIGTERM and waits for the clients' keep-alive connections
        to end; its data is thrown away, so it gets 2 seconds and then SIGKILL."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def service(self) -> Any:
        """An ``azure.storage.blob.BlobServiceClient`` for this server's account."""
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string)

    def container(self, name: str) -> Any:
        """The container client of ``name``, created when missing."""
        client = self.service().get_container_client(name)
        if not client.exists():
            client.create_container()
        return client

    def __enter__(self) -> AzuriteServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.support.azurite install``: install the pinned Azurite when missing."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["install"]:
        print("usage: python -m tests.support.azurite install", file=sys.stderr)
        return 2
    print(install())
    return 0


if __name__ == "__main__":
    sys.exit(main())
