"""Mid-epoch resume: latency to the first batch and state size, against a fresh start.

Run from the repository root (one command; it writes deterministic JPEG shards under
``bench_data/``, starts its own SeaweedFS on 127.0.0.1, uploads them, measures, stops it)::

    python -m benchmarks.bench_resume                          # 4 shards x 100 MB, local + S3
    python -m benchmarks.bench_resume --shards 2 --shard-mb 20 --rounds 1 --backends local
    python -m benchmarks.bench_resume --peers --json resume.json   # + Streaming and LitData

Data: ``jpeg256`` samples of ``benchmarks/_data.py`` (a 256x256 JPEG of about 27 KB + ``.cls``),
``--shard-mb`` MB per shard. For each backend (local disk; ``s3://`` on SeaweedFS) wds_cloud
is measured as a training loop uses it: ``wds.make_loader(urls, batch_size=64, num_workers=2,
shuffle_buffer=1000, decode="rgb8", seed=17)``. Every step below runs in a new process, as
after a restart (imports done before the clock starts):

1. *pass*: iterate ``--at`` (90 %) of the epoch's batches, take ``state_dict()``, dump it as
   JSON (the *state bytes* column).
2. Each round, in turn: *fresh*, from constructing a loader to its first batch; *resume*, from
   constructing one (then ``load_state_dict``) to its first batch. The table gives the median
   over rounds and the ratio resume / fresh (issue 12's target: at most 2x).
3. *rest*: a resumed loader runs to the end of the epoch; the keys it delivers must be exactly
   the keys the pass did not deliver, each once (the *exact* column; the script exits 1 when
   wds_cloud's are not). On S3 the bytes the server sent during this run are read from
   SeaweedFS's own Prometheus counter (``SeaweedFS_s3_bucket_traffic_sent_bytes_total``).

``--peers`` adds MosaicML Streaming and LitData, each installed from PyPI into its own venv
under ``--peer-cache`` (default ``bench_data/peers``; torch, numpy and Pillow come from this
interpreter through a ``.pth`` file, so pip does not pull another torch build; see ``PEERS``
for what is left out and why). The same JPEG bytes are converted to MDS / LitData's format (the
*conversion s* column; local disk), then their ``StreamingDataset`` + ``StreamingDataLoader``
(batch 64, 2 workers, shuffled with the same seed, JPEGs decoded by the same decoder) go
through the same steps, on local disk and on S3 (the converted files uploaded to SeaweedFS;
Streaming through ``S3_ENDPOINT_URL``, LitData through ``storage_options``; each loader starts
with an empty download cache: a new directory for Streaming, the same one emptied for LitData,
whose state records the path). A peer that cannot be installed or run prints one line saying
why; the run goes on. The peers shuffle the whole epoch (a global sample permutation), where
wds_cloud uses shard shuffling and shuffle buffers.

Client, server and worker processes share the machine's cores: compare ratios within a run.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KEY_ID = "benchkey"
SECRET = "benchsecret"
REGION = "us-east-1"
BUCKET = "bench-resume"
SAMPLE_BYTES = 28_700  # a jpeg256 sample on disk: ~27 KB JPEG + .cls + three 512-byte headers
BATCH = 64
WORKERS = 2
SEED = 17
LABELS = {"wds_cloud": "wds_cloud", "streaming": "MosaicML Streaming", "litdata": "LitData"}

# Packages each peer venv installs with --no-deps (the peer's dependency list minus torch,
# torchvision and numpy, which come from this interpreter: PyPI's torch and torchvision wheels
# are CUDA builds of several GB), then those installed with their dependencies.
PEERS: dict[str, dict[str, list[str]]] = {
    "streaming": {
        "nodeps": ["mosaicml-streaming", "xxhash", "zstd", "catalogue", "python-snappy", "brotli"],
        "deps": ["transformers<5", "tqdm", "cramjam"],
    },
    # obstore is left out: LitData builds its obstore S3 store without allow_http, so it
    # cannot reach an http:// endpoint such as SeaweedFS's; without it LitData uses boto3.
    "litdata": {
        "nodeps": ["litdata", "lightning-utilities", "tifffile"],
        "deps": [],
    },
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- the steps, each run in its own process ------------------------------------------------------


def decoder() -> Callable[[bytes], Any]:
    """JPEG bytes -> HxWx3 uint8 array: simplejpeg when installed (what ``rgb8`` uses), else
    Pillow."""
    import numpy as np

    try:
        import simplejpeg

        return lambda data: simplejpeg.decode_jpeg(data, colorspace="RGB")
    except ImportError:
        from PIL import Image

        return lambda data: np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def tar_samples(path: str) -> Iterator[tuple[str, bytes, int]]:
    """``(key, jpg bytes, cls)`` of a jpeg256 shard, read with the stdlib (for conversions)."""
    with tarfile.open(path) as tar:
        current: dict[str, bytes] = {}
        key = None
        for info in tar:
            stem, _, ext = info.name.partition(".")
            if key is not None and stem != key:
                yield key, current["jpg"], int(current["cls"])
                current = {}
            key = stem
            member = tar.extractfile(info)
            assert member is not None
            current[ext] = member.read()
        if key is not None:
            yield key, current["jpg"], int(current["cls"])


def time_first(make: Callable[[], Any]) -> float:
    """Seconds from calling ``make()`` (which builds an iterator) to its first item."""
    t0 = time.perf_counter()
    it = make()
    next(it)
    seconds = time.perf_counter() - t0
    _stop(it)
    return seconds


def _stop(it: Any) -> None:
    """End an iterator early: close a generator (wds_cloud's pipeline closes its DataLoader
    iterator), or drop a DataLoader iterator, which shuts its workers down."""
    close = getattr(it, "close", None)
    if close is not None:
        close()
    del it
    gc.collect()


def run_step(step: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One step (``convert``, ``pass``, ``fresh``, ``resume``, ``rest``) in this process."""
    lib = spec["lib"]
    if step == "convert":
        t0 = time.perf_counter()
        (_mds_convert if lib == "streaming" else _litdata_convert)(
            spec["paths"], spec["converted"], spec["shard_bytes"]
        )
        return {"seconds": time.perf_counter() - t0}
    build, keys_of = {"wds_cloud": _wds, "streaming": _streaming, "litdata": _litdata}[lib](spec)

    def resumed() -> Iterator[Any]:
        loader = build()
        loader.load_state_dict(json.loads(Path(spec["state"]).read_text()))
        return iter(loader)

    if step == "pass":
        steps = int(spec["at"] * spec["total"]) // BATCH
        loader = build()
        it = iter(loader)
        seen: list[str] = []
        for _ in range(steps):
            seen.extend(keys_of(next(it)))
        state = loader.state_dict()
        Path(spec["state"]).write_text(json.dumps(state))
        _stop(it)
        return {"seen": seen}
    if step == "fresh":
        return {"seconds": time_first(lambda: iter(build()))}
    if step == "resume":
        return {"seconds": time_first(resumed)}
    rest: list[str] = []
    for batch in resumed():
        rest.extend(keys_of(batch))
    return {"keys": rest}


