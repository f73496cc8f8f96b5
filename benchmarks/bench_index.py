"""Index build speed and random access, local and on S3 (SeaweedFS), against the alternatives.

Run from the repository root (one command; it writes deterministic shards, starts its own
SeaweedFS on 127.0.0.1, runs every contender interleaved for several rounds, prints tables)::

    python -m benchmarks.bench_index                     # 8 shards x 400 samples of ~16 KiB
    python -m benchmarks.bench_index --shards 4 --per-shard 200 --rounds 2 --quick

Three tables (medians over rounds; contenders of a table alternate within each round):

1. **Index build** (MB/s of shard bytes, samples/s): ``build_index`` (streamed, the reader's
   own tar parser, 1 and 4 shards at a time) against DALI's ``tools/wds2idx.py`` method (GNU
   tar lists each shard twice; ``tests/index/dali_reference.py``), one shard at a time as the
   tool runs and 4 at a time (threads driving the ``tar`` processes). On S3 DALI's method needs
   a local file, so its column includes downloading each shard with boto3.
2. **Random access** (samples/s): ``IndexedWebDataset[i]`` for a random permutation of samples,
   with 1 and 8 reader processes (each reads its share; one ranged GET per sample on S3, a
   memory-map slice locally), against sequential streaming of the same shards
   (``tar_samples``, the shards split among the same number of processes); on S3 also the same
   ranged GETs made with plain boto3 (the transport's floor).
3. **Training order over S3** (samples/s): a fully shuffled epoch, ``DataLoader(
   IndexedWebDataset, batch_size=64, shuffle=True, num_workers=4)``, against sequential
   streaming with a shuffle buffer, ``DataLoader(WebDataset(shardshuffle=True).shuffle(1000)
   .batched(64), batch_size=None, num_workers=4)``. Batches are lists of sample dicts (no decode).

Client, server and worker processes share the machine's cores: compare ratios within a run.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

KEY_ID = "benchkey"
SECRET = "benchsecret"
REGION = "us-east-1"
BUCKET = "bench-index"


# -- data ----------------------------------------------------------------------------------


def make_shard(index: int, per_shard: int, sample_bytes: int) -> bytes:
    """A deterministic shard: ``per_shard`` samples of ``.bin`` (``sample_bytes`` +/- 50 %),
    ``.cls`` and ``.json``, written by our TarWriter (ustar)."""
    from wds_cloud.writing.tarwriter import TarWriter

    rng = random.Random(index)
    block = rng.randbytes(4 * sample_bytes)
    out = io.BytesIO()
    with TarWriter(out, encoder=False) as writer:
        for i in range(per_shard):
            size = rng.randint(sample_bytes // 2, sample_bytes * 3 // 2)
            start = rng.randint(0, len(block) - size)
            writer.write(
                {
                    "__key__": f"s{index:04d}/{i:06d}",
                    "bin": block[start : start + size],
                    "cls": str(i % 10).encode(),
                    "json": b'{"i": %d}' % i,
                }
            )
    return out.getvalue()


# -- helpers -------------------------------------------------------------------------------


def _median_rate(times: list[float], amount: float) -> float:
    return amount / statistics.median(times)


def _rounds(
    contenders: dict[str, Callable[[], Any]], rounds: int, label: str
) -> dict[str, list[float]]:
    """Run every contender once per round, in turn; wall seconds per contender."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for run in contenders.values():  # warm-up: imports, connections, page cache
        run()
    for r in range(rounds):
        for name, run in contenders.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
            print(f"{label} round {r + 1}: {name} {times[name][-1]:.3f} s", file=sys.stderr)
    return times


def _dali_index(path: str) -> bytes:
    from tests.index.dali_reference import wds2idx

    return wds2idx(path)


# -- 1. index build ------------------------------------------------------------------------


def build_contenders(
    paths: list[str], urls: list[str], registry: Any, client: Any, tmp: str
) -> dict[str, dict[str, Callable[[], Any]]]:
    from wds_cloud.index.build import build_index

    def ours(targets: list[str], workers: int, reg: Any) -> Callable[[], Any]:
        return lambda: build_index(targets, json=False, write=False, workers=workers, registry=reg)

    def dali_local(workers: int) -> Callable[[], Any]:
        def run() -> None:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(_dali_index, paths))

        return run

    def dali_s3(workers: int) -> Callable[[], Any]:
        def one(url: str) -> bytes:
            key = url.split("/", 3)[3]
            local = os.path.join(tmp, "dl-" + key.replace("/", "_"))
            client.download_file(BUCKET, key, local)
            try:
                return _dali_index(local)
            finally:
                os.unlink(local)

        def run() -> None:
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(one, urls))

        return run

    return {
        "local": {
            "wds_cloud build_index, 1 at a time": ours(paths, 1, None),
            "wds_cloud build_index, 4 at a time": ours(paths, 4, None),
            "DALI wds2idx method (GNU tar), 1 at a time": dali_local(1),
            "DALI wds2idx method (GNU tar), 4 at a time": dali_local(4),
        },
        "s3": {
            "wds_cloud build_index, 1 at a time": ours(urls, 1, registry),
            "wds_cloud build_index, 4 at a time": ours(urls, 4, registry),
            "download + DALI wds2idx method, 1 at a time": dali_s3(1),
            "download + DALI wds2idx method, 4 at a time": dali_s3(4),
        },
    }


