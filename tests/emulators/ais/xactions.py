"""Offline ETL jobs (xactions) of the AIStore emulator and the job-status routes.

Requests served (shapes from NVIDIA/aistore ``ais/proxy.go``, ``api/apc/tcbtco.go``,
``core/xaction_wire.go``, ``nl/listener.go``, ``ais/prxetl.go``, ``xact/xs/coi.go``):

* ``POST /v1/buckets/<src>?bck_to=<provider>/<ns>/<dst>/`` with ``{"action": "etl-bck",
  "value": TCBMsg}`` (the SDK's ``Bucket.transform``): an ``etl-bck`` job over every object
  whose name starts with ``prefix``.
* ``POST /v1/buckets/<src>`` with ``{"action": "etl-listrange", "value": TCOMsg}`` (the SDK's
  ``bucket.objects(obj_names=...|obj_template=...).transform``): an ``etl-listrange`` job over
  the listed names (``objnames``) or a template (``template``), destination ``tobck``.
* ``GET /v1/cluster?what=status`` (``Job.status``): the IC status ``{"kind", "uuid", "err",
  "end_time", "aborted"}``; ``end_time`` is 0 while the job runs (or idles).
* ``GET /v1/cluster?what=qryxstats`` (``Job.get_details``): ``{"t[emu]": [Snap]}`` with the
  job's ``stats`` (``loc-objs``/``loc-bytes`` count transformed objects), ``is_idle``,
  ``aborted``, ``abort-err`` and ``err``.
* ``PUT /v1/cluster`` ``{"action": "stop", "value": {"ID": xid}}`` (``Job.abort``).

Each job runs on a thread: every selected object is pushed to the ETL server (hpush, as the
inline path does) and the reply is stored in the destination bucket under
``TCBMsg.ToName`` (``ext`` remap of the last extension, then ``prepend``). The destination
bucket is created when missing, as the proxy does. A failing object (ETL reply >= 400, ETL
unreachable, object gone) is recorded as an ``etl.ObjErr`` ``{"obj_name": "ais://src/name",
"msg", "ecode"}`` under the job id (at most 128, duplicates dropped, as ``cos.Errs`` does) and
served by ``GET /v1/etl/<name>?uuid=<xid>``; with ``coer`` the job goes on, without it the job
aborts at the first failure. ``dry_run`` visits and counts without calling the ETL or writing.

``etl-bck`` ends when done (``end-time`` set). ``etl-listrange`` is one of AIStore's idling
kinds: when its objects are done it reports ``is_idle`` and only ends after
``Xactions.idle_finish_s`` seconds of idleness (AIStore waits minutes), as a real target does.

Test hook: ``emulator.xactions.hold()`` makes new jobs wait before their first object until
``release()``, so a test can see a job running.
"""

from __future__ import annotations

import http.client
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

from tests.emulators.ais.etl import MAX_OBJ_ERRS, EtlEntry
from tests.emulators.ais.handler import AisHandler, HttpError
from tests.emulators.ais.store import AisStore, NoSuchObject, bucket_uri, normalize_provider

TARGET = "t[emu]"
GO_ZERO_TIME = "0001-01-01T00:00:00Z"
ETL_KINDS = ("etl-bck", "etl-listrange")


def _iso(ns: int) -> str:
    if not ns:
        return GO_ZERO_TIME
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Xaction:
    """One offline transform job and its live counters."""

    id: str
    kind: str
    src: tuple[str, str]  # (provider, name)
    dst: tuple[str, str]
    etl: EtlEntry
    names: list[str]
    msg: dict[str, Any]
    start_ns: int = field(default_factory=time.time_ns)
    end_ns: int = 0
    idle_since: float = 0.0
    aborted: bool = False
    abort_err: str = ""
    errs: list[str] = field(default_factory=list)
    objs: int = 0
    bytes: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def snap(self) -> dict[str, Any]:
        """``core.Snap`` as JSON (counters as strings, ``glob.id`` too)."""

        def bck(b: tuple[str, str]) -> dict[str, Any]:
            return {"name": b[1], "provider": b[0], "namespace": {"uuid": "", "name": ""}}

        return {
            "ext": None,
            "start-time": _iso(self.start_ns),
            "end-time": _iso(self.end_ns),
            "bck": {"name": "", "provider": "", "namespace": {"uuid": "", "name": ""}},
            "src-bck": bck(self.src),
            "dst-bck": bck(self.dst),
            "id": self.id,
            "kind": self.kind,
            "ctlmsg": (
                f"etl {bucket_uri(*self.src)}=>{bucket_uri(*self.dst)}; {TARGET}: job:[ "
                f"locally-processed:{self.objs} copy-err:{len(self.errs)}]"
            ),
            "abort-err": self.abort_err,
            "err": "; ".join(self.errs),
            "glob.id": "0",
            "stats": {
                "loc-objs": str(self.objs),
                "loc-bytes": str(self.bytes),
                "out-objs": "0",
                "out-bytes": "0",
                "in-objs": "0",
                "in-bytes": "0",
            },
            "aborted": self.aborted,
            # ``Base.IsIdle`` is "not running"; a demand job also idles once its work is done
            "is_idle": bool(self.idle_since or self.end_ns),
        }

    def status(self) -> dict[str, Any]:
        """``nl.Status``: what the IC notification listener reports."""
        return {
            "kind": self.kind,
            "uuid": self.id,
            "err": self.abort_err or "; ".join(self.errs),
            "end_time": self.end_ns,
            "aborted": self.aborted,
        }