def _wds(spec: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[Any], list[str]]]:
    import wds_cloud as wds

    registry = None
    if spec.get("endpoint"):
        from wds_cloud.openers.registry import OpenerRegistry
        from wds_cloud.openers.s3 import S3Opener

        registry = OpenerRegistry()
        opener = S3Opener(
            endpoint_url=spec["endpoint"],
            access_key_id=KEY_ID,
            secret_access_key=SECRET,
            region=REGION,
        )
        registry.register("s3", opener, override=True)
    wds.make_loader  # noqa: B018 (the lazy imports, torch included, before the clock starts)

    def build() -> Any:
        return wds.make_loader(
            spec["source"],
            batch_size=BATCH,
            num_workers=WORKERS,
            shuffle_buffer=spec["shuffle_buffer"],
            decode="rgb8",
            to_tuple=("__key__", "jpg", "cls"),
            seed=SEED,
            registry=registry,
        )

    return build, lambda batch: list(batch[0])


def _decode_sample(sample: dict[str, Any]) -> dict[str, Any]:
    """A peer's stored sample with its JPEG decoded (runs in the loader's workers)."""
    decode = _DECODER.get("f")
    if decode is None:
        decode = _DECODER["f"] = decoder()
    return {"key": sample["key"], "jpg": decode(sample["jpg"]), "cls": sample["cls"]}


_DECODER: dict[str, Callable[[bytes], Any]] = {}


def _peer_keys(batch: dict[str, Any]) -> list[str]:
    return list(batch["key"])


