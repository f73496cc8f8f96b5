"""ais:// throughput, CPU and memory: wds_cloud vs AIStore's own Python SDK, on the same shards.

By default the benchmark starts a real AIStore cluster (``tests/servers/aistore.py``: one proxy,
two targets, on loopback) and stops it at the end; ``--cluster emulator`` uses the in-process
emulator (``tests/emulators/ais``) instead, ``--endpoint URL`` an AIStore that is already
running. It writes 64 MiB shards of ~16 KiB and of ~256 KiB samples (``.bin`` + ``.cls``), and
the same members as single objects in a second bucket, then reads them with each reader, each
in its own subprocess (peak RSS from ``VmHWM``, CPU from the process's user+sys time):

- ``wds_cloud``: ``wds_cloud.WebDataset("ais://bucket/")``, no decode;
- ``wds_cloud prefetch=N``: the same with ``prefetch=N`` parallel ranged GETs (4 MiB parts);
- ``AISShardReader``: ``aistore.pytorch.AISShardReader`` (loads each whole shard, then untars);
- ``AISIterDataset``: ``aistore.pytorch.AISIterDataset`` over the members as single objects
  (it yields whole objects and cannot read tar members);
- ``raw GET``: ``client.bucket(b).object(o).get_reader().read_all()`` per shard, no parsing
  (the SDK's ceiling for whole-object reads).

Rounds are interleaved (round 1 runs every reader once, then round 2...) and each cell is the
median of the rounds. Run from the repository root::

    python benchmarks/bench_ais.py                      # real cluster, 4 shards per size, 3 rounds
    python benchmarks/bench_ais.py --quick --cluster emulator
    python benchmarks/bench_ais.py --endpoint http://127.0.0.1:51080 --profile /tmp/prof
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAR_OVERHEAD = 1536  # per sample: the .bin header and padding, the .cls header and block
READERS = ("wds_cloud", "wds_cloud prefetch", "AISShardReader", "AISIterDataset", "raw GET")


def peak_rss_mib() -> float:
    """Peak resident set size of this process image in MiB.

    ``/proc/self/status`` ``VmHWM`` belongs to the current address space, unlike
    ``getrusage().ru_maxrss``, which a child inherits from the (large) parent across fork+exec.
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def cpu_seconds() -> float:
    """User + system CPU time of this process, all its threads included."""
    times = os.times()
    return times.user + times.system


