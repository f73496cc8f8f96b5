"""Mid-epoch resume: latency to the first batch and state size, against a fresh start.

Run from the repository root (one command; it writes deterministic JPEG shards under
``bench_data/``, starts its own SeaweedFS on 127.0.0.1, uploads them, measures, stops it)::

    python -m benchmarks.bench_resume                          # 4 shards x 100 MB, local + S3
    python -m benchmarks.bench_resume --shards 2 --shard-mb 20 --rounds 1 --backends local
    python -m benchmarks.bench_resume --peers --json resume.json   # + Streaming and LitData

Data: ``jpeg256`` samples of ``benchmarks/_data.py`` (a 256x256 JPEG of about 27 KB + ``.cls``),
``--shard-mb`` MB per shard. For each backend (local disk; ``s3://`` on SeaweedFS) wds_cloud
is measured as a training loop uses it: ``wds.make_loader(urls, batch_size=64, num_workers=2,
shuffle_buffer=1000, decode="rgb8", seed=17)``.

1. One pass iterates ``--at`` (90 %) of the epoch's batches, takes ``state_dict()`` and
   dumps it as JSON (the *state bytes*).
2. Each round times, in turn: a **fresh** loader, from constructing it to its first batch;
   and a **resumed** one, from constructing it (then ``load_state_dict``) to its first batch.
   The table gives the median over rounds and the ratio resumed / fresh (issue 12's target:
   at most 2x).
3. One resumed loader runs to the end of the epoch: the keys it delivers must be exactly the
   keys the first pass did not deliver (each once); the run fails otherwise. On S3 the bytes
   the server sent during that resumed run are read from SeaweedFS's own Prometheus counter
   (``SeaweedFS_s3_bucket_traffic_sent_bytes_total``), beside the bytes of the whole data set.

``--peers`` adds MosaicML Streaming and LitData, each installed from PyPI into its own venv
under ``--peer-cache`` (default ``bench_data/peers``; torch, numpy and Pillow come from this
interpreter through a ``.pth`` file, so pip does not pull another torch build) and run as a
subprocess of this script: the same JPEG bytes converted to MDS / LitData's format (the
*conversion s* column), then their ``StreamingDataset`` + ``StreamingDataLoader`` (same batch
size, 2 workers, shuffled, JPEGs decoded with the same decoder) measured the same way on local
disk. A peer that cannot be installed or run prints one line saying why; the run goes on.

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

# Packages each peer venv installs with --no-deps (the peer's own dependency list minus torch,
# torchvision and numpy, which come from this interpreter), then those installed with deps.
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


# -- shared by wds_cloud and the peers ---------------------------------------------------------


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


def time_first(make: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds from calling ``make()`` (which builds an iterator) to its first item."""
    t0 = time.perf_counter()
    it = make()
    first = next(it)
    seconds = time.perf_counter() - t0
    _stop(it)
    del it
    gc.collect()  # the loader's workers are gone before the next measurement starts
    return seconds, first


def _stop(it: Any) -> None:
    """End an iterator early: close a generator (wds_cloud's pipeline closes its DataLoader
    iterator), or drop a DataLoader iterator, which shuts its workers down."""
    close = getattr(it, "close", None)
    if close is not None:
        close()