def _mds_convert(paths: list[str], out_dir: str, shard_bytes: int) -> None:
    from streaming import MDSWriter

    columns = {"key": "str", "jpg": "bytes", "cls": "int"}
    with MDSWriter(out=out_dir, columns=columns, size_limit=shard_bytes) as writer:
        for path in paths:
            for key, jpg, cls in tar_samples(path):
                writer.write({"key": key, "jpg": jpg, "cls": cls})


def _streaming(spec: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[Any], list[str]]]:
    from streaming import StreamingDataLoader, StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()  # what a killed run's workers left (Streaming's advice)
    global StreamingDecoded

    class StreamingDecoded(StreamingDataset):  # type: ignore[misc,no-redef]
        def __getitem__(self, index: int) -> dict[str, Any]:
            return _decode_sample(super().__getitem__(index))

    def build() -> Any:
        if spec.get("endpoint"):  # an empty download cache, new to Streaming's shared memory
            place = {"remote": spec["source"], "local": _empty(f"{spec['cache']}-{os.getpid()}")}
        else:
            place = {"local": spec["source"]}
        dataset = StreamingDecoded(**place, shuffle=True, shuffle_seed=SEED, batch_size=BATCH)
        return StreamingDataLoader(dataset, batch_size=BATCH, num_workers=WORKERS)

    return build, _peer_keys


StreamingDecoded: Any = None  # defined by _streaming, at module level so workers can unpickle it


def _litdata_convert(paths: list[str], out_dir: str, shard_bytes: int) -> None:
    from litdata import optimize

    optimize(
        fn=_litdata_samples,
        inputs=paths,
        output_dir=out_dir,
        chunk_bytes=shard_bytes,
        num_workers=1,
        mode="overwrite",
    )


def _litdata_samples(path: str) -> Iterator[dict[str, Any]]:
    for key, jpg, cls in tar_samples(path):
        yield {"key": key, "jpg": jpg, "cls": cls}


def _litdata(spec: dict[str, Any]) -> tuple[Callable[[], Any], Callable[[Any], list[str]]]:
    from litdata import StreamingDataLoader, StreamingDataset

    def build() -> Any:
        remote: dict[str, Any] = {}
        if spec.get("endpoint"):  # LitData records the cache path in its state: the same one
            options = {
                "endpoint_url": spec["endpoint"],
                "aws_access_key_id": KEY_ID,
                "aws_secret_access_key": SECRET,
                "region_name": REGION,
            }
            remote = {"storage_options": options, "cache_dir": _empty(spec["cache"])}
        dataset = StreamingDataset(
            spec["source"], shuffle=True, seed=SEED, transform=_decode_sample, **remote
        )
        return StreamingDataLoader(dataset, batch_size=BATCH, num_workers=WORKERS)

    return build, _peer_keys


