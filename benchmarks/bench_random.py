"""Random access at streaming speed? A fully shuffled epoch against streaming, side by side.

Issue 25, section 3. Run from the repository root (it writes its own shards, starts SeaweedFS
on 127.0.0.1, the latency proxy of ``benchmarks/latency_proxy.py`` in front of it, and a real
AIStore cluster, ``tests/servers/aistore.py``; it stops them at the end)::

    python -m benchmarks.bench_random                        # 4 x 64 MB shards per data set, 3 rounds
    python -m benchmarks.bench_random --quick                # 4 x 2 MB shards, 1 round (~3 min)
    python -m benchmarks.bench_random --stores seaweedfs proxy --out random.json

Data (the same bytes on every store): ``16k``, samples of ``.bin`` (12-20 KiB of random bytes)
+ ``.cls``; ``jpeg``, samples of ``.jpg`` (512x512 JPEGs of ~103 KB) + ``.cls``; ``--shards``
shards of ``--shard-mb`` MB each, indexed (``wds.build_index``, a dataset JSON beside them).

Stores: ``seaweedfs`` (``s3://`` on loopback), ``proxy`` (the same SeaweedFS behind the proxy:
20 ms per request, 50 MB/s per connection) and ``ais`` (``ais://`` on the real cluster: one
proxy, two targets, on this machine; ``--ais-endpoint URL``: one already running).

Variants, every one through ``torch.utils.data.DataLoader`` with 4 workers and batches of 64
sample dicts (no decode; ``collate_fn`` keeps the list), each measurement in a fresh interpreter:

- ``stream``: sequential streaming, ``WebDataset(json, shardshuffle=True).shuffle(1000)
  .batched(64)`` (the reference every ratio is taken against);
- ``shuffled batch``: a fully shuffled epoch of ``IndexedWebDataset`` with
  ``batch_sampler=`` a seeded permutation cut in batches of 64: ``DataLoader`` calls
  ``__getitems__`` (``get_batch``: coalesced concurrent ranged GETs on s3, one GetBatch
  request per batch on ais);
- ``per sample``: the same permutation through a map-style wrapper that has only
  ``__getitem__`` (one ranged GET per sample, the path before batch reads), on the first
  ``--baseline-samples`` samples of the permutation;
- ``AISBatchIterDataset`` (ais only): ``aistore.pytorch``'s batch loader (GetBatch, 2.0.0)
  over the first shard's members stored as single objects (it cannot read tar members), in
  listing order, ``max_batch_size=128`` objects (64 samples of two members).

- ``global``: ``make_loader(order="global")``, the library's global shuffle;
``global k=4`` and ``global k=8`` are the same with ``batches_in_flight=4`` / ``8`` (each
worker reads 4 / 8 batches at once).

Rounds are interleaved (every store, data set and variant once, then again) and each cell is
the median of the rounds; ratios are taken per round, then their median. Per cell: samples/s;
**vs stream** (goal >= 0.8x for ``shuffled batch``); **vs AISBatchIterDataset** (goal >= 1.0x);
peak RSS of the main process and of the largest worker (``VmHWM``; a worker's includes
the pages it shares with the main process since the fork); **requests/sample** and **read/asked**,
the bytes the server sent per byte of the samples delivered (their tar members with headers,
or AISBatchIterDataset's objects), both from the server's own counters (SeaweedFS's Prometheus
``s3_request_total`` and ``bucket_traffic_sent_bytes_total``; AIStore's targets' ``get_*`` and
``getbatch_*``), so the index loads are included; **CPU ms/sample** of the client (the
measuring process and its loader workers) and of the servers (their processes' user + system
time from ``/proc``; not with ``--ais-endpoint``): where the time goes on a shared machine. ``--profile DIR`` adds one cProfile'd run of
the ``shuffled batch`` and ``stream`` loaders with ``num_workers=0`` (the loop a worker runs).
On AIStore a last table times GetBatch requests alone (:func:`getbatch_latency`).

Client, servers and workers share the machine's cores: compare ratios within a run.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import io
import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY_ID = "benchkey"
SECRET = "benchsecret"
REGION = "us-east-1"
BUCKET = "bench-random"
BATCH = 64
WORKERS = 4
SEED = 25
STORES = ("seaweedfs", "proxy", "ais")
DATA = ("16k", "jpeg")


# -- data ------------------------------------------------------------------------------------


def _jpegs(count: int) -> list[bytes]:
    """``count`` distinct 512x512 JPEGs (gradient + noise, quality 90) of about 103 KB."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(SEED)
    y, x = np.mgrid[0:512, 0:512]
    out = []
    for i in range(count):
        base = np.stack([x // 2, y // 2, (x + y + 32 * i) // 4], axis=2).astype(np.int16)
        noise = rng.integers(-24, 24, (512, 512, 3), dtype=np.int16)
        buf = io.BytesIO()
        Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8)).save(
            buf, format="JPEG", quality=90
        )
        out.append(buf.getvalue())
    return out