class Xactions:
    """The emulator's offline ETL jobs, plus the ``hold``/``release`` test gate."""

    def __init__(self) -> None:
        self.by_id: dict[str, Xaction] = {}
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()
        #: seconds an idle ``etl-listrange`` job waits for more work before it ends.
        self.idle_finish_s = 0.5

    def hold(self) -> None:
        """New jobs wait before their first object until :meth:`release`."""
        self.gate.clear()

    def release(self) -> None:
        """Let held jobs go on."""
        self.gate.set()

    def get(self, xid: str) -> Xaction | None:
        with self.lock:
            return self.by_id.get(xid)


# ------------------------------------------------------------------------------- starting jobs


def _bck_to(text: str) -> tuple[str, str]:
    """``apc.QparamBckTo``: ``<provider>/@<uuid>#<ns>/<name>/`` (the SDK's ``get_path``)."""
    parts = [p for p in text.split("/") if p]
    if len(parts) != 3 or not parts[1].startswith("@"):
        raise HttpError(400, f"invalid bck_to {text!r} (expecting provider/@#namespace/name/)")
    return normalize_provider(parts[0]), parts[2]


def start_tcb(
    h: AisHandler, action: str, bucket: str, provider: str, query: dict[str, str], value: Any
) -> str:
    """Start an ``etl-bck`` or ``etl-listrange`` job; returns its id (the reply body)."""
    from tests.emulators.ais.dsort import SpecError, parse_template, template_names

    emu = h.emu
    msg = value if isinstance(value, dict) else {}
    etl_name = str(msg.get("id") or "")
    entry = emu.etls.get(etl_name) if etl_name else None
    if entry is None:
        raise HttpError(404, f"ETL {etl_name} doesn't exist")
    for name in msg.get("pipeline") or []:
        raise HttpError(501, f"ETL pipelines ({name!r}) are not supported by the emulator")
    if msg.get("synchronize") and msg.get("prepend"):
        raise HttpError(400, f"cannot synchronize with prepend {msg['prepend']!r}")
    src = (provider, bucket)
    if not emu.store.has_bucket(bucket, provider):
        raise HttpError(404, f'bucket "{bucket_uri(provider, bucket)}" does not exist')
    if action == "etl-bck":
        if "bck_to" not in query:
            raise HttpError(400, "missing bck_to query parameter")
        dst = _bck_to(query["bck_to"])
        prefix = str(msg.get("prefix") or "").rstrip("*")
        names = [o.name for o in emu.store.list_objects(bucket, prefix, provider)]
        if not msg.get("dry_run") and dst == src:
            raise HttpError(400, f"cannot {action} bucket {bucket_uri(*src)!r} onto itself")
    else:
        to = msg.get("tobck") or {}
        if not to.get("name"):
            raise HttpError(400, "missing destination bucket (tobck)")
        dst = (normalize_provider(to.get("provider")), str(to["name"]))
        if msg.get("objnames") is not None:
            names = [str(n) for n in msg["objnames"]]
        else:
            try:
                prefix, ranges = parse_template(str(msg.get("template") or ""))
            except SpecError as exc:
                raise HttpError(400, str(exc)) from None
            if ranges:
                names = list(template_names(prefix, ranges))
            else:
                names = [o.name for o in emu.store.list_objects(bucket, prefix, provider)]
    emu.store.create_bucket(dst[1], dst[0], exist_ok=True)
    job = Xaction(
        id=uuid.uuid4().hex[:9],
        kind=action,
        src=src,
        dst=dst,
        etl=entry,
        names=names,
        msg=msg,
    )
    registry: Xactions = emu.xactions
    with registry.lock:
        registry.by_id[job.id] = job
    threading.Thread(target=_run, args=(emu.store, registry, job), daemon=True).start()
    return job.id


# --------------------------------------------------------------------------------- running jobs


def to_name(name: str, msg: dict[str, Any]) -> str:
    """``apc.TCBMsg.ToName``: remap the last extension by ``ext``, then ``prepend``."""
    ext = msg.get("ext") or {}
    if ext:
        dot = name.rfind(".")
        if dot >= 0 and name[dot + 1 :] in ext:
            name = name[: dot + 1] + str(ext[name[dot + 1 :]]).lstrip(".")
    return str(msg.get("prepend") or "") + name


