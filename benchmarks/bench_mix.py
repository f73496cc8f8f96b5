"""The cost of a data plan: ``make_loader(wds.mix(...))`` against a single-source loader over
the same data (issue 28's target: a mixed / stratified loader within 5 % of its samples/s).

Run from the repository root::

    python -m benchmarks.bench_mix                   # 3 sources: 6 + 4 + 2 shards x 500 samples
    python -m benchmarks.bench_mix --quick           # small data, 1 round (the smoke test)
    python -m benchmarks.bench_mix --decode --out mix.json

Data: the ``small`` regime of ``benchmarks/_data.py`` (a 64x64 JPEG, ``.cls``, ``.json``; about
3 KB a sample), three sources of 6, 4 and 2 shards, each indexed (``.idx`` beside the shards).
Every loader reads the same 6000 samples an epoch, batches of 64, 2 DataLoader workers, batches
as lists of sample dicts (``collate=list``; with ``--decode``: ``decode="rgb8"`` and
``to_tuple("jpg", "cls")``, collated by torch), one epoch per pass:

- ``single``: ``make_loader(all shards, order="global")``: one permutation of all samples (the
  same read path a plan uses, without the plan);
- ``mix <batching>``: ``make_loader(wds.mix({a, b, c}, repeat=[1, 1, 1], batching=...))`` for
  ``random``, ``stratified`` and ``per_stream`` (each source once an epoch);
- ``stream``: ``make_loader(all shards)`` (sequential shards, shuffle buffers), for reference.

Each round runs every loader once, in turn (order rotated per round), for ``--min-seconds``;
the table gives the median samples/s over rounds and the ratio to ``single``, and the CPU time
a sample costs (this process and its DataLoader workers, which are joined after each pass),
which other load on a shared machine disturbs far less than the wall clock. Client and worker
processes share the machine's cores: compare ratios within a run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._data import DataSpec, ensure, timed_passes, warm  # noqa: E402

BATCHINGS = ("random", "stratified", "per_stream")


def sources(data_dir: str, per_shard: int) -> dict[str, list[str]]:
    """The three indexed sources (generated and indexed once, then cached)."""
    import wds_cloud as wds

    out = {}
    for name, shards in (("a", 6), ("b", 4), ("c", 2)):
        spec = DataSpec("small", shards, per_shard)
        found = ensure(spec, os.path.join(data_dir, f"mix-{name}"), log=print)
        paths = list(found.paths)
        if not all(os.path.exists(p[: -len(".tar")] + ".idx") for p in paths):
            wds.build_index(paths, json=None)
        warm(paths)
        out[name] = paths
    return out


def loaders(srcs: dict[str, list[str]], decode: bool) -> dict[str, Callable[[], Any]]:
    """Each contender's loader factory."""
    import wds_cloud as wds

    every = [p for paths in srcs.values() for p in paths]
    if decode:
        kw: dict[str, Any] = {"decode": "rgb8", "to_tuple": ("jpg", "cls")}
    else:
        kw = {"collate": list}
    common = {"batch_size": 64, "num_workers": 2, **kw}
    made: dict[str, Callable[[], Any]] = {
        "single": lambda: wds.make_loader(every, order="global", seed=1, **common),
    }
    for batching in BATCHINGS:
        plan = wds.mix(srcs, repeat=[1, 1, 1], batching=batching, seed=1)
        made[f"mix {batching}"] = lambda plan=plan: wds.make_loader(plan, **common)
    made["stream"] = lambda: wds.make_loader(every, seed=1, shuffle_buffer=1000, **common)
    return made


def count(batch: Any) -> int:
    return len(batch) if isinstance(batch, list) else len(batch[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small data, 1 round")
    parser.add_argument("--decode", action="store_true", help="decode to rgb8 and collate")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--min-seconds", type=float, default=None)
    parser.add_argument("--per-shard", type=int, default=None)
    parser.add_argument("--data-dir", default=os.path.join(ROOT, "bench_data"))
    parser.add_argument("--out", help="write the results as JSON to this file")
    args = parser.parse_args()
    rounds = args.rounds or (1 if args.quick else 5)
    min_s = args.min_seconds if args.min_seconds is not None else (0.0 if args.quick else 4.0)
    per_shard = args.per_shard or (40 if args.quick else 500)
    srcs = sources(args.data_dir, per_shard)
    made = loaders(srcs, args.decode)
    names = list(made)
    rates: dict[str, list[float]] = {n: [] for n in names}
    cpus: dict[str, list[float]] = {n: [] for n in names}  # CPU us a sample, workers included
    samples: dict[str, set[int]] = {n: set() for n in names}
    built = {n: make() for n, make in made.items()}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            loader = built[name]

            def one_pass(loader: Any = loader) -> int:
                return sum(count(b) for b in loader)

            timed = timed_passes(one_pass, min_s)
            rates[name].append(timed.samples / timed.wall_s)
            cpus[name].append(timed.cpu_s / timed.samples * 1e6)
            samples[name].update(timed.counts)
    base = statistics.median(rates["single"])
    base_cpu = statistics.median(cpus["single"])
    rows = []
    print(f"\n{per_shard * 12} samples an epoch, batch 64, 2 workers, decode={args.decode}\n")
    print("| loader | samples/epoch | samples/s | vs single | CPU us/sample | CPU vs single |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in names:
        rate, cpu = statistics.median(rates[name]), statistics.median(cpus[name])
        rows.append(
            {
                "loader": name,
                "samples": sorted(samples[name]),
                "samples_per_s": rate,
                "vs_single": rate / base,
                "cpu_us_per_sample": cpu,
                "cpu_vs_single": cpu / base_cpu,
                "rounds": rates[name],
                "cpu_rounds": cpus[name],
            }
        )
        epoch = "/".join(str(n) for n in sorted(samples[name]))
        print(
            f"| {name} | {epoch} | {rate:,.0f} | {rate / base:.3f} | {cpu:,.0f} "
            f"| {cpu / base_cpu:.3f} |"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"decode": args.decode, "per_shard": per_shard, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