def make_shards(kind: str, shards: int, shard_bytes: int) -> list[bytes]:
    """``shards`` tar shards of about ``shard_bytes`` each, written by our TarWriter."""
    from wds_cloud.writing.tarwriter import TarWriter

    rng = random.Random(SEED)
    pool = _jpegs(16) if kind == "jpeg" else [rng.randbytes(20 << 10)]
    out = []
    for s in range(shards):
        buf = io.BytesIO()
        with TarWriter(buf, encoder=False) as writer:
            i = 0
            while buf.tell() < shard_bytes:
                if kind == "jpeg":
                    payload = {"jpg": pool[(s * 7 + i) % len(pool)]}
                else:
                    size = rng.randint(12 << 10, 20 << 10)
                    payload = {"bin": pool[0][:size]}
                writer.write({"__key__": f"s{s:03d}_{i:06d}", **payload, "cls": b"%d" % (i % 10)})
                i += 1
        out.append(buf.getvalue())
    return out


def tar_members(shard: bytes) -> Iterator[tuple[str, bytes]]:
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(shard)) as tar:
        for info in tar:
            member = tar.extractfile(info)
            if member is not None:
                yield info.name, member.read()


# -- the stores ------------------------------------------------------------------------------


@dataclass
class Store:
    """Where one store's data sets live and how to count what its server sent."""

    name: str
    scheme: str
    endpoint: str
    sources: dict[str, str] = field(default_factory=dict)  # data set -> dataset JSON URL
    objects: dict[str, str] = field(default_factory=dict)  # data set -> objects bucket (ais)
    metrics: list[str] = field(default_factory=list)
    marker: str = ""  # a string in the command line of every server process (its data dir)

    def counters(self) -> tuple[float, float, float]:
        """(requests, bytes sent, server CPU seconds) so far, from the servers' own metrics
        and ``/proc`` (CPU: NaN when the servers were not started here)."""
        requests = sent = 0.0
        for url in self.metrics:
            with urllib.request.urlopen(url, timeout=10) as resp:
                text = resp.read().decode()
            for line in text.splitlines():
                if line.startswith("#"):
                    continue
                name, _, value = line.rpartition(" ")
                if self.scheme == "s3":
                    if f'bucket="{BUCKET}"' not in name:
                        continue
                    if name.startswith("SeaweedFS_s3_request_total{") and 'type="GET"' in name:
                        requests += float(value)
                    elif name.startswith("SeaweedFS_s3_bucket_traffic_sent_bytes_total{"):
                        sent += float(value)
                else:
                    metric = name.split("{", 1)[0]
                    if metric in ("ais_target_get_count", "ais_target_getbatch_count"):
                        requests += float(value)
                    elif metric in (
                        "ais_target_get_bytes",
                        "ais_target_getbatch_obj_bytes",
                        "ais_target_getbatch_file_bytes",
                    ):
                        sent += float(value)
        return requests, sent, server_cpu(self.marker)


def server_cpu(marker: str) -> float:
    """User + system CPU seconds of the processes whose command line contains ``marker``."""
    if not marker:
        return float("nan")
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() not in f.read():
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def registry_for(scheme: str, endpoint: str) -> Any:
    from wds_cloud.openers.registry import OpenerRegistry

    reg = OpenerRegistry()
    if scheme == "s3":
        from wds_cloud.openers.s3 import S3Opener

        opener: Any = S3Opener(
            endpoint_url=endpoint, access_key_id=KEY_ID, secret_access_key=SECRET, region=REGION
        )
    else:
        from wds_cloud.openers.ais.opener import AisOpener

        opener = AisOpener(endpoint=endpoint)
    reg.register(scheme, opener, override=True)
    return reg


