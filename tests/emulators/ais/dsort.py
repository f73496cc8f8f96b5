"""dSort for the AIStore emulator: ``POST /v1/sort``, ``GET /v1/sort?uuid=``, ``DELETE /v1/sort/abort``.

The emulator's HTTP handler calls :func:`handle` for every ``/v1/sort*`` request. The spec is
parsed with the server's own rules and error texts (``ext/dsort/request_spec.go``,
``cmn/cos/template.go``; deliberately independent of ``wds_cloud.aistore.dsort``), then the job runs on a
thread: extract records from each input shard (key = member path up to the first dot of its
basename), sort them (alphanumeric, md5, content, shuffle, none), pack them into shards that
close once they reach ``output_shard_size`` (the last may be smaller), and write them with the
original tar headers. Status replies have the real ``JobInfo`` shape (one target, ``t[emu]``).

Not emulated: several targets, Go's PCG shuffle order (Python's ``random`` is used, seeded),
EKM files, ``.zip``/``.tar.lz4`` shards, compression-ratio estimates.

Test hook: ``jobs(store).hold()`` makes new jobs stop before shard creation until
``jobs(store).release()``, so abort can be tested without racing the job.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import random
import re
import tarfile
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.emulators.ais.store import AisStore, NoSuchObject, bucket_uri, normalize_provider

NODE, TARGET = "p[emu]", "emut"
NO_DSORTER_TYPE = (
    'stats.NodeStatus.Status: ReadString: expects " or n, but found 4, error found in #10 '
    'byte of ...|"status":400}\n|...'
)
EXTS = (".tar.gz", ".tar.lz4", ".tgz", ".tar", ".zip")
ZERO_TIME = "0001-01-01T00:00:00Z"
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_STR_KEYS = (
    "output_format",
    "output_shard_size",
    "input_extension",
    "output_extension",
    "description",
    "ekm_file",
    "ekm_file_sep",
    "max_mem_usage",
    "dsorter_type",
)
_INT_KEYS = ("extract_concurrency_max_limit", "create_concurrency_max_limit")


class SpecError(Exception):
    """A 4xx reply: status and the server's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _q(value: object) -> str:
    """Go's ``%q``: a double-quoted string."""
    return json.dumps(str(value))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ------------------------------------------------------------------- templates, sizes (Go rules)


def _tpl_err(kind: str, tpl: str, why: str) -> SpecError:
    return SpecError(400, f"invalid '{kind}' template {_q(tpl)}: {why}")


def parse_template(tpl: str) -> tuple[str, list[tuple[int, int, int, int, str]]]:
    """``(prefix, [(start, end, step, width, gap)])`` as ``cos.NewParsedTemplate``; [] = prefix."""
    if "{" in tpl and "}" in tpl:
        bad = SpecError(
            400,
            f"invalid 'bash' template {_q(tpl)} (expecting e.g. 'prefix-{{0001..0010..1}}-suffix')",
        )
        if tpl.rindex("}") < tpl.index("{"):
            raise bad
        prefix, rest, ranges = tpl[: tpl.index("{")], tpl, []
        while "{" in rest:
            left, right = rest.index("{"), rest.find("}")
            if right < left:
                raise bad
            nums = rest[left + 1 : right].split("..")
            if len(nums) not in (2, 3) or not all(re.fullmatch(r"[+-]?\d+", n) for n in nums):
                raise (
                    bad
                    if len(nums) not in (2, 3)
                    else SpecError(400, f'strconv.ParseInt: parsing "{nums[0]}": invalid syntax')
                )
            start, end = int(nums[0]), int(nums[1])
            step = int(nums[2]) if len(nums) == 3 else 1
            _bounds("bash", tpl, start, end, step)
            rest = rest[right + 1 :]
            gap = rest[: rest.index("{")] if "{" in rest else rest
            ranges.append((start, end, step, min(len(nums[0]), len(nums[1])), gap))
        return prefix, ranges
    if "@" in tpl:
        parts = tpl.split("@")
        ranges = []
        for part in parts[1:]:
            digits = re.match(r"\d*", part).group()  # type: ignore[union-attr]
            if not digits:
                raise SpecError(400, 'strconv.ParseInt: parsing "": invalid syntax')
            ranges.append((0, int(digits), 1, len(digits), part[len(digits) :]))
        return parts[0], ranges
    if "%" in tpl and tpl.count("%") == 1:
        m = re.fullmatch(r"(.*)%(0\d+)?d(.*)", tpl)
        if m is None:
            raise SpecError(
                400, f"invalid 'fmt' template {_q(tpl)} (expecting e.g. 'prefix-%06d-suffix)"
            )
        width = int(m.group(2)[1:]) if m.group(2) else 0
        return m.group(1), [(0, 2**63 - 2, 1, width, m.group(3))]
    return tpl, []


