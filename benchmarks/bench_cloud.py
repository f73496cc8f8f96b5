"""End to end from storage: decoded 256x256 JPEGs through a 2-worker loader, local disk and S3.

Run from the repository root (it starts its own SeaweedFS on 127.0.0.1, like bench_s3.py)::

    python benchmarks/bench_cloud.py                      # 20,000 JPEGs (~28 KB), 20 shards
    python benchmarks/bench_cloud.py --samples 4000       # quicker
    python benchmarks/bench_cloud.py --peers              # + LitData and MosaicML Streaming
    python benchmarks/bench_cloud.py --latency            # the high-latency table instead
    python benchmarks/bench_cloud.py --latency --big-mib 64

**Loader table.** Every cell decodes each JPEG to uint8 RGB and yields batches of 64 from a
2-worker ``DataLoader``; one fresh interpreter per cell, libraries interleaved, the median of
``--rounds`` passes. Rows: wds_cloud (``WebDataset(urls).decode("rgb8").to_tuple("jpg", "cls")
.batched(64)`` in a ``WebLoader``), the same with ``WDS_CLOUD_READAHEAD=0`` (no read-ahead, no
next-shard opening), webdataset 1.0.2 (the same pipeline; on S3 each shard is ``pipe:aws s3 cp
URL -``). With ``--peers`` LitData and MosaicML Streaming are installed from PyPI into virtual
environments of their own under ``--cache`` (torch, numpy and PIL are taken from this
environment through a ``.pth`` file rather than downloaded again), the data is converted to
their formats (the time is reported) and read by their own loaders with PIL decoding (LitData
without ``obstore``, which refuses the plain-http loopback endpoint; it then reads with
boto3). A peer that cannot be installed or run prints one line and is left out. Peak memory
is the largest sum of RSS over the cell's process tree (the interpreter, its loader workers
and the ``aws`` subprocesses), sampled every 50 ms.

**Latency table** (``--latency``): ``benchmarks/bench_latency.py`` (one shard of ``--big-mib``
MiB through S3, HTTP, GCS and AIStore behind :mod:`latency_proxy`: 20 ms per request, 50 MB/s
per connection; single stream vs parallel ranged reads, a ``PARTSxMiB`` grid, and webdataset's
``pipe:aws s3 cp``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _data  # benchmarks/ is not a package

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KEY_ID = "benchkey"
SECRET = "benchsecret"
REGION = "us-east-1"
BUCKET = "bench"
PEERS = {"litdata": "litdata==0.2.76", "streaming": "mosaicml-streaming==0.13.0"}
BATCH = 64


# -- measuring one cell in a fresh interpreter ----------------------------------------------------


def run_cell(python: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``python bench_cloud.py --worker ...``; return its JSON line plus ``peak_rss``."""
    cmd = [python, os.path.abspath(__file__), "--worker", *args]
    return _data.run_json_worker(cmd, env, ROOT, " ".join(args[:2]))


# -- worker side: one pass of one loader ---------------------------------------------------------


def _timed(batches: Any) -> dict[str, Any]:
    n = 0
    t0 = time.perf_counter()
    for batch in batches:
        n += len(batch[1])
    return {"samples": n, "seconds": time.perf_counter() - t0}


def worker_wds(lib: str, urls: list[str]) -> dict[str, Any]:
    """wds_cloud or webdataset: decode to uint8 RGB, batches of 64, 2 loader workers."""
    if lib == "webdataset":
        import webdataset as wds
    else:
        import wds_cloud as wds  # type: ignore[no-redef]
    ds = wds.WebDataset(urls, shardshuffle=False, empty_check=False)
    ds = ds.decode("rgb8").to_tuple("jpg", "cls").batched(BATCH)
    return _timed(wds.WebLoader(ds, batch_size=None, num_workers=2))


def _pil_rgb(data: bytes) -> Any:
    import io

    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))


def _collate(items: list[Any]) -> tuple[Any, Any]:
    import numpy as np

    return np.stack([i[0] for i in items]), [i[1] for i in items]