def start_seaweed(stack: ExitStack, work: Path, data: dict[str, list[bytes]]) -> Store:
    import wds_cloud as wds
    from tests.support.seaweed import SeaweedServer, boto3_client, create_bucket, free_ports

    port = free_ports(1)[0]
    flags = (f"-metricsPort={port}", "-metricsIp=127.0.0.1")
    server = stack.enter_context(
        SeaweedServer(work / "weed", access_key=KEY_ID, secret_key=SECRET, extra_args=flags)
    )
    client = boto3_client(server.endpoint_url, access_key=KEY_ID, secret_key=SECRET)
    create_bucket(client, BUCKET)
    store = Store("seaweedfs", "s3", server.endpoint_url)
    store.metrics = [f"http://127.0.0.1:{port}/metrics"]
    store.marker = str(work / "weed")
    reg = registry_for("s3", server.endpoint_url)
    for label, shards in data.items():
        urls = []
        for i, blob in enumerate(shards):
            client.put_object(Bucket=BUCKET, Key=f"{label}/shard-{i:04d}.tar", Body=blob)
            urls.append(f"s3://{BUCKET}/{label}/shard-{i:04d}.tar")
        store.sources[label] = f"s3://{BUCKET}/{label}/index.json"
        wds.build_index(urls, json=store.sources[label], registry=reg)
    return store


def start_proxy(stack: ExitStack, seaweed: Store, delay: float, rate: float) -> Store:
    from benchmarks.latency_proxy import LatencyProxy

    port = int(seaweed.endpoint.rsplit(":", 1)[1])
    proxy = stack.enter_context(LatencyProxy(port, delay=delay, rate=rate))
    return Store(
        "proxy", "s3", proxy.url, dict(seaweed.sources), {}, list(seaweed.metrics), seaweed.marker
    )


def start_ais(
    stack: ExitStack, work: Path, data: dict[str, list[bytes]], endpoint: str | None
) -> Store:
    """The real AIStore cluster (started here unless ``endpoint`` names a running one), loaded
    with the shards, their indexes and the first shard's members as objects; the buckets are
    deleted when ``stack`` closes."""
    from concurrent.futures import ThreadPoolExecutor

    from aistore.sdk import Client

    import wds_cloud as wds
    from tests.servers.aistore import Cluster

    started = endpoint is None
    if endpoint is None:
        endpoint = stack.enter_context(Cluster(workdir=str(work / "ais"))).endpoint
    client = Client(endpoint)
    with urllib.request.urlopen(f"{endpoint}/v1/daemon?what=smap", timeout=10) as r:
        smap = json.load(r)
    store = Store("ais", "ais", endpoint, marker=str(work / "ais") if started else "")
    store.metrics = [t["public_net"]["direct_url"] + "/metrics" for t in smap["tmap"].values()]
    reg = registry_for("ais", endpoint)

    def put(item: tuple[str, str, bytes]) -> None:
        client.bucket(item[0]).object(item[1]).get_writer().put_content(item[2])

    for label, shards in data.items():
        bucket, objects = f"{BUCKET}-{label}", f"{BUCKET}-{label}-objects"
        for name in (bucket, objects):
            client.bucket(name).create(exist_ok=True)
            stack.callback(client.bucket(name).delete, missing_ok=True)
        items = [(bucket, f"shard-{i:04d}.tar", blob) for i, blob in enumerate(shards)]
        items += [(objects, name, body) for name, body in tar_members(shards[0])]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(put, items))
        urls = [f"ais://{bucket}/shard-{i:04d}.tar" for i in range(len(shards))]
        store.sources[label] = f"ais://{bucket}/index.json"
        store.objects[label] = objects
        wds.build_index(urls, json=store.sources[label], registry=reg)
    return store


# -- the variants (each in its own process) --------------------------------------------------


def as_list(batch: list[Any]) -> list[Any]:
    """``collate_fn``: the batch as it is (the samples cross the process boundary)."""
    return batch