def _bounds(kind: str, tpl: str, start: int, end: int, step: int) -> None:
    if start > end:
        raise _tpl_err(kind, tpl, "'start' cannot be greater than 'end'")
    if start < 0:
        raise _tpl_err(kind, tpl, "'start' is negative")
    if step <= 0:
        raise _tpl_err(kind, tpl, "'step' is non-positive")


def template_names(prefix: str, ranges: list[tuple[int, int, int, int, str]]) -> Any:
    """Yields names in server order (last range fastest)."""
    at = [r[0] for r in ranges]
    while True:
        yield prefix + "".join(f"{v:0{r[3]}d}{r[4]}" for v, r in zip(at, ranges, strict=True))
        i = len(at) - 1
        at[i] += ranges[i][2]
        while at[i] > ranges[i][1]:
            if i == 0:
                return
            at[i], i = ranges[i][0], i - 1
            at[i] += ranges[i][2]


def parse_size(text: str) -> int:
    """``cos.ParseSize(s, "iec")``: every K/M/G/T is binary."""
    s = text.strip().upper()
    if not s:
        return 0
    m = re.fullmatch(r"(-?(?:\d+\.?\d*|\.\d+))\s*(?:([KMGT])(?:IB|I|B)?|B)?", s)
    if m is None:
        raise SpecError(
            400,
            '[dsort] parse-spec: "output_shard_size" strconv.ParseFloat: '
            f'parsing "{text}": invalid syntax',
        )
    value = float(m.group(1))
    if value < 0:
        raise SpecError(400, f"output shard size must be >= 0 (got {int(value)})")
    return int(value * _UNITS.get(m.group(2) or "", 1))


def _mime(ext: str, key: str) -> str:
    norm = ext if ext.startswith(".") else "." + ext
    if norm not in EXTS:
        raise SpecError(400, f'[dsort] parse-spec: "{key}" unknown mime type "{ext}"')
    return norm


def _suffix(name: str) -> str | None:
    return next((e for e in EXTS if name.endswith(e)), None)


# ---------------------------------------------------------------------------------- spec parse