def worker_litdata(where: str, source: str, endpoint: str | None) -> dict[str, Any]:
    """LitData's StreamingDataset + StreamingDataLoader over its optimized chunks."""
    import litdata

    class Decoded(litdata.StreamingDataset):  # type: ignore[misc]
        def __getitem__(self, index: Any) -> Any:
            item = super().__getitem__(index)
            return _pil_rgb(item["jpg"]), item["cls"]

    options = {}
    if where == "s3":
        options["storage_options"] = {
            "endpoint_url": endpoint,
            "aws_access_key_id": KEY_ID,
            "aws_secret_access_key": SECRET,
        }
    ds = Decoded(source, **options)
    loader = litdata.StreamingDataLoader(ds, batch_size=BATCH, num_workers=2, collate_fn=_collate)
    return _timed(loader)


def worker_streaming(where: str, source: str, cache: str) -> dict[str, Any]:
    """MosaicML Streaming's StreamingDataset (MDS) in a torch DataLoader."""
    import streaming
    from torch.utils.data import DataLoader

    class Decoded(streaming.StreamingDataset):  # type: ignore[misc]
        def __getitem__(self, index: int) -> Any:
            item = super().__getitem__(index)
            return _pil_rgb(item["jpg"]), item["cls"]

    if where == "s3":
        shutil.rmtree(cache, ignore_errors=True)
        ds = Decoded(remote=source, local=cache, batch_size=BATCH, shuffle=False)
    else:
        ds = Decoded(local=source, batch_size=BATCH, shuffle=False)
    loader = DataLoader(ds, batch_size=BATCH, num_workers=2, collate_fn=_collate)
    result = _timed(loader)
    if where == "s3":
        shutil.rmtree(cache, ignore_errors=True)
    return result


# -- peers: install, convert ---------------------------------------------------------------------