class PerSample:
    """A map-style dataset with only ``__getitem__``: ``DataLoader`` reads each sample alone."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[index]


def permutation(n: int, limit: int | None = None) -> list[list[int]]:
    """The seeded shuffled epoch (its first ``limit`` samples) cut in batches of ``BATCH``."""
    order = list(range(n))
    random.Random(SEED).shuffle(order)
    order = order[:limit] if limit else order
    return [order[i : i + BATCH] for i in range(0, len(order), BATCH)]


@dataclass
class Job:
    """What one measuring process runs."""

    variant: str
    scheme: str
    endpoint: str
    source: str  # dataset JSON URL
    objects: str = ""  # the objects bucket (AISBatchIterDataset)
    limit: int = 0  # samples of the permutation (per sample); 0: all
    workers: int = WORKERS


def indexed(job: Job, reg: Any) -> Any:
    import wds_cloud as wds

    return wds.IndexedWebDataset(job.source, registry=reg)


def variant_stream(job: Job, reg: Any) -> Iterable[list[Any]]:
    from torch.utils.data import DataLoader

    import wds_cloud as wds

    stream = (
        wds.WebDataset(job.source, registry=reg, shardshuffle=True, seed=SEED)
        .shuffle(1000)
        .batched(BATCH, collation_fn=None)
    )
    return DataLoader(stream, batch_size=None, num_workers=job.workers)


def variant_shuffled_batch(job: Job, reg: Any) -> Iterable[list[Any]]:
    from torch.utils.data import DataLoader

    ds = indexed(job, reg)
    batches = permutation(len(ds), job.limit)
    return DataLoader(ds, batch_sampler=batches, num_workers=job.workers, collate_fn=as_list)


def variant_global(job: Job, reg: Any, in_flight: int = 1) -> Iterable[list[Any]]:
    """``make_loader(order="global")``: the library's global shuffle (a seeded permutation
    fetched a batch at a time with ``get_batch``), resumable from a cursor; ``in_flight``:
    its ``batches_in_flight`` (batches each worker reads at once)."""
    import wds_cloud as wds

    return wds.make_loader(
        job.source,
        order="global",
        batch_size=BATCH,
        num_workers=job.workers,
        seed=SEED,
        collate=as_list,
        registry=reg,
        batches_in_flight=in_flight,
    )


def variant_per_sample(job: Job, reg: Any) -> Iterable[list[Any]]:
    from torch.utils.data import DataLoader

    ds: Any = PerSample(indexed(job, reg))  # a map-style dataset, not a torch Dataset subclass
    batches = permutation(len(ds), job.limit)
    return DataLoader(ds, batch_sampler=batches, num_workers=job.workers, collate_fn=as_list)


def variant_ais_batch_iter(job: Job, reg: Any) -> Iterable[list[Any]]:
    from aistore.pytorch.batch_iter_dataset import AISBatchIterDataset
    from aistore.sdk import Client
    from torch.utils.data import DataLoader

    client = Client(job.endpoint)
    ds = AISBatchIterDataset(client.bucket(job.objects), client, max_batch_size=2 * BATCH)
    return DataLoader(ds, batch_size=2 * BATCH, num_workers=job.workers, collate_fn=as_list)


#: name -> (the loader, the stores it runs on: None for every store)
VARIANTS: dict[str, tuple[Callable[[Job, Any], Iterable[list[Any]]], tuple[str, ...] | None]] = {
    "stream": (variant_stream, None),
    "shuffled batch": (variant_shuffled_batch, None),
    "global": (variant_global, None),
    "global k=4": (functools.partial(variant_global, in_flight=4), None),
    "global k=8": (functools.partial(variant_global, in_flight=8), None),
    "per sample": (variant_per_sample, None),
    "AISBatchIterDataset": (variant_ais_batch_iter, ("ais",)),
}


def count(batch: list[Any]) -> tuple[int, int, set[str]]:
    """(samples, payload bytes, keys) of one batch: sample dicts, or (name, bytes) objects."""
    samples = nbytes = 0
    keys: set[str] = set()
    for item in batch:
        if isinstance(item, dict):
            samples += 1
            keys.add(item["__key__"])
            nbytes += sum(len(v) for k, v in item.items() if not k.startswith("__"))
        else:
            name, data = item
            samples += not name.endswith(".cls")
            nbytes += len(data)
            keys.add(name)
    return samples, nbytes, keys


def asked_bytes(job: Job, reg: Any, keys: set[str]) -> int:
    """The bytes the delivered samples take in their shards: tar headers and members, from the
    first member's header to the end of the last (what one ranged GET per sample reads)."""
    ds = indexed(job, reg)
    total = 0
    for index in ds.indexes:
        for key, members in index.samples():
            if key in keys:
                total += members[-1].offset + members[-1].size - (members[0].offset - 512)
    return total


