"""Loaders: ``make_loader`` against hand-built ``WebLoader`` pipelines and webdataset 1.0.2.

Run from the repository root::

    python benchmarks/bench_loader.py --quick            # ~2 minutes
    python benchmarks/bench_loader.py --out loader.json  # 4 rounds

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
- ``hand-0w``: ``hand`` with ``num_workers=0``, to price the process boundary.

Every measurement is a fresh interpreter; variants are interleaved round-robin (order
rotating). Reported: samples/s (median of rounds), CPU microseconds per sample of the whole
process tree (the loader's workers included: they are joined at the end of each pass), the
ratio to webdataset per round, and the inter-process cost per sample: CPU us/sample of
``hand`` (and ``hand-noshm``) minus ``hand-0w``. ``--variants`` runs a subset (``hand``,
``hand-0w`` and ``webdataset`` are always run: the summary needs them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _data  # benchmarks/ is not a package

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("webdataset", "hand", "make_loader", "make_loader+shuffle", "hand-noshm", "hand-0w")
REQUIRED = ("webdataset", "hand", "hand-0w")
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


def build(variant: str, regime: str, urls: list[str]) -> Any:
    """The timed loader of one variant."""
    decode = DECODE[regime]
    if variant.startswith("make_loader"):
        import wds_cloud as wds

        return wds.make_loader(
            urls,
            batch_size=64,
            num_workers=2,
            shuffle_buffer=1000 if variant.endswith("shuffle") else 0,
            shardshuffle=False,
            decode=decode,
            to_tuple="jpg cls",
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


def worker(variant: str, regime: str, urls: list[str], min_seconds: float) -> dict[str, Any]:
    """Subprocess side: time whole passes until ``min_seconds``."""
    loader = build(variant, regime, urls)
    timed = _data.timed_passes(lambda: sum(len(batch[1]) for batch in loader), min_seconds)
    return {
        "samples_per_s": timed.samples / timed.wall_s,
        "cpu_us_per_sample": timed.cpu_s / timed.samples * 1e6,
        "counts": timed.counts,
    }


def run(variant: str, regime: str, urls: list[str], conf: dict[str, Any]) -> dict[str, Any]:
    """Parent side: one fresh interpreter for one (variant, regime)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", variant, "--regime", regime]
    cmd += ["--urls", json.dumps(urls), "--min-seconds", str(conf["min_seconds"])]
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} {regime} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def summarise(
    regime: str, runs: dict[str, list[dict[str, Any]]], variants: tuple[str, ...]
) -> tuple[dict[str, Any], str]:
    """One table row per variant for ``regime``, and the IPC cost line."""
    ref = runs["webdataset"]
    rows = []
    out: dict[str, Any] = {"regime": regime, "variants": {}}
    for v in variants:
        rate = statistics.median(r["samples_per_s"] for r in runs[v])
        cpu = statistics.median(r["cpu_us_per_sample"] for r in runs[v])
        ratios = [
            a["samples_per_s"] / b["samples_per_s"] for a, b in zip(runs[v], ref, strict=True)
        ]
        ratio = statistics.median(ratios)
        out["variants"][v] = {"samples_per_s": rate, "cpu_us_per_sample": cpu, "ratio": ratio}
        rows.append(
            f"| {regime} | {v} | {rate:,.0f} | {cpu:,.1f} | {ratio:.2f}x "
            f"({min(ratios):.2f}-{max(ratios):.2f}) |"
        )
    hand, inproc = out["variants"]["hand"], out["variants"]["hand-0w"]
    out["ipc_us_per_sample"] = hand["cpu_us_per_sample"] - inproc["cpu_us_per_sample"]
    mk = ""
    if "make_loader" in out["variants"]:
        ratio = out["variants"]["make_loader"]["samples_per_s"] / hand["samples_per_s"]
        out["make_loader_over_hand"] = ratio
        mk = f"make_loader / hand {ratio:.2f}x"
    rows.append(
        f"| {regime} | process boundary | | {out['ipc_us_per_sample']:,.1f} (hand - hand-0w) | "
        f"{mk} |"
    )
    if "hand-noshm" in out["variants"]:
        noshm = out["variants"]["hand-noshm"]
        out["ipc_noshm_us_per_sample"] = noshm["cpu_us_per_sample"] - inproc["cpu_us_per_sample"]
        rows.append(
            f"| {regime} | process boundary, no shm arena | | "
            f"{out['ipc_noshm_us_per_sample']:,.1f} (hand-noshm - hand-0w) | |"
        )
    return out, "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    _data.add_run_options(p, ROOT)
    p.add_argument("--regimes", default="photo256,jpeg256,small")
    p.add_argument("--regime", help=argparse.SUPPRESS)
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset")
    args = p.parse_args(argv)
    if args.worker:
        res = worker(args.worker, args.regime, json.loads(args.urls), args.min_seconds)
        print(json.dumps(res))
        return 0
    conf = _data.run_conf(args, QUICK, FULL)
    regimes = args.regimes.split(",")
    data = {
        r: _data.ensure(_data.DataSpec(r, *conf["specs"][r]), args.data_dir, log=print)
        for r in regimes
    }
    wanted = set(args.variants.split(",")) | set(REQUIRED)
    variants = tuple(v for v in VARIANTS if v in wanted)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        r: {v: [] for v in variants} for r in regimes
    }
    for rnd in range(conf["rounds"]):
        k = rnd % len(variants)
        order = variants[k:] + variants[:k]
        for regime in regimes:
            urls = list(data[regime].paths)
            _data.warm(urls)
            expected = len(urls) * data[regime].spec.per_shard
            for v in order:
                res = run(v, regime, urls, conf)
                if res["counts"] != [expected]:
                    raise RuntimeError(f"{v} {regime}: {res['counts']} samples, not {expected}")
                runs[regime][v].append(res)
                print(
                    f"round {rnd} {regime:8s} {v:20s} {res['samples_per_s']:>9,.0f} samples/s "
                    f"{res['cpu_us_per_sample']:>8.1f} CPU us/sample",
                    file=sys.stderr,
                )
    lines = [
        "| data | loader | samples/s | CPU us/sample (process tree) | / webdataset (min-max) |",
        "|---|---|---:|---:|---|",
    ]
    summary = []
    for regime in regimes:
        s, rows = summarise(regime, runs[regime], variants)
        summary.append(s)
        lines.append(rows)
    md = "\n".join(lines)
    print(md)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"conf": conf, "regimes": summary, "table_markdown": md}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
