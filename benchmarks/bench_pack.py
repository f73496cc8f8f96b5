"""Packing: efficiency and speed of ``wds.pack`` against Megatron-Energon's packing scheme.

Run from the repository root::

    python -m benchmarks.bench_pack                       # 50,000 samples per cell, ~1 minute
    python -m benchmarks.bench_pack --quick               # 5,000 samples, buffers 8 and 64
    python -m benchmarks.bench_pack --energon --json pack.json   # + megatron-energon itself

For each length distribution (uniform, lognormal, bimodal in ``1..capacity``; the generators of
``tests/core/test_packing_efficiency.py``) and each buffer size it prints the packing efficiency
(real tokens / (packs x capacity)) of ``wds.pack(capacity, buffer=N)`` and of Energon's scheme
at the same buffer size (its ``PackingDataset`` loop with first-fit-decreasing selection, as the
test's reference implements it), and the samples/s of ``wds.pack`` on in-memory samples (dicts,
``length=`` reading a field; best of ``--rounds``). ``--energon`` installs ``megatron-energon``
from PyPI into a venv under ``--cache`` (default ``bench_data/peers``, as ``bench_resume.py``; with
``--no-deps``, torch and the rest from this interpreter through a ``.pth`` file), runs its own
``PackingDataset`` on the same lengths (``benchmarks/_energon_pack.py``), adds its efficiency
and samples/s, and checks that its packs are the reference's (the *same packs* column). A venv
that cannot be made prints one line saying why; the run goes on. ``group_by`` gets one line:
samples/s with 8 keys, batches of 64, a buffer of 1,024.

Compare within one run: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import wds_cloud as wds
from benchmarks.bench_resume import peer_venv
from tests.core.test_packing_efficiency import (
    DISTRIBUTIONS,
    efficiency,
    energon_packs,
    lengths_for,
)

ROOT = Path(__file__).resolve().parents[1]
# megatron-energon without its dependencies (torch and the rest come from this interpreter),
# then what its import needs and this interpreter lacks, with theirs
ENERGON = {
    "nodeps": ["megatron-energon==7.4.1"],
    "deps": [
        "multi-storage-client",
        "braceexpand",
        "filetype",
        "rapidyaml",
        "deprecation",
        "mfusepy",
        "s3fs",
    ],
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ours(lengths: list[int], capacity: int, buffer: int, rounds: int) -> dict[str, Any]:
    """Efficiency and samples/s (best of ``rounds``) of ``wds.pack`` over dict samples."""
    samples = [{"__key__": str(i), "n": n} for i, n in enumerate(lengths)]
    stage = wds.pack(capacity, length=lambda s: s["n"], buffer=buffer)
    best = float("inf")
    packs: list[list[dict[str, Any]]] = []
    for _ in range(rounds):
        start = time.perf_counter()
        packs = list(stage(samples))
        best = min(best, time.perf_counter() - start)
    index = [[int(s["__key__"]) for s in p] for p in packs]
    return {
        "efficiency": efficiency(index, lengths, capacity),
        "samples_per_s": len(lengths) / best,
    }


def group_rate(n: int, rounds: int) -> float:
    samples = [{"__key__": str(i), "res": i % 8} for i in range(n)]
    stage = wds.group_by(lambda s: s["res"], 64, buffer=1024)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _batch in stage(samples):
            pass
        best = min(best, time.perf_counter() - start)
    return n / best


def run_energon(python: Path, capacity: int, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps({"capacity": capacity, "runs": runs}))
        script = ROOT / "benchmarks" / "_energon_pack.py"
        proc = subprocess.run(
            [str(python), str(script), str(src), str(dst)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise RuntimeError(f"megatron-energon run failed: {proc.stderr.strip()[-500:]}")
        result: list[dict[str, Any]] = json.loads(dst.read_text())
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=50_000)
    parser.add_argument("--capacity", type=int, default=4096)
    parser.add_argument("--buffers", type=int, nargs="+", default=[8, 64, 512])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="<= 5,000 samples, buffers 8, 64")
    parser.add_argument("--energon", action="store_true", help="also run megatron-energon")
    parser.add_argument("--cache", default=str(ROOT / "bench_data" / "peers"), help="venvs")
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args(argv)
    if args.quick:
        args.buffers, args.rounds = [8, 64], 1
        args.samples = min(args.samples, 5000)
    cells = [(d, b) for d in DISTRIBUTIONS for b in args.buffers]
    data = {d: lengths_for(d, args.samples, args.capacity) for d in DISTRIBUTIONS}
    theirs: list[dict[str, Any]] | None = None
    if args.energon:
        try:
            python = peer_venv("energon", Path(args.cache), ENERGON)
            runs = [{"name": d, "buffer": b, "lengths": data[d]} for d, b in cells]
            theirs = run_energon(python, args.capacity, runs)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exn:
            print(f"megatron-energon: not measured ({exn})")
    rows = []
    for n, (dist, buffer) in enumerate(cells):
        lengths = data[dist]
        reference = energon_packs(lengths, args.capacity, buffer)
        row: dict[str, Any] = {
            "distribution": dist,
            "buffer": buffer,
            "energon_scheme": efficiency(reference, lengths, args.capacity),
            **{
                f"wds_cloud_{k}": v
                for k, v in ours(lengths, args.capacity, buffer, args.rounds).items()
            },
        }
        if theirs is not None:
            got = theirs[n]
            row["energon_efficiency"] = efficiency(got["packs"], lengths, args.capacity)
            row["energon_samples_per_s"] = got["samples_per_s"]
            row["same_packs"] = got["packs"] == reference
        rows.append(row)
    head = "| lengths | buffer | wds.pack efficiency | Energon scheme efficiency | wds.pack samples/s |"
    rule = "|---|---:|---:|---:|---:|"
    if theirs is not None:
        head += " megatron-energon efficiency | megatron-energon samples/s | same packs |"
        rule += "---:|---:|---|"
    print(f"{args.samples} samples per cell, capacity {args.capacity}\n")
    print(head)
    print(rule)
    for r in rows:
        line = (
            f"| {r['distribution']} | {r['buffer']} | {r['wds_cloud_efficiency']:.4f} | "
            f"{r['energon_scheme']:.4f} | {r['wds_cloud_samples_per_s']:,.0f} |"
        )
        if theirs is not None:
            line += (
                f" {r['energon_efficiency']:.4f} | {r['energon_samples_per_s']:,.0f} | "
                f"{'yes' if r['same_packs'] else 'NO'} |"
            )
        print(line)
    rate = group_rate(args.samples, args.rounds)
    print(f"\nwds.group_by (8 keys, batches of 64, buffer 1024): {rate:,.0f} samples/s")
    if args.json:
        Path(args.json).write_text(json.dumps({"pack": rows, "group_by_samples_per_s": rate}))
    worse = [r for r in rows if r["wds_cloud_efficiency"] < r["energon_scheme"]]
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