def _empty(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


# -- peer venvs ----------------------------------------------------------------------------------


def peer_venv(name: str, cache: Path, spec: dict[str, list[str]] | None = None) -> Path:
    """The peer's venv python, creating the venv and installing the peer when missing
    (``spec``: its ``nodeps``/``deps`` packages, default ``PEERS[name]``).

    Raises:
        RuntimeError: venv creation or pip failed (the message names the step).
    """
    venv = cache / name
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.exists():
        return python
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (venv / "lib" / version / "site-packages" / "_base.pth").write_text("\n".join(site) + "\n")
    spec = PEERS[name] if spec is None else spec
    for flags, packages in (["--no-deps"], spec["nodeps"]), ([], spec["deps"]):
        if not packages:
            continue
        cmd = [str(python), "-m", "pip", "install", "-q", *flags, *packages]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = [line for line in proc.stderr.splitlines() if "ignored" not in line][-3:]
            raise RuntimeError(f"pip install {' '.join(packages)} failed: {' | '.join(tail)}")
    if name == "streaming":
        _torchvision_placeholder(venv / "lib" / version / "site-packages")
    marker.write_text("ok\n")
    return python


# ``import streaming`` imports ``streaming.vision``, which imports two torchvision names. The
# PyPI torchvision wheels are built against the CUDA torch and do not load on the CPU torch
# this interpreter shares with the venv, so the streaming venv gets a placeholder holding just
# those names (the benchmark uses ``StreamingDataset``, never ``streaming.vision``).
_TORCHVISION = {
    "__init__.py": '"""Placeholder for bench_resume.py: see its _torchvision_placeholder."""\n',
    "datasets.py": "from torch.utils.data import Dataset as VisionDataset  # noqa: F401\n",
    "transforms/__init__.py": "",
    "transforms/functional.py": (
        "def to_tensor(pic):\n"
        "    raise NotImplementedError('torchvision placeholder (benchmarks/bench_resume.py)')\n"
    ),
}


def _torchvision_placeholder(site: Path) -> None:
    for rel, text in _TORCHVISION.items():
        path = site / "torchvision" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


# -- the parent: runs each step as a subprocess and checks the results ---------------------------


class StepError(RuntimeError):
    """A step's process failed; the message has its last error line and its log file."""


def spawn(python: str, step: str, spec: dict[str, Any], logfile: Path) -> dict[str, Any]:
    """Run one step in a new process of ``python``; its result.

    Raises:
        StepError: the process failed (its output is appended to ``logfile``).
    """
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        cmd = [python, str(Path(__file__)), "--step", step, "--spec", json.dumps(spec)]
        cmd += ["--out", out.name]
        env = dict(os.environ)
        if spec["lib"] == "wds_cloud":
            env["PYTHONPATH"] = str(ROOT)  # this checkout's package
        else:
            env.pop("PYTHONPATH", None)
        if spec.get("endpoint"):
            env.update(
                AWS_ACCESS_KEY_ID=KEY_ID,
                AWS_SECRET_ACCESS_KEY=SECRET,
                AWS_DEFAULT_REGION=REGION,
                AWS_REGION=REGION,
                S3_ENDPOINT_URL=spec["endpoint"],  # MosaicML Streaming's endpoint variable
            )
        proc = subprocess.run(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT
        )
        with open(logfile, "a") as f:
            f.write(f"== {step}\n{proc.stdout}")
        if proc.returncode != 0:
            errors = [x for x in proc.stdout.splitlines() if "Error" in x] or ["no output"]
            raise StepError(f"{step} failed: {errors[-1].strip()[:160]} (see {logfile})")
        return dict(json.load(out))


def measure(
    name: str,
    python: str,
    spec: dict[str, Any],
    all_keys: set[str],
    rounds: int,
    logfile: Path,
    metrics: str | None = None,
) -> dict[str, Any]:
    """The pass, ``rounds`` x (fresh, resume) and the rest of the epoch for one library on one
    backend; the result row, or ``{"error": why}``."""
    try:
        seen = spawn(python, "pass", spec, logfile)["seen"]
        state_bytes = os.path.getsize(spec["state"])
        log(f"{name}: pass delivered {len(seen)} samples; state {state_bytes} B")
        fresh_s, resume_s = [], []
        for r in range(rounds):
            fresh_s.append(spawn(python, "fresh", spec, logfile)["seconds"])
            resume_s.append(spawn(python, "resume", spec, logfile)["seconds"])
            log(f"{name} round {r + 1}: fresh {fresh_s[-1]:.3f} s, resume {resume_s[-1]:.3f} s")
        before = s3_sent_bytes(metrics) if metrics else 0.0
        rest = spawn(python, "rest", spec, logfile)["keys"]
        sent = s3_sent_bytes(metrics) - before if metrics else None
    except StepError as exc:
        return {"error": str(exc)}
    expected = all_keys - set(seen)
    exact = len(rest) == len(set(rest)) == len(expected) and set(rest) == expected
    log(f"{name}: the resumed run delivered {len(rest)} samples of {len(expected)}: {exact=}")
    fresh, resume = statistics.median(fresh_s), statistics.median(resume_s)
    return {
        "fresh_first_batch_s": fresh,
        "resume_first_batch_s": resume,
        "ratio": resume / fresh,
        "state_bytes": state_bytes,
        "fresh_s": fresh_s,
        "resume_s": resume_s,
        "delivered_before": len(seen),
        "delivered_after": len(rest),
        "expected_after": len(expected),
        "exact": exact,
        "s3_bytes_sent_resumed_run": sent,
    }


def s3_sent_bytes(metrics_url: str) -> float:
    """SeaweedFS's ``bucket_traffic_sent_bytes_total`` for the benchmark bucket."""
    with urllib.request.urlopen(metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if "bucket_traffic_sent_bytes_total{" in line and f'bucket="{BUCKET}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def _row(backend: str, lib: str, r: dict[str, Any]) -> str:
    if "error" in r:
        return f"| {backend} | {lib} | {r['error']} | | | | | |"
    conv = f"{r['conversion_s']:.1f}" if r.get("conversion_s") is not None else "none"
    exact = "yes" if r["exact"] else f"NO ({r['delivered_after']} of {r['expected_after']})"
    return (
        f"| {backend} | {lib} | {r['fresh_first_batch_s']:.2f} | {r['resume_first_batch_s']:.2f}"
        f" | {r['ratio']:.2f}x | {r['state_bytes']:,} | {conv} | {exact} |"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--shard-mb", type=float, default=100.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--at", type=float, default=0.9, help="fraction of the epoch delivered")
    parser.add_argument("--shuffle-buffer", type=int, default=1000)
    parser.add_argument("--backends", default="local,s3", help="comma-separated: local, s3")
    parser.add_argument("--peers", action="store_true", help="also Streaming and LitData")
    parser.add_argument("--peer-cache", default=None, help="venvs (default bench_data/peers)")
    parser.add_argument("--data-dir", default=str(ROOT / "bench_data"))
    parser.add_argument("--json", default=None, help="write all results here")
    for hidden in ("--step", "--spec", "--out"):  # a step's process
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, make the data, measure every backend and library, print the table."""
    args = _parser().parse_args(argv)
    if args.step:
        Path(args.out).write_text(json.dumps(run_step(args.step, json.loads(args.spec))))
        return 0

    sys.path.insert(0, str(ROOT))
    from benchmarks import _data

    per_shard = max(1, round(args.shard_mb * 1e6 / SAMPLE_BYTES))
    ds = _data.ensure(_data.DataSpec("jpeg256", args.shards, per_shard), args.data_dir, log)
    paths = list(ds.paths)
    all_keys = {key for i in range(args.shards) for key, _ in _data.iter_samples(ds.spec, i)}
    _data.warm(paths)
    log(
        f"{args.shards} shards x {per_shard} samples, {ds.nbytes / 1e6:.0f} MB, "
        f"{os.cpu_count()} CPUs, {args.rounds} rounds, state at {args.at:.0%}"
    )
    backends = [b for b in args.backends.split(",") if b]
    results: dict[str, dict[str, Any]] = {b: {} for b in backends}
    with tempfile.TemporaryDirectory(prefix="bench-resume-") as tmp:
        work = Path(tmp)
        libs = {"wds_cloud": sys.executable}
        conversions: dict[str, float] = {}
        if args.peers:
            libs.update(
                _prepare_peers(args, paths, work, ds.nbytes, backends, results, conversions)
            )
        common = {"at": args.at, "total": len(all_keys), "shuffle_buffer": args.shuffle_buffer}

        def spec_for(lib: str, backend: str, source: Any, endpoint: str | None) -> dict:
            where = work / f"{lib}-{backend}"
            where.mkdir(exist_ok=True)
            return {
                **common,
                "lib": lib,
                "source": source,
                "endpoint": endpoint,
                "state": str(where / "state.json"),
                "cache": str(where / "cache"),
            }

        if "local" in backends:
            for lib, python in libs.items():
                source = paths if lib == "wds_cloud" else str(work / lib / "converted")
                spec = spec_for(lib, "local", source, None)
                logfile = work / f"{lib}-local.log"
                got = measure(f"{lib} local", python, spec, all_keys, args.rounds, logfile)
                results["local"][LABELS[lib]] = {**got, "conversion_s": conversions.get(lib)}
        if "s3" in backends:
            _measure_s3(libs, paths, work, spec_for, all_keys, args, results, conversions)
        if args.peers:  # keep the last logs of the peers beside their venvs
            for log_path in work.glob("*.log"):
                shutil.copy(log_path, _peer_cache(args) / log_path.name)

    _print(results, args, ds, per_shard, len(all_keys))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    failed = [b for b, libs in results.items() if not libs.get("wds_cloud", {}).get("exact")]
    if failed:
        print(f"\nFAIL: the resumed wds_cloud run was not exact on {', '.join(failed)}")
        return 1
    return 0


def _peer_cache(args: argparse.Namespace) -> Path:
    return Path(args.peer_cache or os.path.join(args.data_dir, "peers"))


def _prepare_peers(
    args: argparse.Namespace,
    paths: list[str],
    work: Path,
    nbytes: int,
    backends: list[str],
    results: dict[str, dict[str, Any]],
    conversions: dict[str, float],
) -> dict[str, str]:
    """Install the peers (once) and convert the shards to their formats; the usable ones."""
    ready = {}
    for lib in PEERS:
        label = LABELS[lib]
        try:
            python = str(peer_venv(lib, _peer_cache(args)))
            spec = {
                "lib": lib,
                "paths": paths,
                "converted": str(work / lib / "converted"),
                "shard_bytes": nbytes // len(paths),
            }
            conversions[lib] = spawn(python, "convert", spec, work / f"{lib}-convert.log")[
                "seconds"
            ]
            log(f"{label}: converted in {conversions[lib]:.1f} s")
            ready[lib] = python
        except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
            print(f"{label}: skipped: {exc}", flush=True)
            for b in backends:
                results[b][label] = {"error": f"skipped: {str(exc)[:120]}"}
    return ready


def _measure_s3(
    libs: dict[str, str],
    paths: list[str],
    work: Path,
    spec_for: Callable[..., dict[str, Any]],
    all_keys: set[str],
    args: argparse.Namespace,
    results: dict[str, dict[str, Any]],
    conversions: dict[str, float],
) -> None:
    """Start SeaweedFS (with its Prometheus port), upload the shards and the peers'
    conversions, measure every library over ``s3://``."""

    from tests.support.seaweed import SeaweedServer, boto3_client, create_bucket, free_ports

    port = free_ports(1)[0]
    metrics = f"http://127.0.0.1:{port}/metrics"
    flags = (f"-metricsPort={port}", "-metricsIp=127.0.0.1")
    with SeaweedServer(
        work / "weed", access_key=KEY_ID, secret_key=SECRET, extra_args=flags
    ) as server:
        endpoint = server.endpoint_url
        client = boto3_client(endpoint, access_key=KEY_ID, secret_key=SECRET)
        create_bucket(client, BUCKET)
        uploads = {"wds_cloud": {os.path.basename(p): Path(p) for p in paths}}
        for lib in libs:
            converted = work / lib / "converted"
            if lib != "wds_cloud":
                files = [f for f in sorted(converted.rglob("*")) if f.is_file()]
                uploads[lib] = {str(f.relative_to(converted)): f for f in files}
        for lib, files in uploads.items():
            for key, file in files.items():
                client.upload_file(str(file), BUCKET, f"{lib}/{key}")
        for lib, python in libs.items():
            if lib == "wds_cloud":
                source: Any = [f"s3://{BUCKET}/wds_cloud/{name}" for name in uploads[lib]]
            else:
                source = f"s3://{BUCKET}/{lib}"
            spec = spec_for(lib, "s3", source, endpoint)
            logfile = work / f"{lib}-s3.log"
            got = measure(f"{lib} s3", python, spec, all_keys, args.rounds, logfile, metrics)
            results["s3"][LABELS[lib]] = {**got, "conversion_s": conversions.get(lib)}


def _print(
    results: dict[str, dict[str, Any]], args: argparse.Namespace, ds: Any, per: int, n: int
) -> None:
    print(
        f"\n{args.shards} shards x {per} samples (256x256 JPEG ~27 KB + .cls), "
        f"{ds.nbytes / 1e6:.0f} MB; batch {BATCH}, {WORKERS} workers, decode on, wds_cloud "
        f"shuffle buffer {args.shuffle_buffer}; state at {args.at:.0%} of the epoch; median of "
        f"{args.rounds} round(s); {os.cpu_count()} CPUs\n"
    )
    print(
        "| backend | library | fresh first batch s | resume first batch s | resume / fresh "
        "| state bytes | conversion s | rest of epoch exact |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for backend, libs in results.items():
        for lib, r in libs.items():
            print(_row(backend, lib, r))
    sent = [
        (lib, r["s3_bytes_sent_resumed_run"], r["delivered_before"])
        for lib, r in results.get("s3", {}).items()
        if r.get("s3_bytes_sent_resumed_run") is not None
    ]
    if sent:
        print(
            "\n| S3, resumed run to the end of the epoch | MB sent by the server "
            "| of the data set | samples left |"
        )
        print("|---|---:|---:|---:|")
        for lib, nbytes, before in sent:
            print(
                f"| {lib} | {nbytes / 1e6:.1f} | {nbytes / ds.nbytes:.1%} | {1 - before / n:.1%} |"
            )


if __name__ == "__main__":
    sys.exit(main())