def measure(
    name: str,
    build: Callable[[], Any],
    keys_of: Callable[[Any], list[str]],
    all_keys: set[str],
    rounds: int,
    at: float,
    extra: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """The resume measurement for one library on one backend (see the module docstring).

    Args:
        build: a new loader with ``state_dict``/``load_state_dict``.
        keys_of: the sample keys of one batch.
        all_keys: every key of the epoch.
        extra: called around the exactness run; returns a value to report (S3 bytes).
    """
    total = len(all_keys)
    steps = int(at * total) // BATCH
    loader = build()
    seen: list[str] = []
    it = iter(loader)
    t0 = time.perf_counter()
    for _ in range(steps):
        seen.extend(keys_of(next(it)))
    epoch_s = time.perf_counter() - t0
    state = loader.state_dict()
    blob = json.dumps(state)
    _stop(it)
    del it, loader
    gc.collect()
    log(f"{name}: {steps} batches ({len(seen)} samples) in {epoch_s:.1f} s, state {len(blob)} B")

    def resumed() -> Iterator[Any]:
        fresh = build()
        fresh.load_state_dict(json.loads(blob))
        return iter(fresh)

    fresh_s, resume_s = [], []
    for r in range(rounds):
        fresh_s.append(time_first(lambda: iter(build()))[0])
        resume_s.append(time_first(resumed)[0])
        log(f"{name} round {r + 1}: fresh {fresh_s[-1]:.3f} s, resumed {resume_s[-1]:.3f} s")

    before = extra() if extra else None
    rest: list[str] = []
    for batch in resumed():
        rest.extend(keys_of(batch))
    after = extra() if extra else None
    expected = all_keys - set(seen)
    exact = len(rest) == len(set(rest)) == len(expected) and set(rest) == expected
    log(
        f"{name}: resumed run delivered {len(rest)} samples, expected {len(expected)}: exact={exact}"
    )
    fresh_med, resume_med = statistics.median(fresh_s), statistics.median(resume_s)
    return {
        "fresh_first_batch_s": fresh_med,
        "resume_first_batch_s": resume_med,
        "ratio": resume_med / fresh_med,
        "state_bytes": len(blob),
        "fresh_s": fresh_s,
        "resume_s": resume_s,
        "delivered_before": len(seen),
        "delivered_after": len(rest),
        "expected_after": len(expected),
        "exact": exact,
        "samples_per_s_first_pass": len(seen) / epoch_s,
        "extra": None if extra is None else (after - before),
    }


# -- wds_cloud ---------------------------------------------------------------------------------


def _keys(batch: Any) -> list[str]:
    return list(batch[0])


def wds_builder(urls: list[str], registry: Any, shuffle_buffer: int) -> Callable[[], Any]:
    import wds_cloud as wds

    def build() -> Any:
        return wds.make_loader(
            urls,
            batch_size=BATCH,
            num_workers=WORKERS,
            shuffle_buffer=shuffle_buffer,
            decode="rgb8",
            to_tuple=("__key__", "jpg", "cls"),
            seed=SEED,
            registry=registry,
        )

    return build


# -- peers (run inside their own venv, as a subprocess of this script) --------------------------


def peer_venv(name: str, cache: Path) -> Path:
    """The peer's venv python, creating the venv and installing the peer when missing.

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
    spec = PEERS[name]
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


def run_peer(
    name: str, python: Path, work: Path, paths: list[str], args: argparse.Namespace, where: dict
) -> dict[str, Any]:
    """Run one peer's measurement in its venv (``where``: ``{}`` for local disk, or the S3
    ``remote``, ``endpoint`` and ``metrics`` URL); its result dict, or ``{"error": why}``. The
    peer's output goes to ``last-local.log``/``last-s3.log`` in its venv; our lines are echoed."""
    out = work / f"{name}-result.json"
    out.unlink(missing_ok=True)
    cmd = [str(python), str(Path(__file__)), "--peer-run", name, "--peer-out", str(out)]
    cmd += ["--peer-work", str(work / name), "--rounds", str(args.rounds), "--at", str(args.at)]
    cmd += ["--peer-paths", json.dumps(paths), "--peer-where", json.dumps(where)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if where.get("remote"):
        env.update(
            AWS_ACCESS_KEY_ID=KEY_ID,
            AWS_SECRET_ACCESS_KEY=SECRET,
            AWS_DEFAULT_REGION=REGION,
            AWS_REGION=REGION,
            S3_ENDPOINT_URL=where["endpoint"],  # MosaicML Streaming's endpoint variable
        )
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=work
    )
    step = "s3" if where.get("remote") else "convert" if where.get("convert") else "local"
    logfile = python.parent.parent / f"last-{step}.log"
    logfile.write_text(proc.stdout)
    for line in proc.stdout.splitlines():
        if line.startswith(f"{name} "):
            log(f"  {line}")
    if proc.returncode != 0 or not out.exists():
        errors = [x for x in proc.stdout.splitlines() if "Error" in x] or ["no output"]
        return {"error": f"failed (exit {proc.returncode}): {errors[-1][:160]} (see {logfile})"}
    return dict(json.loads(out.read_text()))