# -- the data ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """One sample size: ``shards`` tar shards in ``bucket``, the members as objects in
    ``objects_bucket``."""

    label: str
    payload: int
    bucket: str
    objects_bucket: str
    shards: int
    samples: int  # in all shards
    nbytes: int  # the shards' total size
    object_samples: int  # in the objects bucket: the first shard's members
    object_nbytes: int  # the size of the first shard

    def expected(self, kind: str) -> tuple[int, dict[str, int]]:
        """Bytes of shards ``kind`` reads (for MB/s), and the counts it must report."""
        if kind == "raw GET":
            return self.nbytes, {"bytes": self.nbytes}
        if kind == "AISIterDataset":
            member_bytes = self.object_samples * (self.payload + 1)
            return self.object_nbytes, {"samples": self.object_samples, "bytes": member_bytes}
        return self.nbytes, {"samples": self.samples, "bytes": self.samples * (self.payload + 1)}


def make_shard(index: int, size_mib: int, payload: int) -> tuple[bytes, dict[str, bytes]]:
    """A tar of about ``size_mib`` MiB of samples (``.bin`` payload + ``.cls``), and its
    members by name."""
    buf = io.BytesIO()
    count = max(1, (size_mib << 20) // (payload + TAR_OVERHEAD))
    blob = os.urandom(payload)
    members = {}
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for j in range(count):
            for ext, data in (("bin", blob), ("cls", str(j % 10).encode())):
                info = tarfile.TarInfo(f"s{index:03d}_{j:07d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                members[info.name] = data
    return buf.getvalue(), members


def upload(endpoint: str, label: str, payload: int, shards: int, shard_mib: int) -> Dataset:
    """Write the shards, and the first shard's members as objects (eight PUTs in flight).

    Only the first shard's: a PUT of a 16 KiB object costs as much as reading thousands, and
    AISIterDataset's rates do not depend on how many objects there are.
    """
    from aistore.sdk import Client

    client = Client(endpoint)
    bucket, objects_bucket = f"bench-{label}", f"bench-{label}-objects"
    for name in (bucket, objects_bucket):
        client.bucket(name).create(exist_ok=True)

    def put(item: tuple[str, str, bytes]) -> None:
        client.bucket(item[0]).object(item[1]).get_writer().put_content(item[2]).close()

    counts = []
    with ThreadPoolExecutor(8) as pool:
        for i in range(shards):
            shard, members = make_shard(i, shard_mib, payload)
            counts.append((len(members) // 2, len(shard)))
            puts = [(bucket, f"shard-{i:04d}.tar", shard)]
            if i == 0:
                puts += [(objects_bucket, name, body) for name, body in members.items()]
            list(pool.map(put, puts))
    samples, nbytes = (sum(column) for column in zip(*counts, strict=True))
    return Dataset(label, payload, bucket, objects_bucket, shards, samples, nbytes, *counts[0])


def delete(endpoint: str, data: Dataset) -> None:
    from aistore.sdk import Client

    client = Client(endpoint)
    for name in (data.bucket, data.objects_bucket):
        client.bucket(name).delete(missing_ok=True)


# -- one reader, in its own process -----------------------------------------------------------


def read_wds_cloud(endpoint: str, bucket: str, prefetch: int) -> Iterator[tuple[int, int]]:
    import wds_cloud

    url = f"ais://{bucket}/"
    dataset = (
        wds_cloud.WebDataset(url, shardshuffle=False, prefetch=prefetch)
        if prefetch
        else (wds_cloud.WebDataset(url, shardshuffle=False))
    )
    for sample in dataset:
        yield 1, len(sample["bin"]) + len(sample["cls"])


def read_shard_reader(endpoint: str, bucket: str, prefetch: int) -> Iterator[tuple[int, int]]:
    from aistore.pytorch import AISShardReader
    from aistore.sdk import Client

    for _key, sample in AISShardReader(bucket_list=Client(endpoint).bucket(bucket)):
        yield 1, len(sample["bin"]) + len(sample["cls"])


def read_iter_dataset(endpoint: str, bucket: str, prefetch: int) -> Iterator[tuple[int, int]]:
    from aistore.pytorch import AISIterDataset
    from aistore.sdk import Client

    for name, content in AISIterDataset(Client(endpoint).bucket(f"{bucket}-objects")):
        yield int(name.endswith(".bin")), len(content)


def read_raw(endpoint: str, bucket: str, prefetch: int) -> Iterator[tuple[int, int]]:
    from aistore.sdk import Client

    source = Client(endpoint).bucket(bucket)
    for entry in source.list_all_objects_iter(prefix=""):
        yield 0, len(source.object(entry.name).get_reader().read_all())


WORKERS: dict[str, Callable[[str, str, int], Iterator[tuple[int, int]]]] = {
    "wds_cloud": read_wds_cloud,
    "wds_cloud prefetch": read_wds_cloud,
    "AISShardReader": read_shard_reader,
    "AISIterDataset": read_iter_dataset,
    "raw GET": read_raw,
}


def worker(kind: str, endpoint: str, bucket: str, prefetch: int, profile: str | None) -> None:
    """Read every sample of ``bucket`` with reader ``kind``; print one JSON result line."""
    read = WORKERS[kind]
    if kind.startswith("AIS"):
        import aistore.pytorch  # imports torch: before the baseline, not timed
    else:
        import aistore.sdk  # noqa: F401
    if kind.startswith("wds_cloud"):
        import wds_cloud.pytorch  # noqa: F401  (WebDataset is the torch IterableDataset)
    base = peak_rss_mib()
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    cpu, start = cpu_seconds(), time.perf_counter()
    samples = nbytes = 0
    for n, size in read(endpoint, bucket, prefetch if kind.endswith("prefetch") else 0):
        samples += n
        nbytes += size
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    if profiler is not None and profile:
        import pstats

        profiler.disable()
        with open(profile, "w") as out:
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    result = {"samples": samples, "bytes": nbytes, "seconds": seconds, "cpu": cpu}
    print(json.dumps(result | {"base": base, "peak": peak_rss_mib()}))


def run_worker(
    kind: str, endpoint: str, data: Dataset, prefetch: int, profile: str | None = None
) -> dict[str, float]:
    """Run one reader in a subprocess and check it read every sample (or byte)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIS_", "WDS_CLOUD_AIS_"))}
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    env.update(PYTHONPATH=path, AIS_ENDPOINT=endpoint)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, endpoint, data.bucket]
    cmd += ["--prefetch", str(prefetch)] + (["--profile", profile] if profile else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} on {data.bucket} failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    nbytes, expected = data.expected(kind)
    got = {key: result[key] for key in expected}
    if got != expected:
        raise RuntimeError(f"{kind} on {data.bucket} read {got}, expected {expected}")
    return result | {"shard_bytes": nbytes, "shard_samples": expected.get("samples", data.samples)}


# -- the cluster and the report ---------------------------------------------------------------


@contextmanager
def store(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """The endpoint to benchmark and a description of what serves it."""
    sys.path.insert(0, ROOT)
    if args.endpoint:
        yield args.endpoint, f"AIStore {ais_version(args.endpoint)} at {args.endpoint}"
    elif args.cluster == "emulator":
        from tests.emulators.ais.server import AisEmulator

        with AisEmulator() as emu:
            yield emu.url, "the AIStore emulator (in-process Python HTTP server)"
    else:
        from tests.servers.aistore import Cluster
        from tests.servers.aistore_build import DEFAULT_VERSION

        workdir = tempfile.mkdtemp(prefix="wds-bench-ais-")
        try:
            with Cluster(workdir=workdir) as cluster:
                version = ais_version(cluster.endpoint)
                served = (
                    f"a real AIStore {version} ({DEFAULT_VERSION}) cluster on loopback: one "
                    "proxy, two targets, two mountpaths each, on the same machine"
                )
                yield cluster.endpoint, served
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def ais_version(endpoint: str) -> str:
    """The node's ``ais_version`` (``5.0``), or ``?`` when it does not say."""
    try:
        with urllib.request.urlopen(f"{endpoint}/v1/daemon?what=node_status", timeout=5) as r:
            return str(json.load(r).get("ais_version", "?")).rstrip(".")
    except (OSError, ValueError):
        return "?"


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if "model name" in ln), model)
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({model}), Linux {platform.release()}"


