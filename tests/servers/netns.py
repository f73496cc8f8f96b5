"""A private network namespace for servers that cannot be told to listen on 127.0.0.1 only.

AIStore 5.0's ``aisnode`` listens on every interface for its public port whenever the
intra-cluster ports differ from it (``pubAddrAny`` in ``ais/htrun.go``), and 5.0 requires them
to differ unless a second local address exists; ``authn`` always listens on ``:port``. Run
inside a namespace of their own, "every interface" is that namespace's loopback alone.
:class:`PrivateNetwork` starts the namespace with a small relay as its first process: the relay
holds listening sockets made here on ``127.0.0.1`` (passed as inherited file descriptors) and
copies each accepted connection to a port on the namespace's loopback. Servers join the
namespace with ``nsenter`` (:meth:`PrivateNetwork.command`).

The other way round, :meth:`PrivateNetwork.reach` lets servers inside reach a server of the
host (an AIStore target its S3 backend): the relay also listens on a port of the namespace's
loopback and carries each connection over a Unix socket (a path in the filesystem, which both
namespaces share) to a thread of this process, which connects to the host's ``127.0.0.1``.

Needs ``unshare`` and ``nsenter`` (util-linux) and either root or unprivileged user
namespaces; :class:`NamespaceUnavailable` says which part failed.

Run as a script, this module is the relay: ``netns.py FD:PORT [FD:PORT ...]``.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

_READY = "relay ready"
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


class NamespaceUnavailable(RuntimeError):
    """A private network namespace cannot be made here (the message says why)."""


class PrivateNetwork:
    """A network namespace reachable only through relayed ports on the host's ``127.0.0.1``.

    Args:
        log_path: where the relay writes its stderr.

    Call :meth:`forward` for every port before :meth:`start`.
    """

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self._listeners: list[tuple[socket.socket, int]] = []
        self._reached: list[tuple[int, int]] = []  # (host port, port inside)
        self._bridges: list[socket.socket] = []
        self._process: subprocess.Popen[str] | None = None
        self._user_ns = os.geteuid() != 0

    def forward(self, inner_port: int | None = None) -> int:
        """Listen on a free port of the host's ``127.0.0.1``, relayed to ``inner_port``.

        Args:
            inner_port: the port inside the namespace; None uses the host port's number, so
                URLs a server hands out (AIStore's redirects) work on both sides.

        Returns:
            the host port.
        """
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        port = int(sock.getsockname()[1])
        self._listeners.append((sock, port if inner_port is None else inner_port))
        return port

    def reach(self, host_port: int, inner_port: int) -> None:
        """Make ``127.0.0.1:inner_port`` inside the namespace lead to ``127.0.0.1:host_port``
        of the host (call before :meth:`start`)."""
        self._reached.append((host_port, inner_port))

    def _bridge(self, host_port: int, inner_port: int) -> str:
        """Listen on a Unix socket next to the log for the relay's connections to
        ``inner_port``; each is carried to the host's ``127.0.0.1:host_port``. Returns the
        socket's path."""
        path = str(self.log_path.with_name(f"reach-{inner_port}.sock"))
        if len(path.encode()) > 100:  # sun_path holds 108 bytes
            raise NamespaceUnavailable(f"the Unix socket path {path!r} is too long")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(128)
        self._bridges.append(listener)
        connect = functools.partial(_connect_tcp, host_port)
        threading.Thread(target=_serve, args=(listener, connect), daemon=True).start()
        return path

    @property
    def pid(self) -> int:
        """PID of the relay (the namespace's first process)."""
        if self._process is None:
            raise RuntimeError("the private network is not started")
        return self._process.pid

    def command(self, args: list[str]) -> list[str]:
        """``args`` prefixed with the ``nsenter`` that runs them inside the namespace."""
        enter = ["nsenter", f"--target={self.pid}", "--net"]
        if self._user_ns:
            # the namespace's user namespace maps only this uid (as root); setgroups is denied
            # there, so keep our credentials rather than switch to its root
            enter += ["--user", "--preserve-credentials"]
        return [*enter, "--", *args]

    def start(self, timeout: float = 10.0) -> Self:
        """Make the namespace, bring its loopback up and start relaying; returns self.

        Raises:
            NamespaceUnavailable: ``unshare``/``nsenter`` missing, or the namespace could not
                be made (not root and no unprivileged user namespaces).
        """
        for tool in ("unshare", "nsenter"):
            if shutil.which(tool) is None:
                raise NamespaceUnavailable(f"`{tool}` (util-linux) is not on PATH")
        unshare = ["unshare", "--net"]
        if self._user_ns:
            unshare += ["--user", "--map-root-user"]
        fds = [sock.fileno() for sock, _ in self._listeners]
        spec = [f"{sock.fileno()}:{port}" for sock, port in self._listeners]
        spec += [f"{inner}={self._bridge(host, inner)}" for host, inner in self._reached]
        log = open(self.log_path, "ab")
        try:
            self._process = subprocess.Popen(
                [*unshare, "--", sys.executable, str(Path(__file__).resolve()), *spec],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                pass_fds=fds,
                text=True,
            )
        finally:
            log.close()
            for sock, _ in self._listeners:
                sock.close()
        assert self._process.stdout is not None
        line = _read_line(self._process.stdout, timeout)
        if line.strip() != _READY:
            self.stop()
            tail = self.log_path.read_text(errors="replace").strip().splitlines()[-3:]
            raise NamespaceUnavailable(
                "cannot make a private network namespace with `"
                + " ".join(unshare)
                + "`: "
                + (" | ".join(tail) or "no output")
            )
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM the relay, SIGKILL after ``timeout``."""
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, timeout)
            if process.stdout is not None:
                process.stdout.close()
        bridges, self._bridges = self._bridges, []
        for listener in bridges:
            path = listener.getsockname()
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes its accept loop, which ends
            listener.close()
            with contextlib.suppress(OSError):
                os.unlink(path)


def stop_process(process: subprocess.Popen[Any], timeout: float) -> None:
    """SIGTERM ``process`` by its PID, then SIGKILL when it is still there after ``timeout``."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _read_line(stream: Any, timeout: float) -> str:
    """The first line of ``stream`` ("" when none came within ``timeout``)."""
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return result[0] if result else ""


# -- the relay, inside the namespace ------------------------------------------------------------


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def _pump(src: socket.socket, dst: socket.socket) -> None:
    buf = bytearray(256 * 1024)
    try:
        while n := src.recv_into(buf):
            dst.sendall(memoryview(buf)[:n])
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _connect_tcp(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _connect_unix(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock


def _relay(client: socket.socket, connect: Callable[[], socket.socket]) -> None:
    try:
        upstream = connect()
    except OSError:
        client.close()  # nothing listens yet: the caller sees a closed connection and retries
        return
    upstream.settimeout(None)
    # each side's writes go out at once, as they would without the relay: with Nagle on, a
    # reply's body waits behind its unacknowledged headers for the peer's delayed ACK
    for sock in (client, upstream):
        if sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Relay every connection ``listener`` accepts to ``connect()``, until it is closed."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return  # shut down by PrivateNetwork.stop()
        threading.Thread(target=_relay, args=(client, connect), daemon=True).start()


def main(argv: list[str]) -> int:
    """Relay ``FD:PORT`` listeners (inherited) to ``127.0.0.1:PORT`` in this namespace, and
    ``PORT=PATH`` (:meth:`PrivateNetwork.reach`): listen on ``127.0.0.1:PORT`` here and relay
    to the Unix socket ``PATH``."""
    _loopback_up()
    selector = selectors.DefaultSelector()
    listeners: dict[int, tuple[socket.socket, Callable[[], socket.socket]]] = {}
    for item in argv:
        if "=" in item:
            port_text, path = item.split("=", 1)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", int(port_text)))
            sock.listen(128)
            listeners[sock.fileno()] = (sock, functools.partial(_connect_unix, path))
        else:
            fd, port = (int(part) for part in item.split(":"))
            listeners[fd] = (socket.socket(fileno=fd), functools.partial(_connect_tcp, port))
    for fd in listeners:
        selector.register(fd, selectors.EVENT_READ)
    print(_READY, flush=True)
    while True:
        for key, _ in selector.select():
            listener, connect = listeners[key.fd]
            try:
                client, _ = listener.accept()
            except OSError:
                time.sleep(0.01)
                continue
            threading.Thread(target=_relay, args=(client, connect), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