def peer_main(
    name: str, paths: list[str], work: str, rounds: int, at: float, where: dict[str, Any]
) -> dict[str, Any]:
    """Inside the peer's venv: with ``where["convert"]``, convert ``paths`` to the peer's format
    into ``work/converted`` and time it; else measure the conversion on local disk or, with
    ``where["remote"]``, its upload on S3."""
    converted = os.path.join(work, "converted")
    if where.get("convert"):
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        t0 = time.perf_counter()
        shard_bytes = sum(os.path.getsize(p) for p in paths) // len(paths)
        (_mds_convert if name == "streaming" else _litdata_convert)(paths, converted, shard_bytes)
        conversion = time.perf_counter() - t0
        log(f"{name} converted {len(paths)} shards in {conversion:.1f} s")
        return {"conversion_s": conversion}
    all_keys = {key for path in paths for key, _, _ in tar_samples(path)}
    remote = where.get("remote")
    build = (
        _streaming(remote or converted, work, bool(remote))
        if name == "streaming"
        else _litdata(remote or converted, work, where)
    )
    extra = None
    if where.get("metrics"):
        metrics = where["metrics"]
        extra = lambda: s3_sent_bytes(metrics)  # noqa: E731
    where_name = "s3" if remote else "local"
    return measure(f"{name} {where_name}", build, _batch_keys, all_keys, rounds, at, extra)


def _batch_keys(batch: dict[str, Any]) -> list[str]:
    return list(batch["key"])


