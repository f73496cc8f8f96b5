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
import io
import json
import os
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
    "litdata": {
        "nodeps": ["litdata", "lightning-utilities", "tifffile", "obstore"],
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
    close = getattr(it, "close", None)
    if close is not None:
        close()
    del it
    return seconds, first


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
    close = getattr(it, "close", None)
    if close is not None:
        close()
    del it, loader
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
    log(f"{name}: resumed run delivered {len(rest)} samples, expected {len(expected)}: exact={exact}")
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
    marker.write_text("ok\n")
    return python


def run_peer(name: str, cache: Path, paths: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Install (once) and run one peer; its result dict, or ``{"error": why}``."""
    try:
        python = peer_venv(name, cache)
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        return {"error": f"not installable: {exc}"}
    with tempfile.TemporaryDirectory(prefix=f"bench-resume-{name}-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [str(python), str(Path(__file__)), "--peer-run", name, "--peer-out", str(out)]
        cmd += ["--peer-work", tmp, "--rounds", str(args.rounds), "--at", str(args.at)]
        cmd += ["--peer-paths", json.dumps(paths)]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run(cmd, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
        sys.stderr.write("".join(f"  [{name}] {line}\n" for line in proc.stderr.splitlines()))
        if proc.returncode != 0 or not out.exists():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": f"failed (exit {proc.returncode}): {last}"}
        return dict(json.loads(out.read_text()))


def peer_main(name: str, paths: list[str], work: str, rounds: int, at: float) -> dict[str, Any]:
    """Inside the peer's venv: convert ``paths`` to the peer's format and measure it."""
    all_keys = {key for path in paths for key, _, _ in tar_samples(path)}
    total_bytes = sum(os.path.getsize(p) for p in paths)
    out_dir = os.path.join(work, "converted")
    t0 = time.perf_counter()
    if name == "streaming":
        build = _streaming(paths, out_dir, work, total_bytes // len(paths))
    else:
        build = _litdata(paths, out_dir, total_bytes // len(paths))
    conversion = time.perf_counter() - t0
    log(f"{name}: converted {len(all_keys)} samples in {conversion:.1f} s")
    result = measure(name, build, lambda b: list(b["key"]), all_keys, rounds, at)
    result["conversion_s"] = conversion
    return result


def _streaming(paths: list[str], out_dir: str, work: str, shard_bytes: int) -> Callable[[], Any]:
    from streaming import MDSWriter, StreamingDataLoader, StreamingDataset

    columns = {"key": "str", "jpg": "bytes", "cls": "int"}
    with MDSWriter(out=out_dir, columns=columns, size_limit=shard_bytes) as writer:
        for path in paths:
            for key, jpg, cls in tar_samples(path):
                writer.write({"key": key, "jpg": jpg, "cls": cls})
    decode = decoder()

    class Decoded(StreamingDataset):  # type: ignore[misc]
        def __getitem__(self, index: int) -> dict[str, Any]:
            sample = super().__getitem__(index)
            return {"key": sample["key"], "jpg": decode(sample["jpg"]), "cls": sample["cls"]}

    def build() -> Any:
        # Streaming keeps one process-wide registry of datasets per local dir: clear it
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        dataset = Decoded(local=out_dir, shuffle=True, shuffle_seed=SEED, batch_size=BATCH)
        return StreamingDataLoader(dataset, batch_size=BATCH, num_workers=WORKERS)

    return build


def _litdata(paths: list[str], out_dir: str, shard_bytes: int) -> Callable[[], Any]:
    from litdata import StreamingDataLoader, StreamingDataset, optimize

    optimize(
        fn=_litdata_samples,
        inputs=paths,
        output_dir=out_dir,
        chunk_bytes=shard_bytes,
        num_workers=1,
        mode="overwrite",
    )
    decode = decoder()

    class Decoded(StreamingDataset):  # type: ignore[misc]
        def __getitem__(self, index: Any) -> dict[str, Any]:
            sample = super().__getitem__(index)
            return {"key": sample["key"], "jpg": decode(sample["jpg"]), "cls": sample["cls"]}

    def build() -> Any:
        dataset = Decoded(out_dir, shuffle=True, seed=SEED)
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


def _row(backend: str, lib: str, r: dict[str, Any]) -> str:
    if "error" in r:
        return f"| {backend} | {lib} | {r['error']} | | | | |"
    conv = f"{r['conversion_s']:.1f}" if r.get("conversion_s") is not None else "none"
    exact = "yes" if r["exact"] else f"NO ({r['delivered_after']} of {r['expected_after']})"
    return (
        f"| {backend} | {lib} | {r['fresh_first_batch_s']:.2f} | {r['resume_first_batch_s']:.2f}"
        f" | {r['ratio']:.2f}x | {r['state_bytes']:,} | {conv} | {exact} |"
    )


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, make the data, measure every backend and library, print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--shard-mb", type=float, default=100.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--at", type=float, default=0.9, help="fraction of the epoch delivered")
    parser.add_argument("--shuffle-buffer", type=int, default=1000)
    parser.add_argument("--backends", default="local,s3")
    parser.add_argument("--peers", action="store_true", help="also Streaming and LitData")
    parser.add_argument("--peer-cache", default=None, help="venvs (default bench_data/peers)")
    parser.add_argument("--data-dir", default=str(ROOT / "bench_data"))
    parser.add_argument("--json", default=None, help="write all results here")
    parser.add_argument("--peer-run", help=argparse.SUPPRESS)
    parser.add_argument("--peer-out", help=argparse.SUPPRESS)
    parser.add_argument("--peer-work", help=argparse.SUPPRESS)
    parser.add_argument("--peer-paths", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.peer_run:  # inside a peer's venv
        result = peer_main(
            args.peer_run, json.loads(args.peer_paths), args.peer_work, args.rounds, args.at
        )
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
    results: dict[str, dict[str, Any]] = {}
    if "local" in backends:
        build = wds_builder(paths, None, args.shuffle_buffer)
        results["local"] = {
            "wds_cloud": measure("wds_cloud local", build, _keys, all_keys, args.rounds, args.at)
        }
    if "s3" in backends:
        results["s3"] = {"wds_cloud": _measure_s3(paths, all_keys, ds.nbytes, args)}
    if args.peers:
        cache = Path(args.peer_cache or os.path.join(args.data_dir, "peers"))
        for name, label in (("streaming", "MosaicML Streaming"), ("litdata", "LitData")):
            got = run_peer(name, cache, paths, args)
            if "error" in got:
                print(f"{label}: {got['error']}", flush=True)
            results.setdefault("local", {})[label] = got
        for label in ("MosaicML Streaming", "LitData"):
            results.setdefault("s3", {})[label] = {
                "error": "not measured on S3 (local disk only, see the module docstring)"
            }

    print(
        f"\n{args.shards} shards x {per_shard} samples (256x256 JPEG ~27 KB + .cls), "
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
    s3 = results.get("s3", {}).get("wds_cloud", {})
    if s3.get("extra") is not None:
        print(
            f"\nS3 bytes sent by SeaweedFS during the resumed run (rest of the epoch): "
            f"{s3['extra'] / 1e6:.1f} MB of {ds.nbytes / 1e6:.1f} MB in the data set "
            f"({s3['extra'] / ds.nbytes:.1%}; {1 - s3['delivered_before'] / len(all_keys):.1%} "
            "of the samples were left)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    failed = [
        f"{b}/{lib}" for b, libs in results.items() for lib, r in libs.items() if not r.get("exact")
    ]
    wds_failed = [f for f in failed if f.endswith("/wds_cloud")]
    if wds_failed:
        print(f"\nFAIL: resumed run not exact for {', '.join(wds_failed)}")
        return 1
    return 0


def _measure_s3(
    paths: list[str], all_keys: set[str], nbytes: int, args: argparse.Namespace
) -> dict[str, Any]:
    import boto3

    from tests.support.seaweed import SeaweedServer
    from wds_cloud.openers.registry import OpenerRegistry
    from wds_cloud.openers.s3 import S3Opener

    with (
        tempfile.TemporaryDirectory(prefix="bench-resume-") as tmp,
        SeaweedServer(Path(tmp) / "weed", access_key=KEY_ID, secret_key=SECRET) as server,
    ):
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
            key = f"train/{os.path.basename(path)}"
            client.upload_file(path, BUCKET, key)
            urls.append(f"s3://{BUCKET}/{key}")
        registry = OpenerRegistry()
        opener = S3Opener(
            endpoint_url=endpoint, access_key_id=KEY_ID, secret_access_key=SECRET, region=REGION
        )
        registry.register("s3", opener, override=True)
        build = wds_builder(urls, registry, args.shuffle_buffer)
        return measure("wds_cloud s3", build, _keys, all_keys, args.rounds, args.at)


if __name__ == "__main__":
    sys.exit(main())
