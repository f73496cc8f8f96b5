"""ETL registry of the AIStore emulator: name -> URL of a running hpush ETL server.

Three ways to make an ETL known:

* ``emulator.register_etl(name, url)`` — test hook: ``url`` is a server you started (for
  example a subprocess running an ``aistore.sdk.etl.webserver`` server); GETs with
  ``etl_name=name`` are pushed to it.
* ``emulator.register_etl_image(image, url)`` then the real SDK ``client.etl(name).init(image)``
  — ``PUT /v1/etl`` whose ``runtime.image`` is registered maps the ETL name to ``url``.
* ``@client.etl(name).init_class()`` — ``PUT /v1/etl`` carrying ``ETL_CLASS_PAYLOAD`` (base64
  cloudpickle of an ``ETLServer`` subclass): the emulator unpickles the class, instantiates it
  and serves it in-process on a thread (``127.0.0.1``, free port), as AIStore's Python runtime
  image would in a pod. Dependencies (``PACKAGES``) are not installed.

Only hpush (object bytes in the request body) is modelled; see ``docs/aistore.md``.
Offline transforms (``etl-bck``, ``etl-listrange``) run in :mod:`.xactions`; their per-object
errors are kept here per job id, as ``ext/etl/xact.go`` keeps them on the ETL xaction.
"""

from __future__ import annotations

import base64
import os
import pickle
import threading
import time
from dataclasses import dataclass, field
from typing import Any

#: ``etl.MaxObjErr``: per-object errors AIStore keeps per offline job (and target).
MAX_OBJ_ERRS = 128


class EtlError(Exception):
    """An ETL init request the emulator cannot honour; ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class EtlEntry:
    """One known ETL."""

    name: str
    url: str
    init_msg: dict[str, Any] = field(default_factory=dict)
    stage: str = "Running"
    job_id: str = ""
    obj_count: int = 0
    in_bytes: int = 0
    out_bytes: int = 0
    server: Any = None  # in-process server for init_class ETLs
    #: offline job id -> ``etl.ObjErr`` dicts (``obj_name``, ``msg``, ``ecode``).
    offline_errors: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_offline_error(self, xid: str, err: dict[str, Any]) -> None:
        """Record one object's failure in job ``xid``: duplicates dropped, at most 128 kept."""
        with self._lock:
            errs = self.offline_errors.setdefault(xid, [])
            if err not in errs and len(errs) < MAX_OBJ_ERRS:
                errs.append(err)


class EtlRegistry:
    """Thread-safe ETL table."""

    def __init__(self, target_url: str) -> None:
        self._lock = threading.Lock()
        self._etls: dict[str, EtlEntry] = {}
        self._images: dict[str, str] = {}
        self._target_url = target_url

    def register(self, name: str, url: str) -> None:
        """Map ``name`` to an ETL server at ``url`` (replacing an earlier mapping)."""
        with self._lock:
            init_msg = {"name": name, "communication": "hpush://"}
            self._etls[name] = EtlEntry(name, url.rstrip("/"), init_msg, job_id=_job_id())

    def register_image(self, image: str, url: str) -> None:
        """Serve ETLs initialised with ``runtime.image == image`` from ``url``."""
        with self._lock:
            self._images[image] = url.rstrip("/")

    def get(self, name: str) -> EtlEntry | None:
        """The running ETL called ``name``, or None."""
        with self._lock:
            entry = self._etls.get(name)
            return entry if entry is not None and entry.stage == "Running" else None

    def lookup(self, name: str) -> EtlEntry | None:
        """The ETL called ``name`` in any stage, or None."""
        with self._lock:
            return self._etls.get(name)

    def all(self) -> list[EtlEntry]:
        """Every known ETL, sorted by name."""
        with self._lock:
            return sorted(self._etls.values(), key=lambda e: e.name)

    def init(self, msg: dict[str, Any]) -> EtlEntry:
        """Handle a ``PUT /v1/etl`` body; returns the new entry.

        Raises:
            EtlError: duplicate name (409) or an image/payload the emulator cannot run (400).
        """
        name = str(msg.get("name", ""))
        runtime = msg.get("runtime") or {}
        env = {e.get("name"): e.get("value") for e in runtime.get("env") or []}
        with self._lock:
            if name in self._etls:
                raise EtlError(f"etl job {name} already exists", 409)
            url = self._images.get(str(runtime.get("image", "")))
        server = None
        if url is None:
            payload = env.get("ETL_CLASS_PAYLOAD")
            if not payload:
                raise EtlError(
                    f"etl job {name}: the emulator cannot run image {runtime.get('image')!r}; "
                    "register it with emulator.register_etl_image() or use init_class",
                    400,
                )
            server, url = self._serve_class(payload)
        entry = EtlEntry(name, url, dict(msg), job_id=_job_id(), server=server)
        with self._lock:
            self._etls[name] = entry
        return entry

    def _serve_class(self, payload: str) -> tuple[Any, str]:
        from aistore.sdk.etl.webserver.http_multi_threaded_server import ThreadedHTTPServer

        cls = pickle.loads(base64.b64decode(payload))
        # ETLServer.__init__ insists on AIS_TARGET_URL, as in a real pod.
        saved = os.environ.get("AIS_TARGET_URL")
        os.environ["AIS_TARGET_URL"] = self._target_url
        try:
            instance = cls()
        finally:
            if saved is None:
                os.environ.pop("AIS_TARGET_URL", None)
            else:
                os.environ["AIS_TARGET_URL"] = saved
        server = ThreadedHTTPServer(("127.0.0.1", 0), instance.RequestHandler, etl_server=instance)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, f"http://127.0.0.1:{server.server_address[1]}"

    def set_stage(self, name: str, stage: str) -> bool:
        """Set an ETL's stage (``Running``/``Aborted``); False when unknown."""
        with self._lock:
            entry = self._etls.get(name)
            if entry is None:
                return False
            entry.stage = stage
            return True

    def delete(self, name: str) -> bool:
        """Forget an ETL (stopping its in-process server); False when unknown."""
        with self._lock:
            entry = self._etls.pop(name, None)
        if entry is None:
            return False
        _shutdown(entry)
        return True

    def close(self) -> None:
        """Stop every in-process ETL server."""
        with self._lock:
            entries, self._etls = list(self._etls.values()), {}
        for entry in entries:
            _shutdown(entry)


def _shutdown(entry: EtlEntry) -> None:
    if entry.server is not None:
        entry.server.shutdown()
        entry.server.server_close()


def _job_id() -> str:
    return f"etl-{time.time_ns():x}"