# -- 2. random access vs sequential, 1 and 8 readers -----------------------------------------

_STATE: dict[str, Any] = {}


def _random_part(part: list[int]) -> int:
    ds = _STATE["dataset"]
    return sum(len(ds[i]["bin"]) for i in part)


def _stream_part(urls: list[str]) -> int:
    from wds_cloud.core.samples import tar_samples

    registry = _STATE["registry"]
    total = 0
    for url in urls:
        stream = registry.open(url)
        try:
            total += sum(len(s["bin"]) for s in tar_samples(stream, url))
        finally:
            stream.close()
    return total


def access_contenders(
    dataset: Any, registry: Any, urls: list[str], order: list[int], client: Any = None
) -> tuple[dict[str, Callable[[], Any]], Callable[[], None]]:
    """Random access over ``order`` and sequential streaming of every shard, 1 and 8 readers
    (forked processes started once, before timing, each with its own copy of the dataset).
    Returns the contenders and a function that stops the processes."""
    ctx = get_context("fork")
    _STATE["dataset"] = dataset
    _STATE["registry"] = registry
    pools = {8: ctx.Pool(8)}

    def random_access(readers: int) -> Callable[[], Any]:
        parts = [order[r::readers] for r in range(readers)]
        if readers == 1:
            return lambda: _random_part(parts[0])
        return lambda: pools[readers].map(_random_part, parts, chunksize=1)

    def sequential(readers: int) -> Callable[[], Any]:
        parts = [urls[r::readers] for r in range(readers)]
        if readers == 1:
            return lambda: _stream_part(urls)
        return lambda: pools[readers].map(_stream_part, parts, chunksize=1)

    def stop() -> None:
        for pool in pools.values():
            pool.close()
            pool.join()

    contenders = {
        "random access, 1 reader": random_access(1),
        "random access, 8 readers": random_access(8),
        "sequential stream, 1 reader": sequential(1),
        "sequential stream, 8 readers": sequential(8),
    }
    if client is not None:  # the transport's floor: the same ranged GETs with plain boto3
        spans = []
        for i in order:
            shard, local = dataset.locate(i)
            members = dataset.indexes[shard].sample(local)[1]
            key = dataset.urls[shard].split("/", 3)[3]
            spans.append((key, members[0].offset - 512, members[-1].offset + members[-1].size))

        def raw() -> None:
            for key, first, end in spans:
                client.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={first}-{end - 1}")[
                    "Body"
                ].read()

        contenders["boto3 get_object, same ranges, 1 reader"] = raw
    return contenders, stop


# -- 3. shuffled training order over S3 ------------------------------------------------------


def as_list(batch: list[dict[str, Any]]) -> int:
    """``collate_fn``: the batch size (samples cross the process boundary either way)."""
    return len(batch)


def count_batch(batch: list[dict[str, Any]]) -> int:
    """A map stage: the batch size, so the loader passes what ``as_list`` passes."""
    return len(batch)


def training_contenders(
    json_url: str, registry: Any, batch: int, workers: int
) -> dict[str, Callable[[], Any]]:
    from torch.utils.data import DataLoader

    import wds_cloud as wds

    indexed = wds.IndexedWebDataset(json_url, registry=registry)

    def random_order() -> int:
        loader = DataLoader(
            indexed, batch_size=batch, shuffle=True, num_workers=workers, collate_fn=as_list
        )
        return sum(loader)

    def buffered() -> int:
        stream = (
            wds.WebDataset(json_url, registry=registry, shardshuffle=True)
            .shuffle(1000)
            .batched(batch, collation_fn=None)
            .map(count_batch)
        )
        return sum(DataLoader(stream, batch_size=None, num_workers=workers))

    return {
        "IndexedWebDataset, DataLoader(shuffle=True), full shuffle": random_order,
        "WebDataset(shardshuffle=True).shuffle(1000)": buffered,
    }


