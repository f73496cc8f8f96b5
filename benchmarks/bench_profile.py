"""What profiling costs: samples/s with profiling off and on, side by side in one run.

Run from the repository root::

    python benchmarks/bench_profile.py --quick                  # about a minute
    python benchmarks/bench_profile.py --out results.json       # the run docs/observability.md quotes
    python benchmarks/bench_profile.py --baseline /path/to/tree # also the code before the hooks

Cells: ``tiny/direct`` (a ``WebDataset`` of ~100-byte samples iterated sample by sample in
the main process: the worst case, every sample crosses the profiled pipeline's ``next()``),
``tiny/loader`` (the same batched by 64 through a ``WebLoader`` with 2 workers) and
``jpeg/decode`` (64x64 JPEGs decoded to RGB arrays, batched by 64, in the main process).
Modes: ``off`` (profiling off), ``on`` (``.profile()``), and with ``--baseline TREE``
``before``: the same code from another checkout (e.g. main before the hooks), for the cost
of the hooks when off. Every measurement runs in a fresh subprocess; the modes of a cell are
interleaved round-robin (the order alternates between rounds) and the ratio to ``off`` is
taken per round: the table gives its median and range, robust to noisy neighbours.

Mode ``paired`` (always run): one subprocess per cell and round builds the ``off`` and the
``on`` pipeline and alternates single passes of each (``off, on, on, off, ...``) for
``2 x min-seconds``; its ratio is the median over adjacent pairs of ``on`` / ``off``
throughput (wall and CPU). Passes a fraction of a second apart see the same machine, so a
shared machine's load changes (seconds to minutes) cancel out, which the separate processes'
ratio cannot do. (The ``off`` pipeline there runs in a process where a recorder exists, so it
pays one more check per stage and pass than a process that never profiled.) With
``--baseline TREE`` also ``paired-before``: the same paired measurement of the other tree's
profiler, in the same rounds (the order alternating), for what a change to the profiler
gained when the machine's load moves more than the change.
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
CELLS = (("tiny", "direct"), ("tiny", "loader"), ("small", "decode"))
FULL: dict[str, Any] = {
    "specs": {"tiny": (4, 10000), "small": (2, 2000)},
    "rounds": 6,
    "min_seconds": 3.0,
}
QUICK: dict[str, Any] = {
    "specs": {"tiny": (2, 2500), "small": (1, 1000)},
    "rounds": 2,
    "min_seconds": 0.5,
}


def build(regime: str, cell: str, urls: list[str], profile: bool) -> Any:
    """The pipeline of one cell; iterating it is what is timed."""
    import wds_cloud as wds

    ds = wds.WebDataset(urls, shardshuffle=False)
    if cell == "direct":
        pipe: Any = ds.to_tuple("txt", "cls")
    elif cell == "loader":
        pipe = wds.WebLoader(ds.to_tuple("txt", "cls").batched(64), batch_size=None, num_workers=2)
    else:
        pipe = ds.decode("rgb").to_tuple("jpg", "cls").batched(64)
    if profile:
        pipe = pipe.profile()
    return pipe


def one_pass(pipe: Any, cell: str) -> int:
    """Iterate once; the number of samples seen."""
    n = 0
    if cell == "direct":
        for _ in pipe:
            n += 1
    else:
        for batch in pipe:
            n += len(batch[1])
    return n


def paired(regime: str, cell: str, urls: list[str], min_seconds: float) -> dict[str, Any]:
    """Alternate passes of the ``off`` and ``on`` pipelines (``off, on, on, off``...); the
    median of the per-pair ratios ``on / off`` (samples/s and samples per CPU-second)."""
    import time

    pipes = {"off": build(regime, cell, urls, False), "on": build(regime, cell, urls, True)}
    for pipe in pipes.values():
        one_pass(pipe, cell)  # warm-up
    walls: list[float] = []
    cpus: list[float] = []
    start = time.perf_counter()
    order = ("off", "on")
    while time.perf_counter() - start < 2 * min_seconds or len(walls) < 3:
        rates: dict[str, tuple[float, float]] = {}
        for mode in order:
            timed = _data.timed_passes(lambda mode=mode: one_pass(pipes[mode], cell), 0.0, 1)
            rates[mode] = (timed.samples / timed.wall_s, timed.samples / max(timed.cpu_s, 1e-9))
        order = order[::-1]
        walls.append(rates["on"][0] / rates["off"][0])
        cpus.append(rates["on"][1] / rates["off"][1])
    return {
        "ratio": statistics.median(walls),
        "cpu_ratio": statistics.median(cpus),
        "pairs": len(walls),
        "samples_per_s": 0.0,
        "samples_per_cpu_s": 0.0,
    }


def worker(args: argparse.Namespace) -> None:
    regime, cell, mode = args.worker.split(":")
    urls = args.urls.split(",")
    if mode == "paired":
        print(json.dumps(paired(regime, cell, urls, args.min_seconds)))
        return
    pipe = build(regime, cell, urls, mode == "on")
    one_pass(pipe, cell)  # warm-up: imports, first opens, worker start-up
    timed = _data.timed_passes(lambda: one_pass(pipe, cell), args.min_seconds)
    out = {
        "samples_per_s": timed.samples / timed.wall_s,
        "samples_per_cpu_s": timed.samples / timed.cpu_s if timed.cpu_s > 0 else 0.0,
        "passes": timed.passes,
    }
    if mode == "on":
        report = pipe.profile_report()
        out["verdict"] = report.verdict()
    print(json.dumps(out))


def measure(
    regime: str,
    cell: str,
    mode: str,
    urls: list[str],
    args: argparse.Namespace,
    conf: dict[str, Any],
) -> dict[str, Any]:
    env = dict(os.environ)
    tree = args.baseline if mode in ("before", "paired-before") else ROOT
    env["PYTHONPATH"] = tree + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("WDS_CLOUD_PROFILE", None)
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        f"{regime}:{cell}:{WORKER_MODE.get(mode, mode)}",  # off, on, paired
        "--urls",
        ",".join(urls),
        "--min-seconds",
        str(conf["min_seconds"]),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{regime}/{cell}/{mode} failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


WORKER_MODE = {"before": "off", "paired-before": "paired"}  # the baseline tree's modes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    _data.add_run_options(p, ROOT)
    p.add_argument("--baseline", help="another checkout to time as mode 'before'")
    args = p.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    conf = _data.run_conf(args, QUICK, FULL)
    modes = ["off", "on"] + (["before"] if args.baseline else [])
    sets = {
        regime: _data.ensure(
            _data.DataSpec(regime, *conf["specs"][regime]),
            args.data_dir,
            log=lambda m: print(m, file=sys.stderr),
        )
        for regime in {r for r, _ in CELLS}
    }
    runs: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for rnd in range(conf["rounds"]):
        for regime, cell in CELLS:
            urls = list(sets[regime].paths)
            _data.warm(urls)
            order = modes if rnd % 2 == 0 else modes[::-1]
            pairs = ["paired", "paired-before"] if args.baseline else ["paired"]
            for mode in [*order, *(pairs if rnd % 2 == 0 else pairs[::-1])]:
                res = measure(regime, cell, mode, urls, args, conf)
                runs.setdefault((regime, cell), {}).setdefault(mode, []).append(res)
                if mode.startswith("paired"):
                    said = f"{res['ratio']:.3f} of off ({res['pairs']} pairs)"
                else:
                    said = f"{res['samples_per_s']:,.0f}/s"
                print(f"round {rnd} {regime}/{cell} {mode}: {said}", file=sys.stderr)
    summary = []
    lines = [
        f"{'cell':<14} {'mode':<7} {'samples/s':>11} {'vs off':>8} {'range':>16} "
        f"{'per CPU-s':>11} {'vs off':>8}"
    ]
    for (regime, cell), by_mode in runs.items():
        offs = [r["samples_per_s"] for r in by_mode["off"]]
        cpu_offs = [r["samples_per_cpu_s"] for r in by_mode["off"]]
        for mode in modes:
            rates = [r["samples_per_s"] for r in by_mode[mode]]
            ratios = [a / b for a, b in zip(rates, offs, strict=True)]
            cpu = [r["samples_per_cpu_s"] for r in by_mode[mode]]
            cpu_ratios = [a / b for a, b in zip(cpu, cpu_offs, strict=True)]
            row = {
                "cell": f"{regime}/{cell}",
                "mode": mode,
                "samples_per_s": statistics.median(rates),
                "ratio_median": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
                "samples_per_cpu_s": statistics.median(cpu),
                "cpu_ratio_median": statistics.median(cpu_ratios),
            }
            if mode == "on":
                row["verdict"] = by_mode[mode][-1].get("verdict")
            summary.append(row)
            lines.append(
                f"{row['cell']:<14} {mode:<7} {row['samples_per_s']:>11,.0f} "
                f"{row['ratio_median']:>8.3f} "
                f"{row['ratio_min']:>7.3f}-{row['ratio_max']:<7.3f} "
                f"{row['samples_per_cpu_s']:>11,.0f} {row['cpu_ratio_median']:>8.3f}"
            )
    lines.append(
        f"{'cell':<14} {'paired: on / off, passes alternated in one process':<52} "
        f"{'wall':>7} {'range':>13} {'CPU':>7}"
    )
    for (regime, cell), by_mode in runs.items():
        for mode in [m for m in ("paired", "paired-before") if m in by_mode]:
            pairs = by_mode[mode]
            walls = [r["ratio"] for r in pairs]
            cpus = [r["cpu_ratio"] for r in pairs]
            row = {
                "cell": f"{regime}/{cell}",
                "mode": mode,
                "ratio_median": statistics.median(walls),
                "ratio_min": min(walls),
                "ratio_max": max(walls),
                "cpu_ratio_median": statistics.median(cpus),
                "pairs": sum(r["pairs"] for r in pairs),
            }
            summary.append(row)
            said = f"{mode}: {row['pairs']} pairs in {len(pairs)} rounds"
            lines.append(
                f"{row['cell']:<14} {said:<52} "
                f"{row['ratio_median']:>7.3f} {row['ratio_min']:>6.3f}-{row['ratio_max']:<6.3f} "
                f"{row['cpu_ratio_median']:>7.3f}"
            )
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"conf": conf, "summary": summary}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
