"""JPEG decoding: wds_cloud (simplejpeg path and PIL path) against webdataset 1.0.2.

Run from the repository root::

    python benchmarks/bench_decode.py --quick                    # ~2 minutes
    python benchmarks/bench_decode.py --out decode.json          # 4 rounds
    python benchmarks/bench_decode.py --baseline /tmp/old-wds    # add another checkout's wds_cloud

Cells (``docs/decoding.md`` has the results): ``small`` is bench_core's 64x64 4:4:4 JPEG data
(one shard), ``jpeg256`` 256x256 4:2:0 JPEGs of gradient + noise and ``photo256`` 256x256
photographic-like 4:2:0 JPEGs (one shard for the single-process cells, two for the loader). Each cell runs ``WebDataset(urls, shardshuffle=False).decode(SPEC).to_tuple("jpg",
"cls")``, single process, or through ``WebLoader(... .batched(64), batch_size=None,
num_workers=2)``. Libraries: ``wds_cloud`` as installed (simplejpeg when present),
``wds_cloud-pil`` (the same code with ``WDS_CLOUD_JPEG_DECODER=pil``), ``webdataset``, and with
``--baseline DIR`` the wds_cloud found in ``DIR``. As in ``bench_core.py``, every measurement is
a fresh interpreter, libraries are interleaved round-robin (order rotating), and each ratio to
webdataset is taken per round; the table gives its median and min-max.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _data  # benchmarks/ is not a package

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Cell:
    """One measurement: data regime, image spec, loader or not, shards used, target ratio."""

    regime: str
    spec: str
    loader: bool
    shards: int
    target: float | None

    @property
    def name(self) -> str:
        return f"{self.regime} {self.spec}{' loader' if self.loader else ''}"


CELLS = (
    Cell("small", "rgb", False, 1, 2.5),
    Cell("small", "rgb8", False, 1, None),
    Cell("small", "torchrgb8", False, 1, None),
    Cell("jpeg256", "rgb8", False, 1, None),
    Cell("jpeg256", "torchrgb8", False, 1, None),
    Cell("jpeg256", "torchrgb8", True, 2, 1.3),
    Cell("photo256", "rgb8", False, 1, None),
    Cell("photo256", "torchrgb8", False, 1, None),
    Cell("photo256", "torchrgb8", True, 2, None),
)
FULL = {
    "specs": {"small": (4, 5000), "jpeg256": (2, 2000), "photo256": (2, 2000)},
    "rounds": 4,
    "min_seconds": 2.0,
}
QUICK = {
    "specs": {"small": (2, 1000), "jpeg256": (2, 400), "photo256": (2, 400)},
    "rounds": 2,
    "min_seconds": 0.5,
}


def build(lib: str, cell: Cell, urls: list[str]) -> Any:
    """The timed pipeline for one library."""
    if lib == "webdataset":
        import webdataset as wds
    else:
        import wds_cloud as wds  # type: ignore[no-redef]
    ds = wds.WebDataset(urls, shardshuffle=False).decode(cell.spec).to_tuple("jpg", "cls")
    if cell.loader:
        return wds.WebLoader(ds.batched(64), batch_size=None, num_workers=2)
    return ds


def worker(lib: str, cell: Cell, urls: list[str], min_seconds: float) -> dict[str, Any]:
    """Subprocess side: time passes until ``min_seconds``; return samples/s and the count."""
    pipeline = build(lib, cell, urls)

    def one_pass() -> int:
        return sum(len(item[1]) if cell.loader else 1 for item in pipeline)

    timed = _data.timed_passes(one_pass, min_seconds)
    if lib.startswith("wds_cloud"):
        from wds_cloud.core.imagedecode import ImageHandler

        decoder = getattr(ImageHandler(cell.spec), "jpeg_decoder", "pil (no jpeg_decoder)")
    else:
        decoder = "pil"
    return {
        "samples_per_s": timed.samples / timed.wall_s,
        "counts": timed.counts,
        "decoder": decoder,
    }


def run(lib: str, pythonpath: str, cell: Cell, urls: list[str], conf: dict[str, Any]) -> dict:
    """Parent side: one fresh interpreter for one (library, cell)."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    env.pop("WDS_CLOUD_JPEG_DECODER", None)
    if lib == "wds_cloud-pil":
        env["WDS_CLOUD_JPEG_DECODER"] = "pil"
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib]
    cmd += ["--cell", json.dumps([cell.regime, cell.spec, cell.loader, cell.shards, None])]
    cmd += ["--urls", json.dumps(urls), "--min-seconds", str(conf["min_seconds"])]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{lib} {cell.name} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    _data.add_run_options(p, ROOT)
    p.add_argument("--baseline", help="directory holding another wds_cloud checkout to compare")
    p.add_argument("--cell", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        cell = Cell(*json.loads(args.cell))
        print(json.dumps(worker(args.worker, cell, json.loads(args.urls), args.min_seconds)))
        return 0

    conf = _data.run_conf(args, QUICK, FULL)
    libs = {"wds_cloud": ROOT, "wds_cloud-pil": ROOT, "webdataset": ROOT}
    if args.baseline:
        libs["baseline"] = os.path.abspath(args.baseline)
    data = {
        r: _data.ensure(_data.DataSpec(r, *spec), args.data_dir, log=print)
        for r, spec in conf["specs"].items()
    }
    names = list(libs)
    runs: dict[Cell, dict[str, list[dict[str, Any]]]] = {c: {n: [] for n in names} for c in CELLS}
    for rnd in range(conf["rounds"]):
        order = names[rnd % len(names) :] + names[: rnd % len(names)]
        for cell in CELLS:
            urls = list(data[cell.regime].paths[: cell.shards])
            _data.warm(urls)
            expected = cell.shards * data[cell.regime].spec.per_shard
            for lib in order:
                res = run(lib, libs[lib], cell, urls, conf)
                if res["counts"] != [expected]:
                    raise RuntimeError(
                        f"{lib} {cell.name}: {res['counts']} samples, not {expected}"
                    )
                runs[cell][lib].append(res)
                print(
                    f"round {rnd} {cell.name:24s} {lib:14s} {res['samples_per_s']:>9,.0f} "
                    f"samples/s ({res['decoder']})",
                    file=sys.stderr,
                )
    head = "| cell | " + " | ".join(f"{n} samples/s" for n in names)
    head += " | " + " | ".join(f"{n} / webdataset" for n in names if n != "webdataset")
    lines = [head + " | target |", "|---" * (2 * len(names)) + "|---|"]
    summary = []
    for cell in CELLS:
        r = runs[cell]
        rates = {n: statistics.median(x["samples_per_s"] for x in r[n]) for n in names}
        ratios = {}
        for n in names:
            if n != "webdataset":
                per_round = [
                    a["samples_per_s"] / b["samples_per_s"]
                    for a, b in zip(r[n], r["webdataset"], strict=True)
                ]
                ratios[n] = (statistics.median(per_round), min(per_round), max(per_round))
        summary.append(
            {"cell": cell.name, "rates": rates, "ratios": ratios, "target": cell.target, "runs": r}
        )
        cols = [f"{rates[n]:,.0f}" for n in names]
        cols += [f"{m:.2f}x ({lo:.2f}-{hi:.2f})" for m, lo, hi in ratios.values()]
        target = f">= {cell.target:g}x" if cell.target else "-"
        lines.append(f"| {cell.name} | " + " | ".join(cols) + f" | {target} |")
    md = "\n".join(lines)
    print(md)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {"conf": conf, "libs": libs, "cells": summary, "table_markdown": md}, f, indent=1
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