def _push(entry: EtlEntry, bucket: str, name: str, data: bytes) -> bytes:
    """hpush one object to the ETL server; raises ``HttpError`` with the ETL's status."""
    target = urlsplit(entry.url)
    path = f"{target.path.rstrip('/')}/{bucket}/{quote(name)}"
    conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
    try:
        conn.request("PUT", path, body=data, headers={"Content-Length": str(len(data))})
        resp = conn.getresponse()
        body = resp.read()
    except OSError as exc:
        raise HttpError(500, f"ETL {entry.name} at {entry.url} failed: {exc}") from None
    finally:
        conn.close()
    if resp.status >= 400:
        detail = body.decode(errors="replace").strip()
        raise HttpError(resp.status, f"ETL error: {entry.name}: {resp.status}: {detail}")
    return body


def _run(store: AisStore, registry: Xactions, job: Xaction) -> None:
    try:
        while not registry.gate.wait(0.01):
            if job.stop.is_set():
                raise _Stopped
        for name in job.names:
            if job.stop.is_set():
                raise _Stopped
            _one(store, job, name)
    except _Stopped:
        job.aborted = True
        job.abort_err = job.abort_err or "aborted"
    except _Abort as exc:
        job.aborted = True
        job.abort_err = str(exc)
    if job.kind == "etl-listrange" and not job.aborted:
        job.idle_since = time.monotonic()
        while time.monotonic() - job.idle_since < registry.idle_finish_s:
            if job.stop.wait(0.01):
                job.aborted, job.abort_err = True, "aborted"
                break
    job.end_ns = time.time_ns()


class _Stopped(Exception):
    pass


class _Abort(Exception):
    pass


def _one(store: AisStore, job: Xaction, name: str) -> None:
    src_provider, src_bucket = job.src
    cname = bucket_uri(src_provider, src_bucket, name)
    try:
        data = store.get_object(src_bucket, name, src_provider).data
        if job.msg.get("dry_run"):
            job.objs += 1
            job.bytes += len(data)
            return
        out = _push(job.etl, src_bucket, name, data)
        store.put_object(job.dst[1], to_name(name, job.msg), out, job.dst[0])
    except NoSuchObject:
        _fail(job, cname, "object not found", 404)
        return
    except HttpError as err:
        _fail(job, cname, err.message, err.status)
        return
    job.etl.obj_count += 1
    job.etl.in_bytes += len(data)
    job.etl.out_bytes += len(out)
    job.objs += 1
    job.bytes += len(out)


def _fail(job: Xaction, cname: str, message: str, code: int) -> None:
    job.etl.add_offline_error(job.id, {"obj_name": cname, "msg": message, "ecode": code})
    text = f"{cname}: {message}"
    if text not in job.errs and len(job.errs) < MAX_OBJ_ERRS:
        job.errs.append(text)
    if not job.msg.get("coer"):
        raise _Abort(text)


# ---------------------------------------------------------------------------- /v1/cluster routes


def _lower(body: dict[str, Any]) -> dict[str, Any]:
    return {str(k).lower(): v for k, v in body.items()}  # jsoniter: case-insensitive keys


def handle_cluster(h: AisHandler, method: str, query: dict[str, str], body: dict[str, Any]) -> None:
    """``GET /v1/cluster?what=status|qryxstats`` and ``PUT /v1/cluster`` (stop) for ETL jobs."""
    registry: Xactions = h.emu.xactions
    if method == "GET":
        what = query.get("what", "")
        args = _lower(body)
        xid, kind = str(args.get("id") or ""), str(args.get("kind") or "")
        if what not in ("status", "qryxstats"):
            raise HttpError(400, f"the emulator does not serve what={what!r}")
        if not xid and not kind:
            raise HttpError(400, "invalid query: neither id nor kind")
        with registry.lock:
            jobs = [
                j
                for j in registry.by_id.values()
                if (not xid or j.id == xid) and (not kind or j.kind == kind)
            ]
        if not jobs:
            raise HttpError(404, f"p[emu]: nl [IC, xid={xid} kind={kind}] does not exist")
        if what == "status":
            job = max(jobs, key=lambda j: j.start_ns)
            if kind and job.kind != kind:
                raise HttpError(400, f"kind mismatch: {xid}, expected kind={kind}")
            h.send_json(200, job.status())
        else:
            h.send_json(200, {TARGET: [j.snap() for j in jobs]})
        return
    if method == "PUT":
        action = str(body.get("action") or "")
        value = _lower(body.get("value") or {})
        if action != "stop":
            raise HttpError(501, f"cluster action {action!r} is not supported by the emulator")
        job = registry.get(str(value.get("id") or ""))
        if job is None:
            raise HttpError(404, f"p[emu]: job {value.get('id')!r} does not exist")
        job.stop.set()
        h.send_bytes(200)
        return
    raise HttpError(405, f"{method} /v1/cluster is not supported by the emulator")


def obj_errors(entry: EtlEntry, xid: str) -> list[dict[str, Any]]:
    """The ``etl.ObjErr`` list of job ``xid`` (``[]`` for inline, as the emulator keeps none)."""
    return list(entry.offline_errors.get(xid, [])) if xid else []