# -- main ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, write shards, start SeaweedFS, run the three comparisons, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--per-shard", type=int, default=400)
    parser.add_argument("--sample-kib", type=int, default=16)
    parser.add_argument("--random-samples", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round, no S3 build table")
    args = parser.parse_args(argv)
    rounds = 1 if args.quick else args.rounds

    import wds_cloud as wds
    from tests.support.seaweed import SeaweedServer, boto3_client, create_bucket
    from wds_cloud.openers.registry import OpenerRegistry
    from wds_cloud.openers.s3 import S3Opener

    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        paths, blobs = [], []
        for i in range(args.shards):
            blob = make_shard(i, args.per_shard, args.sample_kib << 10)
            path = os.path.join(tmp, f"shard-{i:04d}.tar")
            Path(path).write_bytes(blob)
            paths.append(path)
            blobs.append(blob)
        nbytes = sum(len(b) for b in blobs)
        nsamples = args.shards * args.per_shard
        with SeaweedServer(Path(tmp) / "weed", access_key=KEY_ID, secret_key=SECRET) as server:
            endpoint = server.endpoint_url
            client = boto3_client(endpoint, access_key=KEY_ID, secret_key=SECRET)
            create_bucket(client, BUCKET)
            urls = []
            for i, blob in enumerate(blobs):
                client.put_object(Bucket=BUCKET, Key=f"train/shard-{i:04d}.tar", Body=blob)
                urls.append(f"s3://{BUCKET}/train/shard-{i:04d}.tar")
            registry = OpenerRegistry()
            registry.register(
                "s3",
                S3Opener(
                    endpoint_url=endpoint,
                    access_key_id=KEY_ID,
                    secret_access_key=SECRET,
                    region=REGION,
                ),
                override=True,
            )
            print(
                f"{args.shards} shards x {args.per_shard} samples of ~{args.sample_kib} KiB "
                f"(.bin + .cls + .json), {nbytes / 1e6:.1f} MB, {os.cpu_count()} CPUs, "
                f"{rounds} rounds",
                file=sys.stderr,
            )
            # the indexes every later table reads
            wds.build_index(paths, json=os.path.join(tmp, "index.json"))
            wds.build_index(urls, json=f"s3://{BUCKET}/train/index.json", registry=registry)
            for path in paths:  # our .idx is DALI's on these ustar shards
                assert Path(path[:-4] + ".idx").read_bytes() == _dali_index(path)

            tables: list[str] = []
            builds = build_contenders(paths, urls, registry, client, tmp)
            rows = ["| where | indexer | MB/s | samples/s |", "|---|---|---:|---:|"]
            for where, contenders in builds.items():
                if where == "s3" and args.quick:
                    continue
                times = _rounds(contenders, rounds, f"build {where}")
                for name, t in times.items():
                    rows.append(
                        f"| {where} | {name} | {_median_rate(t, nbytes / 1e6):.0f} | "
                        f"{_median_rate(t, nsamples):,.0f} |"
                    )
            tables.append("\n".join(rows))

            order = random.Random(7).sample(range(nsamples), min(args.random_samples, nsamples))
            rows = [
                "| where | reader | samples/s | vs sequential, same readers |",
                "|---|---|---:|---:|",
            ]
            for where, source, reg in (
                ("local", os.path.join(tmp, "index.json"), None),
                ("s3", f"s3://{BUCKET}/train/index.json", registry),
            ):
                dataset = wds.IndexedWebDataset(source, registry=reg)
                shard_urls = dataset.urls
                contenders, stop = access_contenders(
                    dataset,
                    reg or OpenerRegistry(),
                    shard_urls,
                    order,
                    client if where == "s3" else None,
                )
                try:
                    times = _rounds(contenders, rounds, f"access {where}")
                finally:
                    stop()
                rates = {}
                for name, t in times.items():
                    amount = nsamples if name.startswith("sequential") else len(order)
                    rates[name] = _median_rate(t, amount)
                for readers in ("1 reader", "8 readers"):
                    rnd = rates[f"random access, {readers}"]
                    seq = rates[f"sequential stream, {readers}"]
                    rows.append(
                        f"| {where} | random access, {readers} | {rnd:,.0f} | {rnd / seq:.2f}x |"
                    )
                    rows.append(f"| {where} | sequential stream, {readers} | {seq:,.0f} | |")
                raw = rates.get("boto3 get_object, same ranges, 1 reader")
                if raw is not None:
                    rows.append(
                        f"| {where} | boto3 get_object, same ranges, 1 reader | {raw:,.0f} | |"
                    )
            tables.append("\n".join(rows))

            training = training_contenders(
                f"s3://{BUCKET}/train/index.json", registry, batch=64, workers=4
            )
            times = _rounds(training, rounds, "training")
            rows = ["| epoch order over S3, batch 64, 4 workers | samples/s |", "|---|---:|"]
            for name, t in times.items():
                rows.append(f"| {name} | {_median_rate(t, nsamples):,.0f} |")
            tables.append("\n".join(rows))

    print(
        f"\n{args.shards} shards x {args.per_shard} samples (~{args.sample_kib} KiB .bin + .cls "
        f"+ .json), {nbytes / 1e6:.1f} MB; median of {rounds} round(s); {os.cpu_count()} CPUs\n"
    )
    print("\n\n".join(tables))


if __name__ == "__main__":
    main()
