"""Loaders: ``make_loader`` (each executor) against hand-built ``WebLoader`` pipelines and
webdataset 1.0.2, on local disk, S3 (SeaweedFS) and GCS (fake-gcs-server).

Run from the repository root::

    python benchmarks/bench_loader.py --quick --backends local   # a few minutes
    python benchmarks/bench_loader.py --out loader.json          # 4 rounds, local + S3 + GCS
    python benchmarks/bench_loader.py --profile make_loader:threads:photo256   # where time goes

Three data sets (``benchmarks/_data.py``): ``photo256`` (photographic-like 256x256 JPEGs, 17-35
KB, decoded to uint8 RGB with ``decode("rgb8")``: decode dominates, as on real photos),
``jpeg256`` (256x256 gradient + uniform noise JPEGs, all ~27 KB, the same decode) and ``small`` (8 KB JPEG + cls + json, no
decode: the case where the loader's inter-process traffic is the limit). Every variant
delivers batches of 64 ``(jpg, cls)`` columns with 2 DataLoader workers and shuffles off:

- ``webdataset``: ``webdataset.WebLoader(WebDataset(urls).decode().to_tuple().batched(64),
  batch_size=None, num_workers=2)``, the pattern webdataset's README shows;
- ``hand``: the same code with ``import wds_cloud as wds``;
- ``make_loader``: ``wds.make_loader(urls, batch_size=64, num_workers=2, shuffle_buffer=0,
  shardshuffle=False, ...)``, the one-call loader the README recommends;
- ``make_loader+shuffle``: the same with ``shuffle_buffer=1000`` (worker and main-process
  shuffle buffers, the default);
- ``hand-noshm``: ``hand`` with ``shm_batches=False``: tensors cross the process boundary
  through torch's fresh shared-memory segment per tensor instead of the workers' reused
  arena (``wds_cloud.pytorch.shm``);
- ``hand-0w``: ``hand`` with ``num_workers=0``, to price the process boundary;
- ``make_loader:threads`` and ``make_loader:subprocess-threads`` (``--executors``): the
  ``make_loader`` call with ``executor="threads"`` (one process, ``num_workers`` = the cores'
  count of decode threads) and ``executor="subprocess-threads"`` (the same pipeline in one
  child process, batches through the shared-memory arena). ``make_loader`` itself is
  ``executor="processes"`` (2 worker processes).

The **decode limit** of each JPEG data set is measured in the same run, in a fresh
interpreter: the time to decode one of its images to uint8 RGB with the loaders' decoder
(``wds.imagehandler("rgb8")``: simplejpeg when installed), in a tight single-thread loop over
the first shard's images; the limit is ``cores / that time`` samples/s, with the fastest
round's time (the least disturbed: a conservative limit). On a machine shared
with other work that wall time (and so the limit) moves with the neighbours' load, so the
decode's thread CPU time is measured too, and each loader's ``decode share of CPU`` is that
CPU time over the loader's CPU per sample (whole tree): the fraction of the decode limit the
loader reaches when it has every core to itself and keeps them busy.

``--backends`` adds S3 and GCS: the shards are uploaded to a SeaweedFS and a fake-gcs-server
started on 127.0.0.1 (``benchmarks/_stores.py``); wds_cloud reads ``s3://``/``gs://``,
webdataset reads the same objects over HTTP (presigned GETs, media downloads) through its
``curl`` pipe. Remote backends run ``webdataset``, ``hand``, ``hand-0w`` and the executors.

Every measurement is a fresh interpreter; variants are interleaved round-robin (order
rotating). Reported: samples/s (median of rounds), CPU microseconds per sample of the whole
process tree (the loader's workers: reaped ones from ``getrusage``, live ones, such as the
subprocess-threads child, from ``/proc``), samples per CPU-second, the peak RSS of the tree
(sampled every 50 ms from the parent), the ratio to webdataset per round, and the
inter-process cost per sample: CPU us/sample of ``hand`` (and ``hand-noshm``) minus
``hand-0w``. Each executor row is also compared with ``make_loader`` (processes): samples per
CPU-second and peak RSS ratios, and % of the decode limit. ``--variants`` runs a subset
(``hand``, ``hand-0w`` and ``webdataset`` are always run: the summary needs them).
``--profile VARIANT:REGIME`` runs one profiled pass (``profile=True``) of a ``make_loader``
variant on local data and prints its per-stage table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _data  # benchmarks/ is not a package
import _stores

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE = ("webdataset", "hand", "make_loader", "make_loader+shuffle", "hand-noshm", "hand-0w")
EXECUTORS = ("processes", "threads", "subprocess-threads")
REQUIRED = ("webdataset", "hand", "hand-0w")
REMOTE = ("webdataset", "hand", "hand-0w", "make_loader")  # + the executor variants
DECODE = {"photo256": "rgb8", "jpeg256": "rgb8", "small": None}
FULL: dict[str, Any] = {
    "specs": {"photo256": (4, 1000), "jpeg256": (4, 1000), "small": (4, 5000)},
    "rounds": 4,
    "min_seconds": 2.0,
}
QUICK: dict[str, Any] = {
    "specs": {"photo256": (2, 400), "jpeg256": (2, 400), "small": (2, 2500)},
    "rounds": 2,
    "min_seconds": 0.5,
}
CORES = os.cpu_count() or 1


def executor_variant(executor: str) -> str:
    """The variant name of ``make_loader(executor=...)``."""
    return "make_loader" if executor == "processes" else f"make_loader:{executor}"


def build(variant: str, regime: str, urls: list[str], profile: bool = False) -> Any:
    """The timed loader of one variant."""
    decode = DECODE[regime]
    if variant.startswith("make_loader"):
        import wds_cloud as wds

        executor = variant.partition(":")[2] or "processes"
        kw: dict[str, Any] = {"profile": True} if profile else {}
        if executor != "processes":
            kw["executor"] = executor
        return wds.make_loader(
            urls,
            batch_size=64,
            num_workers=2 if executor == "processes" else CORES,
            shuffle_buffer=1000 if variant.endswith("shuffle") else 0,
            shardshuffle=False,
            decode=decode,
            to_tuple="jpg cls",
            **kw,
        )
    if variant == "webdataset":
        import webdataset as wds_ref

        lib: Any = wds_ref
    else:
        import wds_cloud as wds

        lib = wds
    ds = lib.WebDataset(urls, shardshuffle=False)
    if decode:
        ds = ds.decode(decode)
    ds = ds.to_tuple("jpg", "cls").batched(64)
    workers = 0 if variant == "hand-0w" else 2
    if variant == "hand-noshm":
        return lib.WebLoader(ds, batch_size=None, num_workers=workers, shm_batches=False)
    return lib.WebLoader(ds, batch_size=None, num_workers=workers)


def decode_seconds(urls: list[str], min_seconds: float) -> dict[str, Any]:
    """Seconds to decode one JPEG of the first shard to uint8 RGB, one thread, tight loop."""
    import wds_cloud as wds

    handler = wds.imagehandler("rgb8")
    images = [s["jpg"] for s in wds.WebDataset(urls[:1], shardshuffle=False)][:256]
    n = 0
    t0, cpu0 = time.perf_counter(), time.thread_time()
    while True:
        for data in images:
            handler("jpg", data)
        n += len(images)
        elapsed = time.perf_counter() - t0
        if elapsed >= max(min_seconds, 0.2):
            break
    cpu = time.thread_time() - cpu0
    return {"decode_s": elapsed / n, "decode_cpu_s": cpu / n, "decoder": handler.jpeg_decoder}


def worker(variant: str, regime: str, urls: list[str], min_seconds: float) -> dict[str, Any]:
    """Subprocess side: time whole passes until ``min_seconds``."""
    if variant == "decode-limit":
        return decode_seconds(urls, min_seconds)
    loader = build(variant, regime, urls)
    cpu0 = _data.tree_cpu_seconds()
    timed = _data.timed_passes(lambda: sum(len(batch[1]) for batch in loader), min_seconds)
    cpu = _data.tree_cpu_seconds() - cpu0
    close = getattr(loader, "close", None)
    if close is not None:
        close()
    return {
        "samples_per_s": timed.samples / timed.wall_s,
        "cpu_us_per_sample": cpu / timed.samples * 1e6,
        "counts": timed.counts,
    }


def run(
    variant: str, regime: str, urls: list[str], conf: dict[str, Any], env: dict[str, str]
) -> dict[str, Any]:
    """Parent side: one fresh interpreter for one (variant, regime); adds the tree's peak RSS."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", variant, "--regime", regime]
    cmd += ["--urls", json.dumps(urls), "--min-seconds", str(conf["min_seconds"])]
    env = dict(os.environ, **env, PYTHONPATH=ROOT)
    result = _data.run_json_worker(cmd, env, ROOT, f"{variant} {regime}")
    result["peak_rss_mib"] = result.pop("peak_rss") / 2**20
    return result


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def summarise(
    cell: str,
    runs: dict[str, list[dict[str, Any]]],
    variants: tuple[str, ...],
    limit: float | None,
    decode_cpu_us: float | None = None,
) -> tuple[dict[str, Any], str]:
    """One table row per variant for ``cell`` (``backend/regime``), the IPC cost line and the
    executor comparison."""
    ref = runs["webdataset"]
    base = runs.get("make_loader")
    rows = []
    out: dict[str, Any] = {"cell": cell, "variants": {}, "decode_limit": limit}
    out["decode_cpu_us"] = decode_cpu_us
    for v in variants:
        rate = _median(runs[v], "samples_per_s")
        cpu = _median(runs[v], "cpu_us_per_sample")
        rss = _median(runs[v], "peak_rss_mib")
        ratios = [
            a["samples_per_s"] / b["samples_per_s"] for a, b in zip(runs[v], ref, strict=True)
        ]
        ratio = statistics.median(ratios)
        got: dict[str, Any] = {
            "samples_per_s": rate,
            "cpu_us_per_sample": cpu,
            "samples_per_cpu_s": 1e6 / cpu,
            "peak_rss_mib": rss,
            "ratio": ratio,
        }
        extra = ""
        if limit:
            got["of_decode_limit"] = rate / limit
            extra += f" {rate / limit:.0%} of limit;"
        if decode_cpu_us:
            # the share of the tree's CPU that is decoding: the fraction of the decode limit
            # reached with every core busy on this loader (robust to other load)
            got["decode_share_of_cpu"] = decode_cpu_us / cpu
            extra += f" decode {decode_cpu_us / cpu:.0%} of CPU;"
        if base is not None and v.startswith("make_loader:"):
            got["cpu_eff_vs_processes"] = _median(base, "cpu_us_per_sample") / cpu
            got["rss_vs_processes"] = rss / _median(base, "peak_rss_mib")
            extra += (
                f" {got['cpu_eff_vs_processes']:.2f}x samples/CPU-s,"
                f" {got['rss_vs_processes']:.2f}x RSS vs make_loader;"
            )
        out["variants"][v] = got
        rows.append(
            f"| {cell} | {v} | {rate:,.0f} | {cpu:,.1f} | {1e6 / cpu:,.0f} | {rss:,.0f} | "
            f"{ratio:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |{extra.rstrip(';')} |"
        )
    if "hand" in out["variants"] and "hand-0w" in out["variants"]:
        hand, inproc = out["variants"]["hand"], out["variants"]["hand-0w"]
        out["ipc_us_per_sample"] = hand["cpu_us_per_sample"] - inproc["cpu_us_per_sample"]
        mk = ""
        if "make_loader" in out["variants"]:
            ratio = out["variants"]["make_loader"]["samples_per_s"] / hand["samples_per_s"]
            out["make_loader_over_hand"] = ratio
            mk = f"make_loader / hand {ratio:.2f}x"
        rows.append(
            f"| {cell} | process boundary | | {out['ipc_us_per_sample']:,.1f} (hand - hand-0w) "
            f"| | | {mk} | |"
        )
        if "hand-noshm" in out["variants"]:
            noshm = out["variants"]["hand-noshm"]
            ipc = noshm["cpu_us_per_sample"] - inproc["cpu_us_per_sample"]
            out["ipc_noshm_us_per_sample"] = ipc
            rows.append(
                f"| {cell} | process boundary, no shm arena | | {ipc:,.1f} "
                "(hand-noshm - hand-0w) | | | | |"
            )
    if limit:
        rows.append(
            f"| {cell} | decode limit ({CORES} cores) | {limit:,.0f} | {decode_cpu_us or 0:,.1f} "
            "(one decode) | | | | |"
        )
    return out, "\n".join(rows)