def peer_python(name: str, cache: str) -> str | None:
    """The interpreter of ``name``'s virtual environment, created on first use; None if the
    install failed (one line printed)."""
    venv = os.path.join(cache, name)
    python = os.path.join(venv, "bin", "python")
    marker = os.path.join(venv, ".installed")
    if os.path.exists(marker):
        return python
    try:
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True, capture_output=True)
        # torch, numpy, PIL, boto3 of this environment, behind the venv's own packages.
        site = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        ours = [p for p in sys.path if p.endswith("site-packages")]
        Path(site, "_bench_host.pth").write_text("\n".join(ours) + "\n")
        subprocess.run(
            [python, "-m", "pip", "install", "-q", PEERS[name]],
            check=True,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if name == "litdata":
            # LitData downloads chunks with obstore when it is installed, and obstore refuses
            # plain-http endpoints such as the loopback SeaweedFS; without it LitData uses
            # its boto3 client (its documented fallback).
            subprocess.run(
                [python, "-m", "pip", "uninstall", "-y", "-q", "obstore"],
                check=True,
                capture_output=True,
            )
        Path(marker).write_text(PEERS[name])
    except (subprocess.SubprocessError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        print(
            f"{name}: cannot install {PEERS[name]} ({detail.strip().splitlines()[-1:]}); left out"
        )
        return None
    return python


_CONVERT = r"""
import json, sys, tarfile


def samples(path):
    with tarfile.open(path) as tar:
        current = {}
        for m in tar:
            key, _, ext = m.name.partition(".")
            if current and current["__key__"] != key:
                yield current
                current = {}
            current["__key__"] = key
            current[ext] = tar.extractfile(m).read()
        if current:
            yield current


def litdata_items(path):  # litdata's optimize() calls it in its worker processes
    for s in samples(path):
        yield {"jpg": s["jpg"], "cls": int(s["cls"])}


if __name__ == "__main__":
    name, out, paths = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    if name == "litdata":
        import litdata

        litdata.optimize(fn=litdata_items, inputs=paths, output_dir=out, chunk_bytes="64MB",
                         num_workers=1, mode="overwrite")
    else:
        from streaming import MDSWriter

        with MDSWriter(out=out, columns={"jpg": "bytes", "cls": "int"}, size_limit="64mb") as w:
            for path in paths:
                for s in samples(path):
                    w.write({"jpg": s["jpg"], "cls": int(s["cls"])})
"""


def convert(python: str, name: str, paths: list[str], out: str) -> float:
    """Convert the tar shards to ``name``'s format in ``out``; seconds taken."""
    shutil.rmtree(out, ignore_errors=True)
    script = os.path.join(os.path.dirname(out), f"convert_{name}.py")
    Path(script).write_text(_CONVERT)
    t0 = time.perf_counter()
    subprocess.run(
        [python, script, name, out, json.dumps(paths)],
        check=True,
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
    )
    return time.perf_counter() - t0


def cache_arg(name: str, tmp: str) -> str:
    """The last worker argument of a peer's S3 cell: LitData's endpoint, Streaming's cache."""
    return os.path.join(tmp, f"{name}-cache") if name == "streaming" else ""


# -- SeaweedFS -----------------------------------------------------------------------------------


def s3_env(endpoint: str) -> dict[str, str]:
    """Environment of the cells reading S3 (credentials, endpoint, this venv's ``aws``)."""
    return dict(
        os.environ,
        AWS_ACCESS_KEY_ID=KEY_ID,
        AWS_SECRET_ACCESS_KEY=SECRET,
        AWS_DEFAULT_REGION=REGION,
        AWS_REGION=REGION,
        AWS_ENDPOINT_URL=endpoint,
        S3_ENDPOINT_URL=endpoint,  # MosaicML Streaming
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )


def s3_client(endpoint: str) -> Any:
    from tests.support.seaweed import boto3_client, create_bucket

    client = boto3_client(endpoint, access_key=KEY_ID, secret_key=SECRET)
    create_bucket(client, BUCKET)
    return client


def upload_tree(client: Any, local: str, prefix: str) -> None:
    for base, _, files in os.walk(local):
        for name in files:
            path = os.path.join(base, name)
            client.upload_file(path, BUCKET, f"{prefix}/{os.path.relpath(path, local)}")


# -- the loader table ----------------------------------------------------------------------------


def loader_table(args: argparse.Namespace) -> None:
    from tests.support.seaweed import SeaweedServer

    shards = max(2, args.samples // 1000)
    spec = _data.DataSpec("jpeg256", shards, args.samples // shards)
    data = _data.ensure(spec, args.data, log=lambda m: print(m, file=sys.stderr))
    paths = list(data.paths)
    _data.warm(paths)
    mb = data.nbytes / data.samples / 1000
    here = dict(os.environ, PYTHONPATH=ROOT)
    peers: dict[str, str] = {}
    convert_s: dict[str, float] = {}
    with (
        tempfile.TemporaryDirectory(prefix="bench-cloud-") as tmp,
        SeaweedServer(Path(tmp) / "weed", access_key=KEY_ID, secret_key=SECRET) as server,
    ):
        endpoint = server.endpoint_url
        client = s3_client(endpoint)
        for path in paths:
            client.upload_file(path, BUCKET, f"tar/{os.path.basename(path)}")
        s3_urls = [f"s3://{BUCKET}/tar/{os.path.basename(p)}" for p in paths]
        pipes = [
            f"pipe:aws s3 cp {u} - --endpoint-url {endpoint} --only-show-errors" for u in s3_urls
        ]
        env_s3 = s3_env(endpoint)
        cells: dict[tuple[str, str], tuple[str, list[str], dict[str, str]]] = {}
        rows = {"wds_cloud": "wds_cloud", "readahead-off": "wds_cloud (read-ahead off)"}
        rows["webdataset"] = "webdataset"
        for key, lib in rows.items():
            if key not in args.rows.split(","):
                continue
            env = dict(here)
            if lib == "wds_cloud (read-ahead off)":
                env["WDS_CLOUD_READAHEAD"] = "0"
            wlib = "webdataset" if lib == "webdataset" else "wds_cloud"
            cells[lib, "local"] = (sys.executable, ["wds", wlib, json.dumps(paths)], env)
            urls = pipes if lib == "webdataset" else s3_urls
            cells[lib, "s3"] = (
                sys.executable,
                ["wds", wlib, json.dumps(urls)],
                {**env_s3, **{k: v for k, v in env.items() if k.startswith("WDS_CLOUD")}},
            )
        if args.peers:
            os.makedirs(args.cache, exist_ok=True)
            for name in PEERS:
                python = peer_python(name, args.cache)
                if python is None:
                    continue
                out = os.path.join(tmp, name)
                try:
                    convert_s[name] = convert(python, name, paths, out)
                except subprocess.CalledProcessError as exc:
                    print(
                        f"{name}: conversion failed ({exc.stderr.strip().splitlines()[-1:]}); left out"
                    )
                    continue
                upload_tree(client, out, name)
                peers[name] = python
                row = f"{name} (converted in {convert_s[name]:.0f} s)"
                cells[row, "local"] = (python, [name, "local", out, ""], os.environ.copy())
                cells[row, "s3"] = (
                    python,
                    [name, "s3", f"s3://{BUCKET}/{name}", cache_arg(name, tmp)],
                    env_s3,
                )
        results: dict[tuple[str, str], list[dict[str, Any]]] = {c: [] for c in cells}
        failed: dict[tuple[str, str], str] = {}
        for rnd in range(args.rounds):
            order = list(cells)
            order = order[rnd % len(order) :] + order[: rnd % len(order)]
            for cell in order:
                if cell in failed:
                    continue
                python, wargs, env = cells[cell]
                try:
                    got = run_cell(python, wargs, env)
                except RuntimeError as exc:
                    failed[cell] = str(exc).strip().splitlines()[-1]
                    print(f"{cell[0]} {cell[1]}: failed ({failed[cell]}); left out")
                    continue
                if got["samples"] != data.samples:
                    failed[cell] = f"read {got['samples']} samples of {data.samples}"
                    print(f"{cell[0]} {cell[1]}: {failed[cell]}; left out")
                    continue
                results[cell].append(got)
                print(
                    f"round {rnd + 1} {cell[0]} {cell[1]}: "
                    f"{got['samples'] / got['seconds']:.0f} samples/s",
                    file=sys.stderr,
                )

    def cell_text(cell: tuple[str, str]) -> str:
        rows = results.get(cell) or []
        if not rows:
            return "failed" if cell in failed else "-"
        rate = statistics.median(r["samples"] / r["seconds"] for r in rows)
        peak = max(r["peak_rss"] for r in rows) / (1 << 20)
        return f"{rate:,.0f} ({peak:,.0f} MiB)"

    print(
        f"\n{data.samples} JPEGs 256x256 (~{mb:.0f} KB), {shards} shards, decode to uint8 RGB, "
        f"batch {BATCH}, 2 workers, median of {args.rounds} rounds, {os.cpu_count()} CPUs. "
        "Cells: samples/s (peak RSS of the process tree).\n"
    )
    print("| | local disk | S3 (SeaweedFS on loopback) |")
    print("|---|---:|---:|")
    for row in dict.fromkeys(r for r, _ in cells):
        print(f"| {row} | {cell_text((row, 'local'))} | {cell_text((row, 's3'))} |")


# -- the latency table (benchmarks/bench_latency.py) ---------------------------------------------


def latency_table(args: argparse.Namespace) -> None:
    """``--latency``: :mod:`bench_latency` with this command line's settings."""
    sys.path.insert(0, HERE)
    from bench_latency import main as latency_main

    latency_main(
        [
            f"--big-mib={args.big_mib}",
            f"--rounds={args.rounds}",
            f"--delay-ms={args.delay_ms}",
            f"--rate-mb={args.rate_mb}",
            f"--grid={args.grid}",
        ]
    )


# -- command line --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """Parse arguments; run one table (or, with ``--worker``, one cell)."""
    argv = sys.argv[1:] if argv is None else argv
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)  # tests.support (the servers), wds_cloud from this checkout
    if argv[:1] == ["--worker"]:
        kind, rest = argv[1], argv[2:]
        if kind == "wds":
            result = worker_wds(rest[0], json.loads(rest[1]))
        elif kind == "litdata":
            result = worker_litdata(rest[0], rest[1], os.environ.get("AWS_ENDPOINT_URL"))
        else:
            result = worker_streaming(rest[0], rest[1], rest[2])
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=20_000, help="JPEGs (1,000 per shard)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peers", action="store_true", help="add LitData and MosaicML Streaming")
    parser.add_argument("--cache", default=os.path.expanduser("~/.cache/wds_cloud-bench-peers"))
    parser.add_argument("--data", default=os.path.join(ROOT, "bench_data"))
    parser.add_argument(
        "--rows",
        default="wds_cloud,readahead-off,webdataset",
        help="loader table: rows besides the peers",
    )
    parser.add_argument("--latency", action="store_true", help="the high-latency table")
    parser.add_argument("--big-mib", type=int, default=256, help="latency table: shard size")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--rate-mb", type=float, default=50.0, help="MB/s per connection")
    parser.add_argument(
        "--grid", default="4,8,16x4,8,16", help="latency table: PARTS,..xMiB,.. ranged-read grid"
    )
    args = parser.parse_args(argv)
    if args.latency:
        latency_table(args)
    else:
        loader_table(args)


if __name__ == "__main__":
    main()