def _fresh_cache(work: str, unique: bool) -> str:
    """An empty download cache for a remote peer dataset, so every loader starts with nothing
    downloaded, as after a restart on a new machine. LitData records the path in its state and
    refuses a state taken with another one (``unique=False``: the same path, emptied);
    Streaming keeps the shard states of a local directory in shared memory for the life of the
    process, so emptying one it used leaves it waiting for files it believes present
    (``unique=True``: a new directory each time, all removed with ``work`` at the end)."""
    if unique:
        return tempfile.mkdtemp(prefix="cache-", dir=work)
    cache = os.path.join(work, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    return cache


def _decode_sample(sample: dict[str, Any]) -> dict[str, Any]:
    """A peer's stored sample with its JPEG decoded (runs in the loader's workers)."""
    decode = _DECODER.get("f")
    if decode is None:
        decode = _DECODER["f"] = decoder()
    return {"key": sample["key"], "jpg": decode(sample["jpg"]), "cls": sample["cls"]}


_DECODER: dict[str, Callable[[bytes], Any]] = {}


def _mds_convert(paths: list[str], out_dir: str, shard_bytes: int) -> None:
    from streaming import MDSWriter

    columns = {"key": "str", "jpg": "bytes", "cls": "int"}
    with MDSWriter(out=out_dir, columns=columns, size_limit=shard_bytes) as writer:
        for path in paths:
            for key, jpg, cls in tar_samples(path):
                writer.write({"key": key, "jpg": jpg, "cls": cls})


def _streaming(source: str, work: str, remote: bool) -> Callable[[], Any]:
    from streaming import StreamingDataLoader, StreamingDataset

    global StreamingDecoded

    class StreamingDecoded(StreamingDataset):  # type: ignore[misc,no-redef]
        def __getitem__(self, index: int) -> dict[str, Any]:
            return _decode_sample(super().__getitem__(index))

    def build() -> Any:
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()  # the previous loader's shared memory for this dataset
        place = (
            {"remote": source, "local": _fresh_cache(work, True)} if remote else {"local": source}
        )
        dataset = StreamingDecoded(**place, shuffle=True, shuffle_seed=SEED, batch_size=BATCH)
        return StreamingDataLoader(dataset, batch_size=BATCH, num_workers=WORKERS)

    return build


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


def _litdata(source: str, work: str, where: dict[str, Any]) -> Callable[[], Any]:
    from litdata import StreamingDataLoader, StreamingDataset

    remote: dict[str, Any] = {}
    if where.get("remote"):
        options = {
            "endpoint_url": where["endpoint"],
            "aws_access_key_id": KEY_ID,
            "aws_secret_access_key": SECRET,
            "region_name": REGION,
        }
        remote = {"storage_options": options}

    def build() -> Any:
        if where.get("remote"):
            remote["cache_dir"] = _fresh_cache(work, False)
        dataset = StreamingDataset(
            source, shuffle=True, seed=SEED, transform=_decode_sample, **remote
        )
        return StreamingDataLoader(dataset, batch_size=BATCH, num_workers=WORKERS)

    return build


def _litdata_samples(path: str) -> Iterator[dict[str, Any]]:
    for key, jpg, cls in tar_samples(path):
        yield {"key": key, "jpg": jpg, "cls": cls}


# -- S3 ----------------------------------------------------------------------------------------


def s3_sent_bytes(metrics_url: str) -> float:
    """SeaweedFS's ``bucket_traffic_sent_bytes_total`` for the benchmark bucket."""
    with urllib.request.urlopen(metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if "bucket_traffic_sent_bytes_total{" in line and f'bucket="{BUCKET}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


# -- main --------------------------------------------------------------------------------------

PEER_LABELS = {"streaming": "MosaicML Streaming", "litdata": "LitData"}


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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--at", type=float, default=0.9, help="fraction of the epoch delivered")
    parser.add_argument("--shuffle-buffer", type=int, default=1000)
    parser.add_argument("--backends", default="local,s3", help="comma-separated: local, s3")
    parser.add_argument("--peers", action="store_true", help="also Streaming and LitData")
    parser.add_argument("--peer-cache", default=None, help="venvs (default bench_data/peers)")
    parser.add_argument("--data-dir", default=str(ROOT / "bench_data"))
    parser.add_argument("--json", default=None, help="write all results here")
    for hidden in ("run", "out", "work", "paths", "where"):  # the peer subprocess's arguments
        parser.add_argument(f"--peer-{hidden}", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, make the data, measure every backend and library, print the table."""
    args = _parser().parse_args(argv)
    if args.peer_run:  # inside a peer's venv
        where = json.loads(args.peer_where)
        paths = json.loads(args.peer_paths)
        result = peer_main(args.peer_run, paths, args.peer_work, args.rounds, args.at, where)
        Path(args.peer_out).write_text(json.dumps(result))
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
    peers: dict[str, Path] = {}
    conversions: dict[str, float] = {}
    if args.peers:
        cache = Path(args.peer_cache or os.path.join(args.data_dir, "peers"))
        for name, label in PEER_LABELS.items():
            try:
                peers[name] = peer_venv(name, cache)
            except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
                print(f"{label}: not installable, skipped: {exc}", flush=True)
                for b in backends:
                    results[b][label] = {"error": "not installable (see the line above)"}

    with tempfile.TemporaryDirectory(prefix="bench-resume-") as tmp:
        work = Path(tmp)
        for name, python in list(peers.items()):
            got = run_peer(name, python, work, paths, args, {"convert": True})
            if "error" in got:
                print(f"{PEER_LABELS[name]} (conversion): {got['error']}", flush=True)
                del peers[name]
                for b in backends:
                    results[b][PEER_LABELS[name]] = {"error": "conversion failed (see above)"}
            else:
                conversions[name] = got["conversion_s"]
        if "local" in backends:
            build = wds_builder(paths, None, args.shuffle_buffer)
            results["local"]["wds_cloud"] = measure(
                "wds_cloud local", build, _keys, all_keys, args.rounds, args.at
            )
            for name, python in peers.items():
                got = run_peer(name, python, work, paths, args, {})
                if "error" in got:
                    print(f"{PEER_LABELS[name]} (local): {got['error']}", flush=True)
                results["local"][PEER_LABELS[name]] = {**got, "conversion_s": conversions[name]}
        if "s3" in backends:
            results["s3"] = _measure_s3(paths, all_keys, args, peers, work)
            for name in peers:
                results["s3"][PEER_LABELS[name]]["conversion_s"] = conversions[name]

    _print(results, args, ds, per_shard, len(all_keys))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    wds_failed = [b for b, libs in results.items() if not libs.get("wds_cloud", {}).get("exact")]
    if wds_failed:
        print(f"\nFAIL: the resumed wds_cloud run was not exact on {', '.join(wds_failed)}")
        return 1
    return 0


def _print(
    results: dict[str, dict[str, Any]], args: argparse.Namespace, ds: Any, per: int, n: int
) -> None:
    print(
        f"\n{args.shards} shards x {per} samples (256x256 JPEG ~27 KB + .cls), "
        f"{ds.nbytes / 1e6:.0f} MB; batch {BATCH}, {WORKERS} workers, shuffle buffer "
        f"{args.shuffle_buffer}, decode on; state at {args.at:.0%} of the epoch; median of "
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
    sent = [(lib, r) for lib, r in results.get("s3", {}).items() if r.get("extra") is not None]
    if sent:
        print("\n| S3 bytes sent during the resumed run (rest of the epoch) | MB | of the data |")
        print("|---|---:|---:|")
        for lib, r in sent:
            print(f"| {lib} | {r['extra'] / 1e6:.1f} | {r['extra'] / ds.nbytes:.1%} |")
        left = 1 - results["s3"]["wds_cloud"]["delivered_before"] / n
        print(f"\n{left:.1%} of the samples were left; the data set is {ds.nbytes / 1e6:.1f} MB.")


def _measure_s3(
    paths: list[str],
    all_keys: set[str],
    args: argparse.Namespace,
    peers: dict[str, Path],
    work: Path,
) -> dict[str, Any]:
    """Start SeaweedFS (with its Prometheus port), upload the shards (and the peers'
    conversions), measure wds_cloud and the peers over ``s3://``."""
    import boto3

    from tests.support.seaweed import SeaweedServer, free_ports
    from wds_cloud.openers.registry import OpenerRegistry
    from wds_cloud.openers.s3 import S3Opener

    port = free_ports(1)[0]
    metrics = f"http://127.0.0.1:{port}/metrics"
    flags = (f"-metricsPort={port}", "-metricsIp=127.0.0.1")
    out: dict[str, Any] = {}
    with SeaweedServer(
        work / "weed", access_key=KEY_ID, secret_key=SECRET, extra_args=flags
    ) as server:
        endpoint = server.endpoint_url
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
        )
        for attempt in range(100):
            try:
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception:
                if attempt == 99:
                    raise
                time.sleep(0.1)
        urls = []
        for path in paths:
            key = f"wds/{os.path.basename(path)}"
            client.upload_file(path, BUCKET, key)
            urls.append(f"s3://{BUCKET}/{key}")
        registry = OpenerRegistry()
        opener = S3Opener(
            endpoint_url=endpoint, access_key_id=KEY_ID, secret_access_key=SECRET, region=REGION
        )
        registry.register("s3", opener, override=True)
        build = wds_builder(urls, registry, args.shuffle_buffer)
        out["wds_cloud"] = measure(
            "wds_cloud s3",
            build,
            _keys,
            all_keys,
            args.rounds,
            args.at,
            lambda: s3_sent_bytes(metrics),
        )
        for name, python in peers.items():
            converted = work / name / "converted"
            for file in sorted(converted.rglob("*")):
                if file.is_file():
                    key = f"{name}/{file.relative_to(converted)}"
                    client.upload_file(str(file), BUCKET, key)
            where = {"remote": f"s3://{BUCKET}/{name}", "endpoint": endpoint, "metrics": metrics}
            got = run_peer(name, python, work, paths, args, where)
            if "error" in got:
                print(f"{PEER_LABELS[name]} (s3): {got['error']}", flush=True)
            out[PEER_LABELS[name]] = got
    return out


if __name__ == "__main__":
    sys.exit(main())
