"""Where coalescing pays: the gap threshold of batch reads, measured on S3 (SeaweedFS).

Run from the repository root (it writes its own shards, starts SeaweedFS on 127.0.0.1 and,
for the second half of each table, the latency proxy of ``benchmarks/latency_proxy.py``)::

    python -m benchmarks.bench_coalesce                   # gaps 0 .. 1 MiB, 5 rounds
    python -m benchmarks.bench_coalesce --rounds 1 --gaps 0,65536 --quick

Two tables, each on the server directly and behind the proxy (20 ms per request, 50 MB/s per
connection), medians over interleaved rounds:

1. **One ranged GET** of 4 KiB .. 4 MiB: the time of a request as latency + size / bandwidth;
   ``latency x bandwidth`` is the gap at which reading the bytes in between costs as much as
   one more request made alone.
2. **A batch of 64 samples of 16 KiB, separated by gaps of G bytes**, read by
   ``IndexedWebDataset.get_batch`` with coalescing (``coalesce_gap`` above G: one request
   spanning the 64 samples and the 63 gaps) and without (``coalesce_gap=-1``: 64 ranged GETs,
   32 in flight): the G where the two cross is the threshold that matters for batches, whose
   separate requests overlap. Also the batch read one ``ds[i]`` at a time (today's path).

Client and server share the machine's cores: compare within a run.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEY_ID = "benchkey"
SECRET = "benchsecret"
REGION = "us-east-1"
BUCKET = "bench-coalesce"
SAMPLE = 16 << 10
BATCH = 64


def gapped_shard(gap: int) -> bytes:
    """``BATCH`` samples of ``SAMPLE`` bytes, each followed by a filler sample of ``gap``
    bytes (the filler's own 512-byte header adds to the gap; gap 0 writes no filler)."""
    from wds_cloud.writing.tarwriter import TarWriter

    out = io.BytesIO()
    payload = os.urandom(SAMPLE)
    with TarWriter(out) as sink:
        for i in range(BATCH):
            sink.write({"__key__": f"s{i:04d}", "bin": payload})
            if gap:
                sink.write({"__key__": f"f{i:04d}", "pad": bytes(gap)})
    return out.getvalue()


def median_seconds(run: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, write shards, start SeaweedFS (and the proxy), print both tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--gaps", default="0,4096,16384,65536,262144,1048576")
    parser.add_argument("--quick", action="store_true", help="no proxy half")
    args = parser.parse_args(argv)
    gaps = [int(g) for g in args.gaps.split(",")]

    from benchmarks.latency_proxy import LatencyProxy
    from tests.support.seaweed import SeaweedServer, boto3_client, create_bucket
    from wds_cloud.index.build import build_index
    from wds_cloud.index.indexed import IndexedWebDataset
    from wds_cloud.openers.registry import OpenerRegistry
    from wds_cloud.openers.s3 import S3Opener

    def registry(endpoint: str) -> OpenerRegistry:
        reg = OpenerRegistry()
        opener = S3Opener(
            endpoint_url=endpoint, access_key_id=KEY_ID, secret_access_key=SECRET, region=REGION
        )
        reg.register("s3", opener, override=True)
        return reg

    with (
        tempfile.TemporaryDirectory(prefix="bench-coalesce-") as tmp,
        SeaweedServer(Path(tmp) / "weed", access_key=KEY_ID, secret_key=SECRET) as server,
    ):
        client = boto3_client(server.endpoint_url, access_key=KEY_ID, secret_key=SECRET)
        create_bucket(client, BUCKET)
        client.put_object(Bucket=BUCKET, Key="big.bin", Body=os.urandom(8 << 20))
        urls = []
        for gap in gaps:
            key = f"gap-{gap}.tar"
            client.put_object(Bucket=BUCKET, Key=key, Body=gapped_shard(gap))
            urls.append(f"s3://{BUCKET}/{key}")
        build_index(urls, json=False, registry=registry(server.endpoint_url))
        where = [("seaweedfs", None)] if args.quick else [("seaweedfs", None), ("proxy", 0.02)]
        print(f"{os.cpu_count()} CPUs, {args.rounds} rounds, samples of {SAMPLE} B\n")
        for name, delay in where:
            if delay is None:
                endpoint, proxy = server.endpoint_url, None
            else:
                port = int(server.endpoint_url.rsplit(":", 1)[1])
                proxy = LatencyProxy(port, delay=delay, rate=50e6).start()
                endpoint = proxy.url
            try:
                report(name, registry(endpoint), urls, gaps, args.rounds, IndexedWebDataset)
            finally:
                if proxy is not None:
                    proxy.stop()


def report(
    name: str, reg: Any, urls: list[str], gaps: list[int], rounds: int, indexed: Any
) -> None:
    """Both tables for one endpoint."""
    big = f"s3://{BUCKET}/big.bin"
    reg.read_range(big, 0, 1)  # connect
    sizes = [4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20]
    print(f"## {name}: one ranged GET\n\n| bytes | ms |\n|---:|---:|")
    ms = []
    for size in sizes:
        ms.append(1000 * median_seconds(lambda s=size: reg.read_range(big, 0, s), rounds))
        print(f"| {size} | {ms[-1]:.2f} |")
    slope = (ms[-1] - ms[0]) / (sizes[-1] - sizes[0])  # ms per byte
    latency = ms[0] - slope * sizes[0]
    print(
        f"\nlatency {latency:.2f} ms, bandwidth {1 / slope / 1e3:.0f} MB/s, "
        f"latency x bandwidth = {latency / slope / 1024:.0f} KiB\n"
    )
    print(
        f"## {name}: {BATCH} samples of {SAMPLE // 1024} KiB with gaps of G bytes\n\n"
        "| G (bytes) | coalesced ms (requests) | 64 GETs, 32 in flight, ms | one ds[i] at a time, ms |"
        "\n|---:|---:|---:|---:|"
    )
    for gap, url in zip(gaps, urls, strict=True):
        merged = indexed([url], registry=reg, batch={"coalesce_gap": 1 << 30, "max_span": 1 << 30})
        apart = indexed([url], registry=reg, batch={"coalesce_gap": -1})
        step = 2 if gap else 1
        batch = list(range(0, BATCH * step, step))
        assert merged.get_batch(batch) == apart.get_batch(batch)
        t_merged = median_seconds(lambda d=merged, b=batch: d.get_batch(b), rounds)
        t_apart = median_seconds(lambda d=apart, b=batch: d.get_batch(b), rounds)
        t_single = median_seconds(lambda d=apart, b=batch: [d[i] for i in b], max(1, rounds // 2))
        print(
            f"| {gap} | {1000 * t_merged:.1f} (1) | {1000 * t_apart:.1f} | {1000 * t_single:.1f} |"
        )
    print()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