def peak_rss_mib(pid: int | str = "self") -> float:
    """A process's peak RSS in MiB (``VmHWM``: its own address space; 0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def workers_peak_rss_mib() -> float:
    """The largest peak RSS among this process's live children (the loader's workers).

    Read while they run (``getrusage(RUSAGE_CHILDREN)`` would also count a process that
    ``import torch`` starts and waits for, larger than any worker)."""
    peak = 0.0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                kids = f.read().split()
        except OSError:
            continue
        for pid in kids:
            peak = max(peak, peak_rss_mib(pid))
    return peak


def worker(job: Job, profile: str | None) -> None:
    """Run one variant to its end; print one JSON line."""
    import torch.utils.data  # noqa: F401  (imports before the clock)

    import wds_cloud.pytorch  # noqa: F401

    reg = registry_for(job.scheme, job.endpoint)
    loader = VARIANTS[job.variant][0](job, reg)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    samples = nbytes = 0
    keys: set[str] = set()
    cpu, start = os.times(), time.perf_counter()
    workers_peak = 0.0
    for batch in loader:
        workers_peak = max(workers_peak, workers_peak_rss_mib())
        n, b, k = count(batch)
        samples, nbytes = samples + n, nbytes + b
        keys |= k
    seconds = time.perf_counter() - start
    if profiler is not None and profile:
        import pstats

        profiler.disable()
        with open(profile, "w") as out:
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
    del loader  # its workers are joined: their CPU time is in os.times() now
    end = os.times()
    cpu_s = sum(end[:4]) - sum(cpu[:4])  # user, system, children's user and system
    asked = nbytes if job.variant == "AISBatchIterDataset" else asked_bytes(job, reg, keys)
    result: dict[str, float] = {"samples": samples, "distinct": len(keys), "payload": nbytes}
    result["asked"] = asked
    result |= {
        "seconds": seconds,
        "rss_main": peak_rss_mib(),
        "rss_worker": workers_peak,
        "cpu": cpu_s,
    }
    print(json.dumps(result))


def run_job(job: Job, store: Store, profile: str | None = None) -> dict[str, Any]:
    """One measurement in a fresh interpreter, with the server's counters around it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIS_", "WDS_CLOUD_AIS_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(job.__dict__)]
    cmd += ["--profile", profile] if profile else []
    before = store.counters()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    after = store.counters()
    if out.returncode != 0:
        raise RuntimeError(f"{job.variant} on {job.source} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["requests"] = after[0] - before[0]
    result["sent"] = after[1] - before[1]
    result["server_cpu"] = after[2] - before[2]
    return result


# -- GetBatch requests alone (ais) ------------------------------------------------------------


def getbatch_latency(store: Store, label: str, requests: int = 16) -> dict[str, float]:
    """Time GetBatch requests on their own, in this process: one ``get_batch`` of 1, 16 and 64
    samples (median ms), the SDK's ``client.batch`` of 1 and 64 objects, and 64-sample batches
    with 1, 4, 8 and 16 requests in flight (samples/s): a cost per request, not per entry,
    shows as the same time for 1 and 64 and as throughput that grows with requests in flight."""
    from concurrent.futures import ThreadPoolExecutor

    from aistore.sdk import Client

    import wds_cloud as wds

    reg = registry_for("ais", store.endpoint)
    ds = wds.IndexedWebDataset(store.sources[label], registry=reg)
    rng = random.Random(SEED)
    batches = [rng.sample(range(len(ds)), BATCH) for _ in range(requests * 4)]
    client = Client(store.endpoint)
    names = [o.name for o in client.bucket(store.objects[label]).list_all_objects_iter()]

    def ms(run: Callable[[], Any]) -> float:
        times = []
        for _ in range(requests):
            start = time.perf_counter()
            run()
            times.append(1000 * (time.perf_counter() - start))
        return statistics.median(times)

    def sdk(count: int) -> None:
        objects = [client.bucket(store.objects[label]).object(n) for n in names[:count]]
        for _ in client.batch(objects=objects).get():
            pass

    ds.get_batch(batches[0])  # connect
    out = {}
    for n in (1, 16, 64):
        out[f"get_batch of {n}, ms"] = ms(functools.partial(ds.get_batch, batches[0][:n]))
    for n in (1, 64):
        out[f"SDK client.batch of {n} objects, ms"] = ms(functools.partial(sdk, n))
    out["one ranged GET (ds[i]), ms"] = ms(lambda: ds[batches[0][0]])
    for inflight in (1, 4, 8, 16):
        start = time.perf_counter()
        with ThreadPoolExecutor(inflight) as pool:
            list(pool.map(ds.get_batch, batches))
        rate = len(batches) * BATCH / (time.perf_counter() - start)
        out[f"{inflight} get_batch of 64 in flight, samples/s"] = rate
    return out


# -- the run and the report ------------------------------------------------------------------


def log(message: str) -> None:
    print(f"# {message}", file=sys.stderr, flush=True)


def cells(args: argparse.Namespace, stores: list[Store]) -> list[tuple[Store, str, str, Job]]:
    out = []
    for store in stores:
        for label in args.data:
            for variant, (_, where) in VARIANTS.items():
                if variant not in args.variants or (where and store.name not in where):
                    continue
                limit = args.baseline_samples if variant == "per sample" else 0
                job = Job(variant, store.scheme, store.endpoint, store.sources[label])
                job.objects, job.limit = store.objects.get(label, ""), limit
                out.append((store, label, variant, job))
    return out


def summarize(runs: dict[tuple[str, str, str], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    for (store, label, variant), results in runs.items():
        rates = [r["samples"] / r["seconds"] for r in results]
        row: dict[str, Any] = {"store": store, "data": label, "variant": variant}
        row["samples_per_s"] = statistics.median(rates)
        for ref, key in (("stream", "vs_stream"), ("AISBatchIterDataset", "vs_ais_batch_iter")):
            base = runs.get((store, label, ref))
            if base and ref != variant:
                ratios = [
                    rate / (b["samples"] / b["seconds"])
                    for rate, b in zip(rates, base, strict=True)
                ]
                row[key] = statistics.median(ratios)
        row["rss_main_mib"] = statistics.median(r["rss_main"] for r in results)
        row["rss_worker_mib"] = statistics.median(r["rss_worker"] for r in results)
        row["requests_per_sample"] = statistics.median(
            r["requests"] / r["samples"] for r in results
        )
        row["read_per_asked"] = statistics.median(r["sent"] / r["asked"] for r in results)
        row["client_cpu_ms"] = statistics.median(
            1000 * r.get("cpu", math.nan) / r["samples"] for r in results
        )
        row["server_cpu_ms"] = statistics.median(
            1000 * r.get("server_cpu", math.nan) / r["samples"] for r in results
        )
        row["samples"] = results[0]["samples"]
        rows.append(row)
    return rows


def report(header: str, rows: list[dict[str, Any]]) -> str:
    lines = [
        header,
        "",
        "| store | data | variant | samples | samples/s | vs stream | vs AISBatchIterDataset | "
        "peak RSS main / worker (MiB) | requests/sample | read/asked | "
        "CPU ms/sample client / server |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        vs = f"{r['vs_stream']:.2f}x" if "vs_stream" in r else ""
        vsa = f"{r['vs_ais_batch_iter']:.2f}x" if "vs_ais_batch_iter" in r else ""
        lines.append(
            f"| {r['store']} | {r['data']} | {r['variant']} | {r['samples']:,} | "
            f"{r['samples_per_s']:,.0f} | {vs} | {vsa} | {r['rss_main_mib']:,.0f} / "
            f"{r['rss_worker_mib']:,.0f} | {r['requests_per_sample']:.3f} | "
            f"{r['read_per_asked']:.2f} | {r['client_cpu_ms']:.2f} / {r['server_cpu_ms']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 x 2 MB shards, 1 round")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3; quick 1)")
    parser.add_argument("--shards", type=int, default=4, help="shards per data set")
    parser.add_argument("--shard-mb", type=float, help="MB per shard (default 64; quick 2)")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--data", nargs="+", choices=DATA, default=list(DATA))
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument(
        "--baseline-samples", type=int, help="samples of the per-sample run (default 2048)"
    )
    parser.add_argument("--ais-endpoint", help="an AIStore already running (none started)")
    parser.add_argument("--delay", type=float, default=0.02, help="proxy: seconds per request")
    parser.add_argument("--rate", type=float, default=50e6, help="proxy: bytes/s per connection")
    parser.add_argument("--out", help="write the rows and every run as JSON to this file")
    parser.add_argument("--profile", help="directory: cProfile'd single-process runs")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(Job(**json.loads(args.worker)), args.profile)
        return
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.shard_mb = args.shard_mb or (2 if args.quick else 64)
    args.baseline_samples = args.baseline_samples or (256 if args.quick else 2048)
    sys.path.insert(0, ROOT)

    import aistore
    import torch

    import wds_cloud
    from benchmarks.bench_ais import machine

    work = Path(tempfile.mkdtemp(prefix="bench-random-"))
    runs: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    latency: dict[str, float] = {}
    try:
        began = time.perf_counter()
        data = {d: make_shards(d, args.shards, int(args.shard_mb * 1e6)) for d in args.data}
        log(f"data written in {time.perf_counter() - began:.0f}s")
        with ExitStack() as stack:
            stores: list[Store] = []
            if {"seaweedfs", "proxy"} & set(args.stores):
                seaweed = start_seaweed(stack, work, data)
                if "seaweedfs" in args.stores:
                    stores.append(seaweed)
                if "proxy" in args.stores:
                    stores.append(start_proxy(stack, seaweed, args.delay, args.rate))
            if "ais" in args.stores:
                began = time.perf_counter()
                stores.append(start_ais(stack, work, data, args.ais_endpoint))
                log(f"AIStore started and loaded in {time.perf_counter() - began:.0f}s")
            todo = cells(args, stores)
            for round_ in range(args.rounds):
                for store, label, variant, job in todo:
                    result = run_job(job, store)
                    runs.setdefault((store.name, label, variant), []).append(result)
                    rate = result["samples"] / result["seconds"]
                    log(f"round {round_ + 1} {store.name} {label} {variant}: {rate:,.0f} samples/s")
            for store in stores:
                if store.scheme == "ais" and args.data:
                    latency = getbatch_latency(store, args.data[0], 4 if args.quick else 16)
            if args.profile:
                os.makedirs(args.profile, exist_ok=True)
                for store, label, variant, job in todo:
                    if variant in ("stream", "shuffled batch"):
                        job.workers = 0
                        name = f"{store.name}-{label}-{variant.replace(' ', '_')}.txt"
                        run_job(job, store, os.path.join(args.profile, name))
                log(f"profiles (top 40 by cumulative time) in {args.profile}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = summarize(runs)
    sizes = ", ".join(f"{d}: {sum(len(s) for s in data[d]) / 1e6:.0f} MB" for d in args.data)
    header = (
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {machine()}; "
        f"Python {platform.python_version()}, torch {torch.__version__}, wds_cloud "
        f"{wds_cloud.__version__}, aistore SDK {aistore.__version__}. {args.shards} shards of "
        f"{args.shard_mb:g} MB per data set ({sizes}); batch {BATCH}, {WORKERS} workers; "
        f"per sample: the first {args.baseline_samples} samples of the permutation; proxy "
        f"{args.delay * 1000:g} ms/request, {args.rate / 1e6:g} MB/s per connection; median of "
        f"{args.rounds} interleaved round(s)."
    )
    print(report(header, rows))
    if latency:
        print(f"\nGetBatch requests alone ({args.data[0]}, one process):\n\n| what | value |")
        print("|---|---:|")
        for what, value in latency.items():
            print(f"| {what} | {value:,.1f} |")
    if args.out:
        flat = [{"store": k[0], "data": k[1], "variant": k[2], "runs": v} for k, v in runs.items()]
        with open(args.out, "w") as f:
            json.dump(
                {"header": header, "rows": rows, "runs": flat, "getbatch": latency}, f, indent=1
            )


if __name__ == "__main__":
    main()
