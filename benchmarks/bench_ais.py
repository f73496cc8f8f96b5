"""ais:// throughput and memory: wds_cloud vs ``aistore.pytorch.AISShardReader``.

Both read the same shards from the in-process AIStore emulator (``tests/emulators/ais``) over
real HTTP; each reader runs in its own subprocess so its peak RSS can be measured. Two shard
sizes show whether memory stays bounded as shards grow (the SDK's reader loads each whole
shard into memory; wds_cloud streams it).

Run from the repository root::

    python benchmarks/bench_ais.py                 # 2 sizes, markdown table on stdout
    python benchmarks/bench_ais.py --sizes 8 64 --shards 4 --payload 8192
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def peak_rss_mib() -> float:
    """Peak resident set size of this process image in MiB.

    ``/proc/self/status`` ``VmHWM`` belongs to the current address space, unlike
    ``getrusage().ru_maxrss``, which a child inherits from the (large) parent across fork+exec.
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_shard(index: int, size_mib: int, payload: int) -> tuple[bytes, int]:
    """A tar of about ``size_mib`` MiB of samples (``.bin`` payload + ``.cls``)."""
    buf = io.BytesIO()
    count = max(1, (size_mib << 20) // (payload + 1536))
    blob = os.urandom(payload)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for j in range(count):
            for ext, data in (("bin", blob), ("cls", str(j % 10).encode())):
                info = tarfile.TarInfo(f"s{index:03d}_{j:07d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue(), count


def worker(kind: str, endpoint: str, bucket: str, prefix: str) -> None:
    """Read every sample of ``bucket/prefix`` and print a JSON result line."""
    if kind == "wds_cloud":
        from wds_cloud.core.samples import tar_samples
        from wds_cloud.openers.ais import AisOpener

        opener = AisOpener(endpoint=endpoint, retries=0)
        base = peak_rss_mib()
        start = time.perf_counter()
        n = nbytes = 0
        for url in opener.list(f"ais://{bucket}/{prefix}"):
            with opener.open(url) as stream:
                for sample in tar_samples(stream, url):
                    n += 1
                    nbytes += len(sample["bin"])
    else:
        from aistore.pytorch import AISShardReader
        from aistore.sdk import Client

        client = Client(endpoint)
        dataset = AISShardReader(bucket_list=client.bucket(bucket), prefix_map={})
        base = peak_rss_mib()
        start = time.perf_counter()
        n = nbytes = 0
        for _key, sample in dataset:
            n += 1
            nbytes += len(sample["bin"])
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "samples": n,
                "bytes": nbytes,
                "seconds": seconds,
                "base": base,
                "peak": peak_rss_mib(),
            }
        )
    )


def run_worker(kind: str, endpoint: str, bucket: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run(
        [sys.executable, __file__, "--worker", kind, endpoint, bucket],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{kind} worker failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 64], help="shard MiB")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--payload", type=int, default=8192, help="bytes per sample")
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell (best kept)")
    parser.add_argument("--worker", nargs=3, metavar=("KIND", "ENDPOINT", "BUCKET"))
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], args.worker[2], "")
        return
    sys.path.insert(0, ROOT)
    from tests.emulators.ais.server import AisEmulator

    rows = []
    with AisEmulator() as emu:
        for size in args.sizes:
            bucket = f"bench-{size}"
            emu.store.create_bucket(bucket)
            total = 0
            for i in range(args.shards):
                data, count = make_shard(i, size, args.payload)
                emu.store.put_object(bucket, f"shard-{i:04d}.tar", data)
                total += count
            for kind in ("wds_cloud", "AISShardReader"):
                best = min(
                    (run_worker(kind, emu.url, bucket) for _ in range(args.repeat)),
                    key=lambda r: r["seconds"],
                )
                if best["samples"] != total:
                    raise RuntimeError(f"{kind} read {best['samples']} samples, expected {total}")
                rows.append((size, kind, best))
            emu.store.delete_bucket(bucket)
    print(
        f"\n{args.shards} shards per size, {args.payload} B payload per sample, "
        f"emulator on 127.0.0.1, one reader process, no DataLoader\n"
    )
    print(
        "| shard size | reader | samples/s | MB/s | peak RSS (MiB) | RSS growth while reading (MiB) |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    for size, kind, r in rows:
        print(
            f"| {size} MiB | {kind} | {r['samples'] / r['seconds']:,.0f} | "
            f"{r['bytes'] / r['seconds'] / 1e6:,.0f} | {r['peak']:,.0f} | {r['peak'] - r['base']:,.0f} |"
        )


if __name__ == "__main__":
    main()