def profile_one(spec: str, data_dir: str, conf: dict[str, Any]) -> str:
    """One profiled pass of ``VARIANT:REGIME`` on local data: the per-stage table."""
    variant, _, regime = spec.rpartition(":")
    sys.path.insert(0, ROOT)  # this checkout's wds_cloud, as the measuring subprocesses get
    data = _data.ensure(_data.DataSpec(regime, *conf["specs"][regime]), data_dir)
    loader = build(variant, regime, list(data.paths), profile=True)
    n = sum(len(batch[1]) for batch in loader)
    report = loader.profile_report()
    close = getattr(loader, "close", None)
    if close is not None:
        close()
    table: str = report.table() if report is not None else "(no profile report)"
    return f"{variant} {regime}: {n} samples\n{table}"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    _data.add_run_options(p, ROOT)
    p.add_argument("--regimes", default="photo256,jpeg256,small")
    p.add_argument("--regime", help=argparse.SUPPRESS)
    p.add_argument("--variants", default=",".join(BASE), help="comma-separated subset")
    p.add_argument("--executors", default=",".join(EXECUTORS), help="make_loader executors")
    p.add_argument("--backends", default="local,s3,gcs", help="subset of local,s3,gcs")
    p.add_argument("--profile", help="VARIANT:REGIME: one profiled pass, its stage table")
    args = p.parse_args(argv)
    if args.worker:
        res = worker(args.worker, args.regime, json.loads(args.urls), args.min_seconds)
        print(json.dumps(res))
        return 0
    conf = _data.run_conf(args, QUICK, FULL)
    if args.profile:
        print(profile_one(args.profile, args.data_dir, conf))
        return 0
    regimes = args.regimes.split(",")
    backends = args.backends.split(",")
    data = {
        r: _data.ensure(_data.DataSpec(r, *conf["specs"][r]), args.data_dir, log=print)
        for r in regimes
    }
    executors = [executor_variant(e) for e in args.executors.split(",") if e]
    unknown = set(args.executors.split(",")) - set(EXECUTORS)
    if unknown:
        raise SystemExit(f"unknown executors {sorted(unknown)}; choose from {EXECUTORS}")
    wanted = set(args.variants.split(",")) | set(REQUIRED) | set(executors)
    order_all = (*BASE, *(executor_variant(e) for e in EXECUTORS[1:]))
    local_variants = tuple(v for v in order_all if v in wanted)
    remote_variants = tuple(v for v in local_variants if v in REMOTE or v in executors)
    with (
        tempfile.TemporaryDirectory(prefix="bench-loader-") as tmp,
        _stores.Stores(backends, Path(tmp)) as stores,
    ):
        staged = {
            (b, r): stores.stage(b, list(data[r].paths), r) for b in backends for r in regimes
        }
        results = measure(conf, data, staged, local_variants, remote_variants)
    lines = [
        "| data | loader | samples/s | CPU us/sample (process tree) | samples per CPU-s | "
        "peak RSS MiB (tree) | / webdataset (min-max) | vs make_loader, decode limit |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    summary = []
    for (backend, regime), runs in results["runs"].items():
        cell = f"{backend}/{regime}"
        limit, decode_cpu_us = results["limits"].get(regime), results["decode_cpu_us"].get(regime)
        s, rows = summarise(cell, runs, tuple(runs), limit, decode_cpu_us)
        summary.append(s)
        lines.append(rows)
    md = "\n".join(lines)
    print(md)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {"conf": conf, "cores": CORES, "cells": summary, "table_markdown": md},
                f,
                indent=1,
            )
    return 0


