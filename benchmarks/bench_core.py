"""wds_cloud against webdataset 1.0.2 on local shards: throughput ratios, peak RSS, import RSS.

Run from the repository root::

    python benchmarks/bench_core.py --quick                # < 2 minutes, small data
    python benchmarks/bench_core.py --out results.json     # full run, < ~10 minutes on 2 cores

Method (see ``docs/benchmarks.md``): data is generated deterministically and cached under
``bench_data/`` (``benchmarks/_data.py``). Every (regime, mode, library) measurement runs in a
fresh subprocess (clean peak RSS, no shared warm-up), and the two libraries are interleaved
round-robin in one run: for each round, for each cell, the shards are read once to warm the page
cache, then both libraries run back to back (the order alternates between rounds). The ratio
wds_cloud / webdataset is computed per round; the table gives its median and min-max, which are
robust to the neighbours on a shared VM in a way that absolute rates are not.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _data  # benchmarks/ is not a package

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBS = ("wds_cloud", "webdataset")
IMPORT_RSS_TARGET_MB = 40.0


@dataclass(frozen=True)
class Cell:
    """One (regime, mode) measurement and its target ratio (None: reported, no target)."""

    regime: str
    mode: str
    target: float | None
    shards: int | None = None  # use only the first N shards (decode modes)


CELLS = (
    Cell("tiny", "nodecode", 12.0),
    Cell("tiny", "shuffle", None),
    Cell("tiny", "loader", 5.0),
    Cell("pax", "nodecode", 12.0),
    Cell("small", "nodecode", 10.0),
    Cell("small", "decode", 2.5, shards=1),
    Cell("small", "shuffle", None),
    Cell("small", "loader", 5.0),
    Cell("large", "nodecode", 3.0),
    Cell("large", "zerocopy", 3.0),
    Cell("large", "decode", None, shards=1),
)

MODES = ("nodecode", "zerocopy", "decode", "shuffle", "loader")
TUPLES = {
    "tiny": ("txt", "cls"),
    "pax": ("txt", "cls"),
    "small": ("jpg", "cls"),
    "large": ("image.png", "label.png"),
}
FULL: dict[str, Any] = {
    "specs": {"tiny": (4, 10000), "pax": (2, 10000), "small": (4, 5000), "large": (2, 30)},
    "rounds": 4,
    "min_seconds": 2.0,
    "grouped": False,
    "import_repeats": 3,
}
QUICK: dict[str, Any] = {
    "specs": {"tiny": (2, 2500), "pax": (1, 2500), "small": (2, 1000), "large": (2, 3)},
    "rounds": 2,
    "min_seconds": 0.3,
    "grouped": True,
    "import_repeats": 1,
}


# ----------------------------------------------------------------------------- worker side


def build(lib: str, mode: str, regime: str, urls: list[str]) -> Any:
    """The pipeline for one library and mode; iterating it is what is timed."""
    if lib == "wds_cloud":
        import wds_cloud as wds

        dataset, loader_cls = wds.WebDataset, wds.WebLoader
    else:
        import webdataset as wds_ref

        dataset, loader_cls = wds_ref.WebDataset, wds_ref.WebLoader
    if mode == "zerocopy" and lib == "wds_cloud":  # opt-in memoryviews; webdataset has none
        return dataset(urls, shardshuffle=False, zero_copy=True)
    ds = dataset(urls, shardshuffle=False)
    if mode in ("nodecode", "zerocopy"):
        return ds
    if mode == "decode":
        return ds.decode("rgb").to_tuple(*TUPLES[regime])
    if mode == "shuffle":
        return ds.shuffle(1000)
    if mode == "loader":
        batched = ds.to_tuple(*TUPLES[regime]).batched(64)
        return loader_cls(batched, batch_size=None, num_workers=2)
    raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")


def one_pass(pipeline: Any, mode: str) -> int:
    """Iterate the pipeline once; return the number of samples seen."""
    n = 0
    if mode == "loader":
        for batch in pipeline:
            n += len(batch[1])
    else:
        for _ in pipeline:
            n += 1
    return n


def peak_rss_mb() -> float:
    """Peak RSS of this process in MB (``VmHWM``: per address space, reset by ``exec``).

    ``ru_maxrss`` is not used for this process because Linux carries the parent's peak over
    ``fork``+``exec``, so a child started by a 250 MB parent reports at least 250 MB.
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> None:
    """Reset ``VmHWM`` to the current RSS (Linux ``clear_refs`` 5), so a cell's peak is its own."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def measure(lib: str, regime: str, mode: str, urls: list[str], args: argparse.Namespace) -> dict:
    """Build one pipeline, then time passes until ``min_seconds``; return the raw numbers."""
    reset_peak_rss()
    pipeline = build(lib, mode, regime, urls)
    rss_built = peak_rss_mb()
    timed = _data.timed_passes(lambda: one_pass(pipeline, mode), args.min_seconds, args.max_passes)
    return {
        "samples": timed.samples,
        "passes": timed.passes,
        "samples_per_pass": timed.counts,
        "wall_s": timed.wall_s,
        "cpu_s": timed.cpu_s,
        "rss_after_build_mb": rss_built,
        "peak_rss_mb": peak_rss_mb(),
        "children_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def worker(args: argparse.Namespace) -> None:
    """Subprocess entry: measure each ``[regime, mode, urls]`` of ``--cells``; print JSON."""
    results = [measure(args.lib, r, m, urls, args) for r, m, urls in json.loads(args.cells)]
    print(json.dumps(results))


# ----------------------------------------------------------------------------- parent side


def run_worker(
    lib: str, jobs: list[tuple[Cell, _data.DataSet, list[str]]], conf: dict[str, Any]
) -> list[dict[str, Any]]:
    """Run measurements in one fresh interpreter; return one result (with rates) per job."""
    cells = [[cell.regime, cell.mode, paths] for cell, _, paths in jobs]
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--lib", lib]
    cmd += ["--cells", json.dumps(cells), "--min-seconds", str(conf["min_seconds"])]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    names = ", ".join(f"{c.regime}/{c.mode}" for c, _, _ in jobs)
    if proc.returncode != 0:
        raise RuntimeError(f"{lib} {names} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    results: list[dict[str, Any]] = json.loads(proc.stdout.strip().splitlines()[-1])
    for (cell, ds, paths), result in zip(jobs, results, strict=True):
        nbytes = sum(os.path.getsize(p) for p in paths)
        expected = len(paths) * ds.spec.per_shard
        if result["samples_per_pass"] != [expected]:
            raise RuntimeError(
                f"{lib} {cell.regime}/{cell.mode} saw {result['samples_per_pass']} samples per "
                f"pass, expected {expected} (files {paths})"
            )
        result["samples_per_s"] = result["samples"] / result["wall_s"]
        result["mb_per_s"] = nbytes * result["passes"] / result["wall_s"] / 1e6
        result["samples_per_cpu_s"] = result["samples"] / max(result["cpu_s"], 1e-9)
        result["loadavg_1m"] = os.getloadavg()[0]
        result["fresh_process"] = len(jobs) == 1
    return results


def import_rss(stmt: str, repeats: int = 3) -> dict[str, Any]:
    """Peak RSS (MB) of a fresh interpreter running ``stmt``; median of ``repeats`` runs."""
    code = (
        f"import sys\n{stmt}\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "print(int(hwm.split()[1]) / 1024, 'torch' in sys.modules)"
    )
    values, torch_loaded = [], False
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout.split()
        values.append(float(out[0]))
        torch_loaded = torch_loaded or out[1] == "True"
    return {"stmt": stmt, "rss_mb": statistics.median(values), "torch_imported": torch_loaded}


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(cell: Cell, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per-library medians and the per-round ratio wds_cloud / webdataset."""
    ratios = [
        a["samples_per_s"] / b["samples_per_s"]
        for a, b in zip(runs["wds_cloud"], runs["webdataset"], strict=True)
    ]
    out: dict[str, Any] = {"regime": cell.regime, "mode": cell.mode, "target": cell.target}
    for lib in LIBS:
        rs = runs[lib]
        out[lib] = {
            "samples_per_s": _stats([r["samples_per_s"] for r in rs]),
            "mb_per_s": _stats([r["mb_per_s"] for r in rs]),
            "samples_per_cpu_s": _stats([r["samples_per_cpu_s"] for r in rs]),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
            "children_peak_rss_mb": max(r["children_peak_rss_mb"] for r in rs),
            "runs": rs,
        }
    out["ratio"] = _stats(ratios)
    out["ratios"] = ratios
    cpu_ratios = [
        a["samples_per_cpu_s"] / b["samples_per_cpu_s"]
        for a, b in zip(runs["wds_cloud"], runs["webdataset"], strict=True)
    ]
    out["cpu_ratio"] = _stats(cpu_ratios)
    if cell.target is not None:
        out["status"] = "PASS" if out["ratio"]["median"] >= cell.target else "MISS"
    else:
        out["status"] = "-"
    return out


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def table(summary: list[dict[str, Any]], imports: list[dict[str, Any]]) -> str:
    """Markdown tables: per-cell ratios with PASS/MISS, then import RSS."""
    lines = [
        "| regime | mode | wds_cloud samples/s | webdataset samples/s | wds_cloud MB/s | "
        "webdataset MB/s | ratio median (min-max) | target | status | per-CPU-s ratio | "
        "peak RSS MB wds_cloud / webdataset (workers) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        a, b, r = s["wds_cloud"], s["webdataset"], s["ratio"]
        rss = f"{a['peak_rss_mb']:.0f} / {b['peak_rss_mb']:.0f}"
        if s["mode"] == "loader":
            rss += f" ({a['children_peak_rss_mb']:.0f} / {b['children_peak_rss_mb']:.0f})"
        target = f">= {s['target']:g}x" if s["target"] is not None else "-"
        lines.append(
            f"| {s['regime']} | {s['mode']} | {_fmt(a['samples_per_s']['median'])} | "
            f"{_fmt(b['samples_per_s']['median'])} | {_fmt(a['mb_per_s']['median'])} | "
            f"{_fmt(b['mb_per_s']['median'])} | {r['median']:.1f}x ({r['min']:.1f}-{r['max']:.1f}) "
            f"| {target} | {s['status']} | {s['cpu_ratio']['median']:.1f}x | {rss} |"
        )
    lines += ["", "| import (fresh interpreter) | peak RSS MB | torch imported | target | status |"]
    lines.append("|---|---|---|---|---|")
    for imp in imports:
        limit = imp.get("target")
        status = "-" if limit is None else ("PASS" if imp["rss_mb"] < limit else "MISS")
        lines.append(
            f"| `{imp['stmt']}` | {imp['rss_mb']:.1f} | {imp['torch_imported']} | "
            f"{f'< {limit:g} MB' if limit else '-'} | {status} |"
        )
    return "\n".join(lines)


def datasets(conf: dict[str, Any], root: str, regimes: set[str]) -> dict[str, _data.DataSet]:
    """Generate (or reuse) the data sets the selected cells need."""
    out = {}
    for regime, (shards, per_shard) in conf["specs"].items():
        if regime in regimes:
            spec = _data.DataSpec(regime, shards, per_shard)
            out[regime] = _data.ensure(spec, root, log=lambda m: print(m, file=sys.stderr))
    return out


def profile(target: str, conf: dict[str, Any], root: str, top: int) -> None:
    """cProfile one wds_cloud pass of ``regime:mode`` in this process and print the top."""
    import cProfile
    import pstats

    regime, mode = target.split(":")
    ds = datasets(conf, root, {regime})[regime]
    paths = list(ds.paths)
    _data.warm(paths)
    pipeline = build("wds_cloud", mode, regime, paths)
    one_pass(pipeline, mode)  # warm-up (imports, page cache)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    n = one_pass(pipeline, mode)
    prof.disable()
    print(f"# {regime}:{mode}: {n} samples in {time.perf_counter() - t0:.2f} s under cProfile")
    stats = pstats.Stats(prof).sort_stats("tottime")
    stats.print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small data, 2 rounds (< 2 minutes)")
    p.add_argument("--out", help="write the results as JSON to this file")
    p.add_argument("--data-dir", default=os.path.join(ROOT, "bench_data"))
    p.add_argument("--rounds", type=int, help="override the number of rounds")
    p.add_argument("--min-seconds", type=float, help="override the timed seconds per run")
    p.add_argument("--regimes", help="comma-separated subset of " + ",".join(_data.REGIMES))
    p.add_argument("--modes", help="comma-separated subset of " + ",".join(MODES))
    p.add_argument("--no-import-rss", action="store_true", help="skip the import RSS check")
    p.add_argument("--profile", metavar="REGIME:MODE", help="cProfile wds_cloud on one cell")
    p.add_argument("--profile-top", type=int, default=30)
    # worker-only arguments
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--lib", choices=LIBS, help=argparse.SUPPRESS)
    p.add_argument("--cells", help=argparse.SUPPRESS)
    p.add_argument("--max-passes", type=int, default=200, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        args.min_seconds = args.min_seconds or 0.0
        worker(args)
        return 0

    conf = dict(QUICK if args.quick else FULL)
    if args.rounds:
        conf["rounds"] = args.rounds
    if args.min_seconds is not None:
        conf["min_seconds"] = args.min_seconds
    if args.profile:
        profile(args.profile, conf, args.data_dir, args.profile_top)
        return 0
    regimes = set(args.regimes.split(",")) if args.regimes else set(_data.REGIMES)
    modes = set(args.modes.split(",")) if args.modes else set(MODES)
    cells = [c for c in CELLS if c.regime in regimes and c.mode in modes]
    start = time.perf_counter()
    data = datasets(conf, args.data_dir, {c.regime for c in cells})
    gen_s = time.perf_counter() - start

    runs: dict[Cell, dict[str, list[dict[str, Any]]]] = {
        c: {lib: [] for lib in LIBS} for c in cells
    }

    def job(cell: Cell) -> tuple[Cell, _data.DataSet, list[str]]:
        ds = data[cell.regime]
        return cell, ds, list(ds.paths[: cell.shards] if cell.shards else ds.paths)

    def report(rnd: int, cell: Cell, lib: str, res: dict[str, Any]) -> None:
        res["round"] = rnd
        runs[cell][lib].append(res)
        print(
            f"round {rnd} {cell.regime:5s} {cell.mode:8s} {lib:10s} "
            f"{res['samples_per_s']:>12,.0f} samples/s {res['mb_per_s']:>9,.1f} MB/s "
            f"peak RSS {res['peak_rss_mb']:.0f} MB",
            file=sys.stderr,
        )

    for rnd in range(conf["rounds"]):
        order = LIBS if rnd % 2 == 0 else LIBS[::-1]
        if conf["grouped"]:  # quick: one process per library per round, all cells in it
            _data.warm([p for d in data.values() for p in d.paths])
            for lib in order:
                results = run_worker(lib, [job(c) for c in cells], conf)
                for cell, res in zip(cells, results, strict=True):
                    report(rnd, cell, lib, res)
            continue
        for cell in cells:  # full: a fresh process per (cell, library)
            _data.warm(job(cell)[2])
            for lib in order:
                report(rnd, cell, lib, run_worker(lib, [job(cell)], conf)[0])
    summary = [summarize(c, runs[c]) for c in cells]

    imports: list[dict[str, Any]] = []
    if not args.no_import_rss:
        reps = conf["import_repeats"]
        imports.append({**import_rss("import wds_cloud", reps), "target": IMPORT_RSS_TARGET_MB})
        imports.append(import_rss("import wds_cloud.core.compat", reps))
        imports.append(import_rss("import webdataset", reps))
        imports.append(import_rss("import wds_cloud; wds_cloud.WebDataset", reps))

    md = table(summary, imports)
    print(md)
    result = {
        "quick": args.quick,
        "conf": conf,
        "generation_s": gen_s,
        "total_s": time.perf_counter() - start,
        "python": sys.version.split()[0],
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "data": {
            r: {"dir": os.path.dirname(d.paths[0]), "samples": d.samples, "bytes": d.nbytes}
            for r, d in data.items()
        },
        "cells": summary,
        "imports": imports,
        "table_markdown": md,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    print(f"\ntotal {result['total_s']:.0f} s (generation {gen_s:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
