"""One big shard over a high-latency link, through every backend: single stream vs parallel
ranged reads (``prefetch`` parts x ``prefetch_chunk`` bytes), and webdataset's ``pipe:aws``.

Run from the repository root (it starts SeaweedFS, fake-gcs-server, an HTTP file server and the
AIStore emulator on 127.0.0.1, each behind :mod:`latency_proxy`)::

    python benchmarks/bench_latency.py                        # 256 MiB, grid 4/8/16 x 4/8/16 MiB
    python benchmarks/bench_latency.py --big-mib 64 --rounds 1 --backends s3,http
    python benchmarks/bench_cloud.py --latency                # the same table

The servers and the proxies (20 ms per request, 50 MB/s per connection: a cross-region link)
run in a child process, so the reader measured here shares no interpreter lock with them. One
shard of ``--big-mib`` MiB (4 MiB samples) is read and parsed into samples (no decoding) by
each cell; cells are interleaved round by round and MB/s is MiB of shard per second, the median
of ``--rounds``. "x single" compares with the same backend's single stream, "x pipe:aws" with
webdataset's ``pipe:aws s3 cp`` on the S3 server (when the ``aws`` command exists). "bound" is
the memory a parallel stream may hold, (parts + 1) x part size.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KEY_ID = "benchkey"
SECRET = "benchsecret"
REGION = "us-east-1"
BUCKET = "bench"
NAME = "big/shard.tar"
BACKENDS = ("s3", "http", "gcs", "ais")


# -- the serving side (a child process) ----------------------------------------------------------


def serve(
    conn: Connection, shard: str, tmp: str, delay: float, rate: float, backends: list[str]
) -> None:
    """Start the servers and their proxies, store ``shard`` on each, send the endpoints, and
    keep serving until the parent sends anything."""
    for path in (ROOT, HERE):
        if path not in sys.path:
            sys.path.insert(0, path)
    from contextlib import ExitStack

    from latency_proxy import LatencyProxy

    data = Path(shard).read_bytes()
    endpoints: dict[str, str] = {}
    with ExitStack() as stack:

        def proxy(port: int) -> str:
            return stack.enter_context(LatencyProxy(port, delay=delay, rate=rate)).url

        if "s3" in backends:
            from tests.support.seaweed import SeaweedServer, boto3_client, create_bucket

            weed = stack.enter_context(
                SeaweedServer(Path(tmp) / "weed", access_key=KEY_ID, secret_key=SECRET)
            )
            client = boto3_client(weed.endpoint_url, access_key=KEY_ID, secret_key=SECRET)
            create_bucket(client, BUCKET)
            client.put_object(Bucket=BUCKET, Key=NAME, Body=data)
            endpoints["s3"] = proxy(weed.ports["s3.port"])
        if "http" in backends:
            from tests.support.http_server import HttpFileServer

            www = Path(tmp) / "www"
            (www / "big").mkdir(parents=True)
            (www / NAME).write_bytes(data)
            server = stack.enter_context(HttpFileServer(www))
            endpoints["http"] = proxy(server.port)
        if "gcs" in backends:
            from tests.support.fake_gcs import FakeGcsServer

            gcs = FakeGcsServer(Path(tmp) / "fake-gcs.log").start()
            stack.callback(gcs.stop)
            gcs.client().create_bucket(BUCKET).blob(NAME).upload_from_string(data)
            endpoints["gcs"] = proxy(gcs.port)
        if "ais" in backends:
            from tests.emulators.ais.server import AisEmulator

            ais = stack.enter_context(AisEmulator())
            ais.store.create_bucket(BUCKET)
            ais.store.put_object(BUCKET, NAME, data)
            endpoints["ais"] = proxy(ais.port)
        conn.send(endpoints)
        conn.recv()


# -- the readers ---------------------------------------------------------------------------------


def opener_for(backend: str, endpoint: str, **overrides: Any) -> tuple[Any, str]:
    """``(opener, url)`` of the big shard on ``backend`` behind ``endpoint``."""
    if backend == "s3":
        from wds_cloud.openers.s3 import S3Opener

        creds = {"access_key_id": KEY_ID, "secret_access_key": SECRET, "region": REGION}
        return S3Opener(endpoint_url=endpoint, **creds, **overrides), f"s3://{BUCKET}/{NAME}"
    if backend == "http":
        from wds_cloud.openers.http import HttpOpener

        return HttpOpener(**overrides), f"{endpoint}/{NAME}"
    if backend == "gcs":
        from wds_cloud.openers.gcs import GcsOpener

        return GcsOpener(endpoint=endpoint, **overrides), f"gs://{BUCKET}/{NAME}"
    from wds_cloud.openers.ais import AisOpener

    return AisOpener(endpoint=endpoint, **overrides), f"ais://{BUCKET}/{NAME}"


def payload(sample: dict[str, Any]) -> int:
    return sum(len(v) for k, v in sample.items() if isinstance(v, bytes) and k[:2] != "__")


def reader(opener: Any, url: str) -> Callable[[], int]:
    """A function that reads and parses the shard once through ``opener``; returns payload bytes."""
    from wds_cloud.core.samples import tar_samples

    def read() -> int:
        with opener.open(url) as stream:
            return sum(payload(s) for s in tar_samples(stream, url))

    return read


def aws_pipe(endpoint: str) -> Callable[[], int]:
    """webdataset 1.0.2 reading ``pipe:aws s3 cp`` from the S3 server."""

    def read() -> int:
        import webdataset

        env = {
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_DEFAULT_REGION": REGION,
        }
        os.environ.update(env)
        url = f"pipe:aws s3 cp s3://{BUCKET}/{NAME} - --endpoint-url {endpoint} --only-show-errors"
        ds = webdataset.WebDataset([url], shardshuffle=False, empty_check=False)
        return sum(payload(s) for s in ds)

    return read


def cells(
    endpoints: dict[str, str], grid: list[tuple[int, int]]
) -> dict[tuple[str, str], Callable[[], int]]:
    """``(backend, config) -> read`` for every cell of the table."""
    table: dict[tuple[str, str], Callable[[], int]] = {}
    for backend, endpoint in endpoints.items():
        table[(backend, "single stream")] = reader(*opener_for(backend, endpoint))
        for parts, mib in grid:
            opener, url = opener_for(backend, endpoint, prefetch=parts, prefetch_chunk=mib << 20)
            table[(backend, f"{parts} x {mib} MiB")] = reader(opener, url)
    if "s3" in endpoints and shutil.which("aws"):
        table[("s3", "webdataset pipe:aws s3 cp")] = aws_pipe(endpoints["s3"])
    return table


# -- the table -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, start the servers, run the cells, print the table."""
    for path in (ROOT, HERE):
        if path not in sys.path:
            sys.path.insert(0, path)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--big-mib", type=int, default=256, help="shard size in MiB")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--delay-ms", type=float, default=20.0, help="added per request")
    parser.add_argument("--rate-mb", type=float, default=50.0, help="MB/s per connection")
    parser.add_argument("--grid", default="4,8,16x4,8,16", help="PARTSxMiB lists")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    args = parser.parse_args(argv)
    from bench_s3 import make_shard

    parts_text, _, mib_text = args.grid.partition("x")
    grid = [(int(p), int(m)) for p in parts_text.split(",") for m in mib_text.split(",")]
    backends = [b for b in args.backends.split(",") if b]
    data = make_shard(0, args.big_mib << 20, 4 << 20)
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp:
        shard = os.path.join(tmp, "shard.tar")
        Path(shard).write_bytes(data)
        ours, theirs = ctx.Pipe()
        child = ctx.Process(
            target=serve,
            args=(theirs, shard, tmp, args.delay_ms / 1000, args.rate_mb * 1e6, backends),
        )
        child.start()
        try:
            endpoints: dict[str, str] = ours.recv()
            table = cells(endpoints, grid)
            speeds: dict[tuple[str, str], list[float]] = {cell: [] for cell in table}
            seen: dict[tuple[str, str], int] = {}
            for rnd in range(args.rounds):
                for cell, read in table.items():
                    t0 = time.perf_counter()
                    got = read()
                    wall = time.perf_counter() - t0
                    if seen.setdefault(cell, got) != got:
                        raise SystemExit(f"{cell}: {got} payload bytes, expected {seen[cell]}")
                    speeds[cell].append(len(data) / (1 << 20) / wall)
                    print(f"round {rnd + 1} {cell}: {speeds[cell][-1]:.1f} MB/s", file=sys.stderr)
        finally:
            ours.send("stop")
            child.join(60)
    if len(set(seen.values())) != 1:
        raise SystemExit(f"readers disagree on the payload: {seen}")
    print_table(args, speeds, len(data))


def print_table(
    args: argparse.Namespace, speeds: dict[tuple[str, str], list[float]], size: int
) -> None:
    median = {cell: statistics.median(rows) for cell, rows in speeds.items()}
    pipe = median.get(("s3", "webdataset pipe:aws s3 cp"))
    load = os.getloadavg()[0]
    print(
        f"\n1 shard of {size / (1 << 20):.0f} MiB (4 MiB samples), {args.delay_ms:g} ms per "
        f"request, {args.rate_mb:g} MB/s per connection, median of {args.rounds} rounds, "
        f"{os.cpu_count()} CPUs (load average {load:.1f} at the end)\n"
    )
    print("| backend | reader | bound MiB | MB/s | x single | x pipe:aws |")
    print("|---|---|---:|---:|---:|---:|")
    for (backend, config), speed in median.items():
        single = median[(backend, "single stream")]
        bound = "-"
        if " x " in config and "MiB" in config:
            parts, _, mib = config.partition(" x ")
            bound = str((int(parts) + 1) * int(mib.split()[0]))
        versus = f"{speed / pipe:.2f}" if pipe else "-"
        print(f"| {backend} | {config} | {bound} | {speed:.1f} | {speed / single:.2f} | {versus} |")


if __name__ == "__main__":
    main()