def log(message: str) -> None:
    print(f"# {message}", file=sys.stderr, flush=True)


def measure(args: argparse.Namespace, endpoint: str, datasets: list[Dataset]) -> list[Row]:
    """``args.rounds`` interleaved rounds of every reader on every dataset; a row per cell."""
    runs: dict[tuple[Dataset, str], list[dict[str, float]]] = {}
    for round_ in range(args.rounds):
        for data in datasets:
            for kind in args.readers:
                result = run_worker(kind, endpoint, data, args.prefetch)
                runs.setdefault((data, kind), []).append(result)
                rate = result["shard_bytes"] / result["seconds"] / 1e6
                log(f"round {round_ + 1} {data.label} {kind}: {rate:,.0f} MB/s")
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        for data in datasets:
            for kind in args.readers:
                name = f"{data.label}-{kind.replace(' ', '_')}.txt"
                run_worker(kind, endpoint, data, args.prefetch, os.path.join(args.profile, name))
        log(f"profiles (top 25 by own time) in {args.profile}")
    rows = []
    for (data, kind), results in runs.items():
        name = f"{kind}={args.prefetch}" if kind.endswith("prefetch") else kind
        rows.append(
            Row(
                data.label,
                name,
                statistics.median(r["shard_samples"] / r["seconds"] for r in results),
                statistics.median(r["shard_bytes"] / r["seconds"] / 1e6 for r in results),
                statistics.median(r["cpu"] / (r["shard_bytes"] / 1e9) for r in results),
                statistics.median(r["peak"] for r in results),
                statistics.median(r["peak"] - r["base"] for r in results),
            )
        )
    return rows


@dataclass(frozen=True)
class Row:
    label: str
    reader: str
    samples_per_s: float
    mb_per_s: float
    cpu_s_per_gb: float
    peak_mib: float
    growth_mib: float


def report(args: argparse.Namespace, served: str, rows: list[Row]) -> None:
    import aistore

    print(
        f"\n{datetime.date.today().isoformat()}; {machine()}; {served}; aistore SDK "
        f"{aistore.__version__}; Python {platform.python_version()}. {args.shards} x "
        f"{args.shard_mib} MiB shards per sample size (AISIterDataset: the first shard's "
        "members as single objects), one reader process, no DataLoader, no decode; median of "
        f"{args.rounds} interleaved round(s). MB/s and CPU s/GB count the shards' bytes; CPU is "
        "the reader process's user+sys time while reading.\n"
    )
    print("| samples | reader | samples/s | MB/s | CPU s/GB | peak RSS (MiB) | RSS growth (MiB) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r.label} | {r.reader} | {r.samples_per_s:,.0f} | {r.mb_per_s:,.0f} | "
            f"{r.cpu_s_per_gb:.2f} | {r.peak_mib:,.0f} | {r.growth_mib:,.0f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", choices=("real", "emulator"), default="real")
    parser.add_argument("--endpoint", help="an AIStore already running (no cluster started)")
    parser.add_argument("--quick", action="store_true", help="1 shard per size, 1 round")
    parser.add_argument("--shards", type=int, help="shards per sample size (default 4)")
    parser.add_argument("--shard-mib", type=int, default=64)
    parser.add_argument("--payloads", type=int, nargs="+", default=[16 << 10, 256 << 10])
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3)")
    parser.add_argument("--prefetch", type=int, default=8, help="N of the prefetch row")
    parser.add_argument("--readers", nargs="+", choices=READERS, default=list(READERS))
    parser.add_argument("--profile", help="directory: one more cProfile'd run of each cell")
    parser.add_argument("--worker", nargs=3, metavar=("KIND", "ENDPOINT", "BUCKET"))
    args = parser.parse_args()
    if args.worker:
        kind, endpoint, bucket = args.worker
        worker(kind, endpoint, bucket, args.prefetch, args.profile)
        return
    args.shards = args.shards or (1 if args.quick else 4)
    args.rounds = args.rounds or (1 if args.quick else 3)
    with store(args) as (endpoint, served):
        log(f"{served}: {endpoint}")
        datasets: list[Dataset] = []
        try:
            for payload in args.payloads:
                began = time.perf_counter()
                datasets.append(
                    upload(endpoint, f"{payload >> 10}k", payload, args.shards, args.shard_mib)
                )
                log(f"{datasets[-1].label}: uploaded in {time.perf_counter() - began:.0f}s")
            rows = measure(args, endpoint, datasets)
        finally:
            for data in datasets:
                delete(endpoint, data)
    report(args, served, rows)


if __name__ == "__main__":
    main()
