"""The AIStore emulator: a real HTTP server the real ``aistore`` SDK talks to.

Usage::

    with AisEmulator() as emu:
        client = Client(emu.url)          # plain HTTP on 127.0.0.1:<free port>
        emu.store.create_bucket("b")      # or client.bucket("b").create()
        emu.register_etl("upper-etl", "http://127.0.0.1:9999")
        emu.cut_after(1000)               # the next object GET breaks after 1000 body bytes

Routes (under ``/v1``, as in AIStore's HTTP API, docs/http_api.md in NVIDIA/aistore; see
:mod:`.handler`): buckets B1-B4 and
list-objects L1 (msgpack, paging, ARCH_DIR), objects O1-O7 (Range, archpath, archregx +
archmode, inline ETL, multipart upload), ETL E1/E2, offline ETL (bucket POST ``etl-bck`` /
``etl-listrange``, ``/v1/cluster`` job status and stop, in :mod:`.xactions`), and
``/v1/sort*`` delegated to
``tests/emulators/ais/dsort.py`` (``handle(store, method, path, query, body)``; 501 when that
module is missing).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from types import TracebackType

from tests.emulators.ais.etl import EtlRegistry
from tests.emulators.ais.store import AisStore
from tests.emulators.ais.xactions import Xactions


@dataclass
class _Cut:
    after: int
    times: int
    match: str | None


class AisEmulator:
    """An AIStore proxy+target emulator on ``127.0.0.1``.

    Args:
        store: the object store to serve (a fresh one when None).
        host: interface to bind; keep the default.
        port: 0 picks a free port.
    """

    def __init__(
        self, store: AisStore | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        from tests.emulators.ais.handler import AisHandler

        self.store = store if store is not None else AisStore()
        self._server = ThreadingHTTPServer((host, port), AisHandler)
        self._server.daemon_threads = True
        self._server.emulator = self  # type: ignore[attr-defined]
        self.host, self.port = self._server.server_address[:2]
        self.url = f"http://{self.host}:{self.port}"
        self.etls = EtlRegistry(self.url + "/v1/objects")
        #: offline ETL jobs (``etl-bck``, ``etl-listrange``); ``.hold()``/``.release()``.
        self.xactions = Xactions()
        self._cuts: list[_Cut] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        #: (method, path, query, Range header or None) of every request, for tests.
        self.requests: list[tuple[str, str, dict[str, str], str | None]] = []
        #: the ``Authorization`` header of every request (None when absent), in request order.
        self.authorizations: list[str | None] = []
        #: set it to play a cluster with AuthN on: requests without ``Authorization: Bearer
        #: <token>`` are refused with 401, as AIStore does.
        self.required_token: str | None = None

    # lifecycle -------------------------------------------------------------------------------
    def start(self) -> AisEmulator:
        """Serve on a daemon thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, args=(0.05,), daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and any in-process ETL servers."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()
        self.etls.close()

    def reset(self) -> None:
        """Forget what earlier tests arranged: a fresh store (and so no dSort jobs), no ETLs,
        offline ETL jobs (held ones are released), pending faults, request log or token."""
        self.etls.close()
        self.xactions.release()
        with self._lock:
            self.store = AisStore()
            self.etls = EtlRegistry(self.url + "/v1/objects")
            self.xactions = Xactions()
            self._cuts.clear()
            self.requests = []
            self.authorizations = []
            self.required_token = None

    def __enter__(self) -> AisEmulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # test hooks ------------------------------------------------------------------------------
    def register_etl(self, name: str, url: str) -> None:
        """Route GETs with ``etl_name=name`` to the hpush ETL server at ``url``."""
        self.etls.register(name, url)

    def register_etl_image(self, image: str, url: str) -> None:
        """Make ``client.etl(name).init(image=image)`` serve that ETL from ``url``."""
        self.etls.register_image(image, url)

    def cut_after(self, nbytes: int, *, times: int = 1, match: str | None = None) -> None:
        """Break the next ``times`` object GET responses after ``nbytes`` body bytes.

        The status line and headers (including the full ``Content-Length``) go out as usual,
        then the connection is closed, as a dropped network link would. ``match`` limits the
        fault to request paths containing that substring (e.g. an object name).
        """
        with self._lock:
            self._cuts.append(_Cut(nbytes, times, match))

    def take_cut(self, path: str) -> int | None:
        """Used by the handler: the byte count to cut this response after, or None."""
        with self._lock:
            for cut in self._cuts:
                if cut.match is None or cut.match in path:
                    cut.times -= 1
                    if cut.times <= 0:
                        self._cuts.remove(cut)
                    return cut.after
        return None

    def pending_cuts(self) -> int:
        """How many cut faults have not fired yet."""
        with self._lock:
            return sum(c.times for c in self._cuts)

    def record(
        self,
        method: str,
        path: str,
        query: dict[str, str],
        rng: str | None,
        authorization: str | None = None,
    ) -> None:
        """Used by the handler to log a request."""
        with self._lock:
            self.requests.append((method, path, dict(query), rng))
            self.authorizations.append(authorization)