def parse_spec(body: bytes) -> dict[str, Any]:
    """Decodes and checks a spec like the proxy (``RequestSpec.parse``); raises :class:`SpecError`."""
    try:
        raw = json.loads(body or b"null")
    except ValueError as exc:
        raise SpecError(400, f"{NODE}: failed to unmarshal dsort request: {exc}") from None
    if not isinstance(raw, dict):
        raise SpecError(400, f"{NODE}: failed to unmarshal dsort request: not an object")
    rs = {k.lower(): v for k, v in raw.items()}  # jsoniter matches keys case-insensitively
    for key, kinds in [(k, str) for k in _STR_KEYS] + [(k, int) for k in _INT_KEYS]:
        if key in rs and (not isinstance(rs[key], kinds) or isinstance(rs[key], bool)):
            raise SpecError(
                400,
                f"{NODE}: failed to unmarshal dsort request: dsort.RequestSpec."
                f"{key}: expects {kinds.__name__}, got {rs[key]!r}",
            )
    alg = dict(rs.get("algorithm") or {})
    for key in ("kind", "seed", "extension", "content_key_type"):
        if not isinstance(alg.get(key, ""), str):
            raise SpecError(
                400,
                f"{NODE}: failed to unmarshal dsort request: dsort.Algorithm."
                f'{key}: ReadString: expects " or n, but found '
                f"{json.dumps(alg[key])[:1]}",
            )
    in_bck = rs.get("input_bck") or {}
    if not in_bck.get("name"):
        raise SpecError(400, '[dsort] parse-spec: "input_bck" missing source bucket')
    in_bck = {"name": in_bck["name"], "provider": normalize_provider(in_bck.get("provider"))}
    out_bck = rs.get("output_bck") or {}
    out_bck = (
        {"name": out_bck["name"], "provider": normalize_provider(out_bck.get("provider"))}
        if out_bck.get("name")
        else dict(in_bck)
    )
    fmt = rs.get("input_format") or {}
    names: list[str] = list(fmt.get("objnames") or [])
    in_ext = rs.get("input_extension", "")
    if not names:
        try:
            prefix, ranges = parse_template(fmt.get("template", "") or "")
        except SpecError as exc:
            raise SpecError(400, f'[dsort] parse-spec: "input_format" {exc}') from None
        if not ranges:  # prefix-only or empty: the server's "match all" branch extracts nothing
            names = []
        else:
            names = list(template_names(prefix, ranges))[:10_000_000]
        tpl_ext = _suffix(fmt.get("template", "") or "")
        if tpl_ext:
            if in_ext and in_ext != tpl_ext:
                raise SpecError(400, f"input_extension: {_q(in_ext)} vs {_q(tpl_ext)}")
            in_ext = tpl_ext
    in_ext = _mime(in_ext, "input_extension") if in_ext else ""
    size = parse_size(rs.get("output_shard_size", ""))
    algo = _parse_algorithm(alg)
    out_fmt = rs.get("output_format", "").strip()
    out_prefix, out_ranges = parse_template(out_fmt)
    if not out_ranges:
        raise SpecError(
            400,
            f"invalid output template {_q(rs.get('output_format', ''))}: no ranges "
            "(prefix-only output is not supported)",
        )
    count = math.prod((r[1] - r[0]) // r[2] + 1 for r in out_ranges)
    if count > 2**31 - 1 and size == 0:
        raise SpecError(400, "output shard size must be set (cannot be 0 and cannot be omitted)")
    out_ext = rs.get("output_extension", "")
    if _suffix(out_fmt):
        if out_ext and out_ext != _suffix(out_fmt):
            raise SpecError(400, f"output_extension: {_q(out_ext)} vs {_q(_suffix(out_fmt))}")
        out_ext = _suffix(out_fmt)
    out_ext = _mime(out_ext, "output_extension") if out_ext else in_ext
    for key in _INT_KEYS:
        if rs.get(key, 0) < 0:
            raise SpecError(400, f"negative concurrency limit ('{key.split('_')[0]}', {rs[key]})")
    config = {k.lower(): v for k, v in (rs.get("config") or {}).items()}
    return {
        "input_bck": in_bck,
        "output_bck": out_bck,
        "names": names,
        "input_extension": in_ext,
        "output_extension": out_ext,
        "output_shard_size": size,
        "algorithm": algo,
        "out_prefix": out_prefix,
        "out_ranges": out_ranges,
        "out_count": count,
        "dry_run": bool(rs.get("dry_run", False)),
        "description": rs.get("description", ""),
        "missing_shards": config.get("missing_shards") or "ignore",
        "dsorter_type": rs.get("dsorter_type", ""),
    }


def _parse_algorithm(alg: dict[str, Any]) -> dict[str, Any]:
    kinds = ["", "alphanumeric", "md5", "shuffle", "content", "none"]
    kind = alg.get("kind", "")
    if kind not in kinds:
        raise SpecError(
            400,
            f'[dsort] parse-spec: "algorithm" invalid sorting algorithm '
            f"(expecting one of: [{' '.join(kinds)}])",
        )
    seed = alg.get("seed", "")
    if seed and (not re.fullmatch(r"[+-]?\d+", seed) or int(seed) < 0):
        raise SpecError(
            400,
            f'[dsort] parse-spec: "algorithm" invalid seed {_q(seed)} (expecting integer value)',
        )
    ext = (alg.get("extension") or "").strip()
    key_type = alg.get("content_key_type", "")
    if kind == "content":
        if not ext.startswith("."):
            raise SpecError(
                400, f'[dsort] parse-spec: "algorithm" algorithm: invalid extension "{ext}"'
            )
        if key_type not in ("int", "float", "string"):
            raise SpecError(
                400,
                f'[dsort] parse-spec: "algorithm" invalid content key type '
                f'"{key_type}" (expecting one of: [int string float])',
            )
    return {
        "kind": kind or "alphanumeric",
        "decreasing": bool(alg.get("decreasing")),
        "seed": int(seed) if seed else time.time_ns(),
        "extension": ext,
        "content_key_type": key_type,
    }


# ----------------------------------------------------------------------------------------- jobs


_EXTRACT_COUNTERS = (
    "total_count",
    "extracted_count",
    "extracted_size",
    "extracted_record_count",
    "extracted_to_disk_count",
    "extracted_to_disk_size",
)
_CREATE_COUNTERS = ("to_create", "created_count", "moved_shard_count")


def _phase(*counters: str) -> dict[str, Any]:
    """A phase's metrics; every counter present from the start (the SDK requires them)."""
    phase: dict[str, Any] = {
        "started_time": ZERO_TIME,
        "end_time": ZERO_TIME,
        "elapsed": 0,
        "running": False,
        "finished": False,
    }
    return phase | dict.fromkeys(counters, "0")


@dataclass
class Job:
    """One dSort job and its live metrics."""

    id: str
    spec: dict[str, Any]
    started: str = field(default_factory=_now)
    finished_at: str = ZERO_TIME
    aborted: bool = False
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    extraction: dict[str, Any] = field(default_factory=lambda: _phase(*_EXTRACT_COUNTERS))
    sorting: dict[str, Any] = field(default_factory=_phase)
    creation: dict[str, Any] = field(default_factory=lambda: _phase(*_CREATE_COUNTERS))
    abort_event: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    def info(self) -> dict[str, Any]:
        """The ``JobInfo`` JSON for this (single) target; counters are strings as in Go."""
        archived = self.done.is_set()
        metrics = {
            "local_extraction": self.extraction,
            "meta_sorting": self.sorting,
            "shard_creation": self.creation,
            "description": self.spec["description"],
            "warnings": self.warnings or None,
            "errors": self.errors or None,
            "aborted": self.aborted,
            "archived": archived,
        }
        return {
            "id": self.id,
            "src-bck": self.spec["input_bck"],
            "dst-bck": self.spec["output_bck"],
            "started_time": self.started,
            "finish_time": self.finished_at,
            "started_meta_sorting": 0,
            "started_shard_creation": 0,
            "finished_shard_creation": 0,
            "loc-objs": "0",
            "loc-bytes": "0",
            "Metrics": metrics,
            "aborted": self.aborted,
            "archived": archived,
        }


class Jobs:
    """The dSort jobs of one store, plus the ``hold``/``release`` test gate."""

    def __init__(self) -> None:
        self.by_id: dict[str, Job] = {}
        self.gate = threading.Event()
        self.gate.set()

    def hold(self) -> None:
        """New and running jobs stop before shard creation until :meth:`release`."""
        self.gate.clear()

    def release(self) -> None:
        """Let held jobs continue."""
        self.gate.set()


_JOBS: weakref.WeakKeyDictionary[AisStore, Jobs] = weakref.WeakKeyDictionary()
_JOBS_LOCK = threading.Lock()


def jobs(store: AisStore) -> Jobs:
    """The job registry of ``store`` (created on first use)."""
    with _JOBS_LOCK:
        return _JOBS.setdefault(store, Jobs())


def _reply(
    status: int, message: str, method: str, path: str, *, tcode: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    body = {
        **({"tcode": tcode} if tcode else {}),
        "message": message,
        "method": method,
        "url_path": path,
        "remote_addr": "",
        "caller": "",
        "node": NODE,
        "status": status,
    }
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def handle(
    store: AisStore, method: str, path: str, query: dict[str, str], body: bytes
) -> tuple[int, dict[str, str], bytes]:
    """Serves one ``/v1/sort*`` request; returns ``(status, headers, body)``."""
    route = path.strip("/").removeprefix("v1/").strip("/")
    registry = jobs(store)
    job = registry.by_id.get(query.get("uuid", ""))
    if method == "POST" and route == "sort":
        try:
            spec = parse_spec(body)
        except SpecError as exc:
            return _reply(exc.status, str(exc), method, path)
        src, dst = spec["input_bck"], spec["output_bck"]
        if not store.has_bucket(src["name"], src["provider"]):
            msg = f'bucket "{bucket_uri(src["provider"], src["name"])}" does not exist'
            return _reply(404, msg, method, path, tcode="ErrBckNotFound")
        store.create_bucket(dst["name"], dst["provider"], exist_ok=True)
        if not spec["dsorter_type"]:
            # AIStore 5.0 (v1.5.0): with no dsorter_type the proxy asks every target for its
            # memory over intra-control without the sender headers targets require, and
            # fails to parse their 400 reply (ext/dsort/handler.go dsorterType); the output
            # bucket is created before that
            return _reply(400, NO_DSORTER_TYPE, method, path)
        job = Job(id="srt-" + uuid.uuid4().hex[:10], spec=spec)
        registry.by_id[job.id] = job
        threading.Thread(target=_run, args=(store, job, registry.gate), daemon=True).start()
        return 200, {"Content-Type": "text/plain"}, job.id.encode()
    if method == "GET" and route == "sort":
        if "uuid" not in query:
            infos = [j.info() for j in registry.by_id.values()]
            return 200, {"Content-Type": "application/json"}, json.dumps(infos).encode()
        if job is None:
            # AIStore 5.0's proxy formats a nil error into this message ("%!s(<nil>)")
            return _reply(404, f"%!s(<nil>): [dsort] {query['uuid']} does not exist", method, path)
        return 200, {"Content-Type": "application/json"}, json.dumps({TARGET: job.info()}).encode()
    if method == "DELETE" and route == "sort/abort":
        if job is None:
            msg = f"dsort job {query.get('uuid', '')} does not exist"
            return _reply(404, msg, method, path, tcode="ErrNotFound")
        if not job.done.is_set():
            job.abort_event.set()
        return 200, {}, b""
    return _reply(405 if route == "sort" else 400, f"invalid route /{route}", method, path)


# ------------------------------------------------------------------------------------ execution


class _Aborted(Exception):
    pass


def _start(phase: dict[str, Any]) -> float:
    phase.update(started_time=_now(), running=True)
    return time.monotonic()


def _finish(phase: dict[str, Any], t0: float) -> None:
    phase.update(end_time=_now(), running=False, finished=True)
    phase["elapsed"] = int((time.monotonic() - t0) * 1e9)


def _run(store: AisStore, job: Job, gate: threading.Event) -> None:
    try:
        spec = job.spec
        records = _extract(store, job)
        t0 = _start(job.sorting)
        records = _sort(records, spec["algorithm"])
        _finish(job.sorting, t0)
        shards = _pack(records, spec)
        t0 = _start(job.creation)
        job.creation["to_create"] = str(len(shards))
        while not gate.wait(0.01):
            _check(job)
        for name, recs in shards:
            _check(job)
            if not spec["dry_run"]:
                data = _write(recs, spec["output_extension"] or _suffix(name) or ".tar")
                store.put_object(
                    spec["output_bck"]["name"], name, data, spec["output_bck"]["provider"]
                )
            job.creation["created_count"] = str(int(job.creation["created_count"]) + 1)
        _finish(job.creation, t0)
        job.finished_at = _now()
    except _Aborted:
        job.aborted = True
    except Exception as exc:  # the job's error goes into its metrics, as on a real target
        job.errors.append(str(exc))
        job.aborted = True
    finally:
        for phase in (job.extraction, job.sorting, job.creation):
            phase["running"] = False
        job.done.set()


def _check(job: Job) -> None:
    if job.abort_event.is_set():
        raise _Aborted


def _extract(store: AisStore, job: Job) -> list[tuple[str, list[tuple[tarfile.TarInfo, bytes]]]]:
    spec = job.spec
    bck, ext = spec["input_bck"], spec["input_extension"]
    job.extraction["total_count"] = str(len(spec["names"]))
    t0 = _start(job.extraction)
    records: list[tuple[str, list[tuple[tarfile.TarInfo, bytes]]]] = []
    for name in spec["names"]:
        _check(job)
        if ext and not _suffix(name):
            name += ext
        elif ext and _suffix(name) != ext:
            continue  # a different archive type: skipped by the server
        try:
            data = store.get_object(bck["name"], name, bck["provider"]).data
        except NoSuchObject:
            msg = f'shard.do: "{bucket_uri(bck["provider"], bck["name"], name)}" does not exist'
            if spec["missing_shards"] == "abort":
                raise RuntimeError(msg) from None
            if spec["missing_shards"] == "warn":
                job.warnings.append(msg)
            continue
        shard: dict[str, list[tuple[tarfile.TarInfo, bytes]]] = {}
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
                for info in tar:
                    if info.isfile():
                        base = info.name.rsplit("/", 1)[-1]
                        key = info.name[: len(info.name) - len(base)] + base.split(".", 1)[0]
                        member = tar.extractfile(info)
                        shard.setdefault(key, []).append((info, member.read() if member else b""))
        except tarfile.TarError as exc:
            where = bucket_uri(bck["provider"], bck["name"], name)
            raise RuntimeError(f"failed to extract {where}: {exc}") from None
        records.extend(shard.items())
        size = sum(len(d) for recs in shard.values() for _, d in recs)
        job.extraction["extracted_count"] = str(int(job.extraction["extracted_count"]) + 1)
        job.extraction["extracted_size"] = str(int(job.extraction["extracted_size"]) + size)
        # AIStore counts every extracted file here (shard/rcb.go), not the records
        n = int(job.extraction["extracted_record_count"]) + sum(len(r) for r in shard.values())
        job.extraction["extracted_record_count"] = str(n)
    _finish(job.extraction, t0)
    return records


def _sort(records: list[Any], alg: dict[str, Any]) -> list[Any]:
    kind = alg["kind"]
    if kind == "none":
        return records
    if kind == "shuffle":
        out = list(records)
        random.Random(alg["seed"]).shuffle(out)
        return out
    if kind == "md5":
        return sorted(
            records, key=lambda r: hashlib.md5(r[0].encode()).hexdigest(), reverse=alg["decreasing"]
        )
    if kind == "content":
        conv = {"int": int, "float": float, "string": str}[alg["content_key_type"]]

        def content_key(rec: Any) -> Any:
            for info, data in rec[1]:
                if (
                    info.name.endswith(alg["extension"])
                    and info.name[: -len(alg["extension"])] == rec[0]
                ):
                    text = data.decode("utf-8", "replace").strip()
                    try:
                        return conv(text)
                    except ValueError:
                        raise RuntimeError(
                            f"failed to parse content key {text!r} of record "
                            f"{rec[0]!r} as {alg['content_key_type']}"
                        ) from None
            raise RuntimeError(f"record {rec[0]!r} has no {alg['extension']!r} member")

        return sorted(records, key=content_key, reverse=alg["decreasing"])
    return sorted(records, key=lambda r: r[1][0][0].name, reverse=alg["decreasing"])


def _pack(records: list[Any], spec: dict[str, Any]) -> list[tuple[str, list[Any]]]:
    total = sum(len(d) for _, recs in records for _, d in recs)
    limit = spec["output_shard_size"] or math.ceil(total / spec["out_count"])
    names = template_names(spec["out_prefix"], spec["out_ranges"])
    shards: list[tuple[str, list[Any]]] = []
    current: list[Any] = []
    cum = 0
    for i, rec in enumerate(records):
        current.append(rec)
        cum += sum(len(d) for _, d in rec[1])
        if cum >= limit or i == len(records) - 1:
            name = next(names, None)
            if name is None:
                raise RuntimeError(
                    "number of shards to be created exceeds expected number of "
                    f"shards ({spec['out_count']})"
                )
            if not _suffix(name) and spec["output_extension"]:
                name += spec["output_extension"]
            shards.append((name, current))
            current, cum = [], 0
    return shards


def _write(records: list[Any], ext: str) -> bytes:
    if ext not in (".tar", ".tgz", ".tar.gz"):
        raise RuntimeError(f"the emulator cannot write {ext} shards")
    if ext != ".tar":
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for _, recs in records:
                for info, data in recs:
                    tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()
    # AIStore writes each member (header, data padded to 512) and two zero blocks, without
    # tarfile's padding of the archive to a 10240-byte record
    parts = []
    for _, recs in records:
        for info, data in recs:
            parts += [info.tobuf(tarfile.GNU_FORMAT), data, bytes(-len(data) % 512)]
    return b"".join(parts) + bytes(1024)