def measure(
    conf: dict[str, Any],
    data: dict[str, Any],
    staged: dict[tuple[str, str], Any],
    local_variants: tuple[str, ...],
    remote_variants: tuple[str, ...],
) -> dict[str, Any]:
    """Every round: the decode limits, then every (backend, regime, variant), interleaved."""
    runs: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    limits: dict[str, list[float]] = {}
    decode_cpu: dict[str, list[float]] = {}
    for rnd in range(conf["rounds"]):
        for regime in {r: None for _, r in staged if DECODE[r]}:
            urls = list(data[regime].paths)
            got = run("decode-limit", regime, urls, conf, {})
            limits.setdefault(regime, []).append(got["decode_s"])
            decode_cpu.setdefault(regime, []).append(got["decode_cpu_s"])
            print(
                f"round {rnd} {regime}: decode {got['decode_s'] * 1e6:.0f} us/image, "
                f"{got['decode_cpu_s'] * 1e6:.0f} CPU us ({got['decoder']})",
                file=sys.stderr,
            )
        for (backend, regime), where in staged.items():
            variants = local_variants if backend == "local" else remote_variants
            k = rnd % len(variants)
            order = variants[k:] + variants[:k]
            urls = list(data[regime].paths)
            _data.warm(urls)
            expected = len(urls) * data[regime].spec.per_shard
            cell = runs.setdefault((backend, regime), {v: [] for v in variants})
            for v in order:
                res = run(
                    v, regime, where.http_urls if v == "webdataset" else where.urls, conf, where.env
                )
                if res["counts"] != [expected]:
                    raise RuntimeError(
                        f"{v} {backend}/{regime}: {res['counts']} samples, not {expected}"
                    )
                cell[v].append(res)
                print(
                    f"round {rnd} {backend:5s} {regime:8s} {v:30s} {res['samples_per_s']:>9,.0f} "
                    f"samples/s {res['cpu_us_per_sample']:>8.1f} CPU us/sample "
                    f"{res['peak_rss_mib']:>6.0f} MiB",
                    file=sys.stderr,
                )
    return {
        "runs": runs,
        # the fastest round: the one least disturbed by other work (a short single-thread
        # measurement catches the neighbours' spikes; its median swung 10x on a shared VM)
        "limits": {r: CORES / min(ts) for r, ts in limits.items()},
        "decode_cpu_us": {r: statistics.median(ts) * 1e6 for r, ts in decode_cpu.items()},
    }


if __name__ == "__main__":
    sys.exit(main())
