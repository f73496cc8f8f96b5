"""S3 read benchmark: wds_cloud vs raw boto3 vs webdataset+pipe:aws vs s3torchconnector.

Run from the repository root (one command; it starts its own SeaweedFS on 127.0.0.1, writes
deterministic shards, runs every reader interleaved for several rounds, stops the server)::

    python -m benchmarks.bench_s3                # 4 shards x 100 MiB, ~4 MiB samples, 3 rounds
    python -m benchmarks.bench_s3 --shards 2 --shard-mib 64 --rounds 2

Readers (all read every shard once per round, sequentially, in one process):

- ``wds_cloud s3:// (stream)``: ``S3Opener.open`` + ``tar_samples`` (samples built);
- ``wds_cloud s3:// (prefetch=4)``: the same with 4 parallel 8 MiB ranged GETs;
- ``boto3 get_object iter_chunks``: raw bytes, no tar parsing (the transport ceiling);
- ``webdataset 1.0.2 pipe:aws s3 cp``: ``webdataset.WebDataset("pipe:aws s3 cp ... -")``;
- ``s3torchconnector S3Reader``: ``S3IterableDataset.from_objects`` + ``read(1 MiB)``, raw
  bytes, no tar parsing.

MB/s is MiB of shard bytes per second of wall time (median over rounds). CPU s/GB is client
CPU (``getrusage`` self + waited-for children, so the ``aws`` subprocesses count and the
SeaweedFS server does not) per GiB read (median). Client and server share the machine's
cores, so the numbers show relative cost on this box, not S3's ceiling.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import resource
import statistics
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.seaweed import SeaweedServer, boto3_client, create_bucket

KEY_ID = "benchkey"
SECRET = "benchsecret"
REGION = "us-east-1"
BUCKET = "bench"


def make_shard(index: int, shard_bytes: int, sample_bytes: int) -> bytes:
    """A deterministic WebDataset tar: samples of ``sample_bytes`` (.bin) plus a .json."""
    rng = random.Random(index)
    block = rng.randbytes(1 << 20)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        i = 0
        while out.tell() < shard_bytes - sample_bytes:
            payload = (block * (sample_bytes // len(block) + 1))[:sample_bytes]
            payload = bytes([i % 256]) + payload[1:]
            for ext, data in (("bin", payload), ("json", f'{{"i": {i}}}'.encode())):
                info = tarfile.TarInfo(f"s{index:03d}/{i:06d}.{ext}")
                info.size = len(data)
                info.mtime = 0
                tar.addfile(info, io.BytesIO(data))
            i += 1
    return out.getvalue()


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _sample_bytes(sample: dict[str, Any]) -> int:
    return sum(len(v) for k, v in sample.items() if isinstance(v, bytes) and not k.startswith("__"))


def readers(endpoint: str, urls: list[str]) -> dict[str, Callable[[], int]]:
    """name -> function reading every shard once and returning the bytes it saw."""
    import boto3
    import botocore.config

    from wds_cloud.core.samples import tar_samples
    from wds_cloud.openers.s3 import S3Opener

    creds = {"access_key_id": KEY_ID, "secret_access_key": SECRET, "region": REGION}
    plain = S3Opener(endpoint_url=endpoint, **creds)
    fast = S3Opener(endpoint_url=endpoint, prefetch=4, prefetch_chunk=8 << 20, **creds)
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        config=botocore.config.Config(s3={"addressing_style": "path"}),
    )

    def wds_cloud_reader(opener: S3Opener) -> Callable[[], int]:
        def run() -> int:
            total = 0
            for url in urls:
                with opener.open(url) as stream:
                    for sample in tar_samples(stream, url):
                        total += _sample_bytes(sample)
            return total

        return run

    def boto3_raw() -> int:
        total = 0
        for url in urls:
            bucket, _, key = url[5:].partition("/")
            body = client.get_object(Bucket=bucket, Key=key)["Body"]
            for chunk in body.iter_chunks(1 << 20):
                total += len(chunk)
        return total

    def webdataset_pipe() -> int:
        import webdataset

        pipes = [f"pipe:aws s3 cp {u} - --endpoint-url {endpoint} --only-show-errors" for u in urls]
        dataset = webdataset.WebDataset(pipes, shardshuffle=False, empty_check=False)
        return sum(_sample_bytes(sample) for sample in dataset)

    def s3torch() -> int:
        from s3torchconnector import S3ClientConfig, S3IterableDataset

        dataset = S3IterableDataset.from_objects(
            urls,
            region=REGION,
            endpoint=endpoint,
            s3client_config=S3ClientConfig(force_path_style=True),
        )
        total = 0
        for reader in dataset:
            while chunk := reader.read(1 << 20):
                total += len(chunk)
        return total

    return {
        "wds_cloud s3:// (stream)": wds_cloud_reader(plain),
        "wds_cloud s3:// (prefetch=4)": wds_cloud_reader(fast),
        "boto3 get_object iter_chunks (raw)": boto3_raw,
        "webdataset 1.0.2 pipe:aws s3 cp": webdataset_pipe,
        "s3torchconnector S3Reader (raw)": s3torch,
    }


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, start SeaweedFS, upload shards, run the readers, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--shard-mib", type=int, default=100)
    parser.add_argument("--sample-mib", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    # Credentials for the aws CLI subprocesses and s3torchconnector (this process only).
    os.environ.update(
        AWS_ACCESS_KEY_ID=KEY_ID,
        AWS_SECRET_ACCESS_KEY=SECRET,
        AWS_DEFAULT_REGION=REGION,
        AWS_REGION=REGION,
    )
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

    with (
        tempfile.TemporaryDirectory(prefix="bench-s3-") as tmp,
        SeaweedServer(Path(tmp) / "weed", access_key=KEY_ID, secret_key=SECRET) as server,
    ):
        endpoint = server.endpoint_url
        client = boto3_client(endpoint, access_key=KEY_ID, secret_key=SECRET)
        create_bucket(client, BUCKET)
        urls = []
        shard_bytes = args.shard_mib << 20
        for i in range(args.shards):
            data = make_shard(i, shard_bytes, int(args.sample_mib * (1 << 20)))
            client.put_object(Bucket=BUCKET, Key=f"shards/shard-{i:04d}.tar", Body=data)
            urls.append(f"s3://{BUCKET}/shards/shard-{i:04d}.tar")
        total_bytes = sum(
            client.head_object(Bucket=BUCKET, Key=u.split("/", 3)[3])["ContentLength"] for u in urls
        )
        print(
            f"SeaweedFS {endpoint}: {args.shards} shards, {total_bytes / (1 << 20):.0f} MiB, "
            f"{args.rounds} rounds, {os.cpu_count()} CPUs",
            file=sys.stderr,
        )
        table = readers(endpoint, urls)
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in table}
        seen: dict[str, int] = {}
        for name, run in table.items():  # warm-up: imports, connections
            seen[name] = run()
        for rnd in range(args.rounds):
            for name, run in table.items():
                cpu0, t0 = _cpu(), time.perf_counter()
                got = run()
                wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
                if got != seen[name]:
                    raise SystemExit(f"{name}: read {got} bytes, expected {seen[name]}")
                mib = total_bytes / (1 << 20)
                results[name].append((mib / wall, cpu / (total_bytes / (1 << 30))))
                print(f"round {rnd + 1} {name}: {mib / wall:.0f} MB/s", file=sys.stderr)

    print(
        f"\n{args.shards} shards x {args.shard_mib} MiB, {args.sample_mib:g} MiB samples, median of {args.rounds} rounds\n"
    )
    print("| reader | MB/s | client CPU s/GB | payload bytes seen |")
    print("|---|---:|---:|---:|")
    for name, rows in results.items():
        speed = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        print(f"| {name} | {speed:.0f} | {cpu:.2f} | {seen[name]} |")


if __name__ == "__main__":
    main()
