"""Autotune against an exhaustive grid over the same parameters, in four regimes.

Run from the repository root::

    python benchmarks/bench_tune.py --quick              # a smoke run: tiny data, tiny grids
    python benchmarks/bench_tune.py --out tune.json      # the run docs/benchmarks.md quotes

Regimes: ``tiny`` (~100-byte text samples, no decode, batch 64), ``photo256`` (256x256 JPEG
photographs decoded to RGB arrays, batch 32), ``large`` (4 MB samples, two PNGs read as bytes,
batch 8), and ``latency``: the ``large`` shards over HTTP behind ``latency_proxy.py`` (20 ms per
request, 50 MB/s per connection), where read-ahead and parallel ranged reads are searched too.

For each regime, on the same search space (``space_for``: 39 settings locally, 18 behind the
proxy):

1. **grid**: every setting measured once (``--grid-seconds`` each, start-up left out, as the
   tuner's trials);
2. **tuner**: :func:`wds_cloud.tools.tune.search.search` with ``--tune-seconds`` (60) in all;
3. **re-measure**: the grid's best and the tuner's choice, ``--rounds`` times each, alternating,
   ``--check-seconds`` per measurement; the ratio of the medians is the goal (>= 0.9). A grid's
   best is the maximum of noisy measurements (it is biased up), hence the re-measurement; it
   also shows whether the tuner's own figure reproduces.

The HTTP server and its proxy run in a child process (no interpreter lock shared with the
loader).
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Iterable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _path in (ROOT, HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import _data  # noqa: E402  (benchmarks/ is not a package)

from wds_cloud.pytorch.builder import make_loader  # noqa: E402
from wds_cloud.tools.tune.search import default_budget, search  # noqa: E402
from wds_cloud.tools.tune.space import Setting, Space  # noqa: E402
from wds_cloud.tools.tune.trial import run_trial  # noqa: E402

REGIMES = ("tiny", "photo256", "large", "latency")
DATA = {"tiny": "tiny", "photo256": "photo256", "large": "large", "latency": "large"}
BATCH = {"tiny": 64, "photo256": 32, "large": 8, "latency": 8}
FULL: dict[str, Any] = {
    "specs": {"tiny": (4, 10000), "photo256": (4, 400), "large": (4, 16)},
    "grid_seconds": 2.0,
    "tune_seconds": 60.0,
    "check_seconds": 4.0,
    "rounds": 3,
}
QUICK: dict[str, Any] = {
    "specs": {"tiny": (2, 400), "photo256": (2, 16), "large": (2, 2)},
    "grid_seconds": 0.3,
    "tune_seconds": 3.0,
    "check_seconds": 0.3,
    "rounds": 1,
}
_MIB = 1 << 20


def space_for(regime: str, quick: bool) -> Space:
    """The search space of ``regime``, the same for the grid and the tuner."""
    bs = BATCH[regime]
    if regime == "latency":
        axes: dict[str, tuple[Any, ...]] = {
            "num_workers": (0, 2, 4),
            "prefetch_factor": (2,),
            "inner_batch": (bs,),
            "shm_batches": (True,),
            "readahead": (0, 16 * _MIB),
            "prefetch": (0, 4, 16),
        }
        seed = Setting(2, 2, bs, True, 16 * _MIB, 0)
    else:
        axes = {
            "num_workers": (0, 1, 2, 4),
            "prefetch_factor": (2, 4),
            "inner_batch": (bs // 2, bs, 2 * bs),
            "shm_batches": (False, True),
            "readahead": (None,),
            "prefetch": (None,),
        }
        seed = Setting(2, 2, bs, True)
    if quick:  # two settings: enough to run every path
        axes = {k: v[:1] if k != "num_workers" else (0, 2) for k, v in axes.items()}
        seed = Setting(
            2,
            axes["prefetch_factor"][0],
            axes["inner_batch"][0],
            axes["shm_batches"][0],
            axes["readahead"][0],
            axes["prefetch"][0],
        )
    return Space(axes, seed)


def grid(space: Space) -> list[Setting]:
    """Every distinct setting of ``space`` (without workers, queue and arena do not apply)."""
    out: dict[tuple[Any, ...], Setting] = {}
    names = list(space.axes)
    for values in itertools.product(*space.axes.values()):
        setting = Setting(**dict(zip(names, values, strict=True)))
        out.setdefault(setting.key(), setting)
    return list(out.values())


def builder(regime: str, urls: list[str]) -> Any:
    """``build(setting, profile)``: the regime's endless loader with a setting."""
    bs = BATCH[regime]
    kw: dict[str, Any] = {"shuffle_buffer": 256}
    if regime == "tiny":
        kw["to_tuple"] = ("txt", "cls")
    elif regime == "photo256":
        kw.update(decode="rgb8", to_tuple=("jpg", "cls"))
    else:
        kw.update(to_tuple=("image.png", "label.png"), shuffle_buffer=8)

    def build(setting: Setting, profile: bool) -> Iterable[Any]:
        return make_loader(
            urls,
            batch_size=bs,
            resampled=True,
            shardshuffle=False,
            profile=profile,
            **kw,
            **setting.loader_kwargs(),
        )

    return build


def serve(conn: Connection, root: str, delay: float, rate: float) -> None:
    """Serve ``root`` over HTTP behind the latency proxy until the parent sends anything."""
    for path in (ROOT, HERE):
        if path not in sys.path:
            sys.path.insert(0, path)
    from latency_proxy import LatencyProxy

    from tests.support.http_server import HttpFileServer

    with HttpFileServer(root) as server, LatencyProxy(server.port, delay=delay, rate=rate) as px:
        conn.send(px.url)
        conn.recv()


def measure(build: Any, setting: Setting, seconds: float, budget: int, bs: int) -> float:
    trial = run_trial(build, setting, seconds=seconds, budget=budget, batch_size=bs)
    if trial.samples_per_s is None:
        raise RuntimeError(f"{setting}: {trial.status}")
    return trial.samples_per_s


def run_regime(regime: str, urls: list[str], conf: dict[str, Any], quick: bool) -> dict[str, Any]:
    bs = BATCH[regime]
    space = space_for(regime, quick)
    build = builder(regime, urls)
    budget = default_budget()
    settings = grid(space)
    log(f"{regime}: grid of {len(settings)} settings, {conf['grid_seconds']} s each")
    t0 = time.monotonic()
    rates = {}
    for s in settings:
        rates[s] = measure(build, s, conf["grid_seconds"], budget, bs)
        log(f"  grid {s.values()}: {rates[s]:,.0f}/s")
    grid_wall = time.monotonic() - t0
    grid_best = max(rates, key=lambda s: rates[s])
    log(f"{regime}: tuner, {conf['tune_seconds']} s")
    result = search(
        build,
        urls,
        space,
        batch_size=bs,
        seconds=conf["tune_seconds"],
        budget=budget,
        progress=lambda line: log("  " + line),
    )
    checks: dict[str, list[float]] = {"grid": [], "tuned": []}
    for rnd in range(conf["rounds"]):
        order = [("grid", grid_best), ("tuned", result.setting)]
        for name, setting in order if rnd % 2 == 0 else order[::-1]:
            checks[name].append(measure(build, setting, conf["check_seconds"], budget, bs))
    ordered = sorted(rates, key=lambda s: rates[s], reverse=True)
    ranks = {s.key(): i + 1 for i, s in enumerate(ordered)}  # the tuned choice's place
    grid_again = statistics.median(checks["grid"])
    tuned_again = statistics.median(checks["tuned"])
    return {
        "regime": regime,
        "grid_settings": len(settings),
        "grid_seconds": grid_wall,
        "grid_best": grid_best.values(),
        "grid_best_rate": rates[grid_best],
        "tuned": result.setting.values(),
        "tuned_rate": result.samples_per_s,
        "tuned_rank_in_grid": ranks.get(result.setting.key()),
        "tune_seconds": result.seconds,
        "trials": len(result.trials),
        "grid_best_again": grid_again,
        "tuned_again": tuned_again,
        "ratio": tuned_again / grid_again if grid_again > 0 else 0.0,
        "checks": checks,
        "verdict": result.verdict,
    }


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def short(values: dict[str, Any]) -> str:
    names = {
        "num_workers": "w",
        "prefetch_factor": "pf",
        "inner_batch": "ib",
        "shm_batches": "shm",
        "readahead": "ra",
        "prefetch": "pre",
    }
    parts = []
    for k, v in values.items():
        if v is None or (values["num_workers"] == 0 and k in ("prefetch_factor", "shm_batches")):
            continue
        shown = (
            f"{v >> 20}M"
            if k == "readahead" and v
            else ("T" if v is True else "F" if v is False else v)
        )
        parts.append(f"{names[k]}={shown}")
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", help="write the results as JSON to this file")
    p.add_argument("--data-dir", default=os.path.join(ROOT, "bench_data"))
    p.add_argument("--regimes", default=",".join(REGIMES))
    p.add_argument("--tune-seconds", type=float)
    p.add_argument("--grid-seconds", type=float)
    p.add_argument("--rounds", type=int)
    args = p.parse_args(argv)
    conf = dict(QUICK if args.quick else FULL)
    for key in ("tune_seconds", "grid_seconds", "rounds"):
        if getattr(args, key) is not None:
            conf[key] = getattr(args, key)
    regimes = [r for r in args.regimes.split(",") if r]
    sets = {
        DATA[r]: _data.ensure(_data.DataSpec(DATA[r], *conf["specs"][DATA[r]]), args.data_dir, log)
        for r in regimes
    }
    rows = []
    child = None
    ours: Connection | None = None
    try:
        for regime in regimes:
            data = sets[DATA[regime]]
            urls = list(data.paths)
            if regime == "latency":
                ctx = multiprocessing.get_context("spawn")
                ours, theirs = ctx.Pipe()
                root = os.path.dirname(urls[0])
                child = ctx.Process(target=serve, args=(theirs, root, 0.02, 50e6))
                child.start()
                endpoint = ours.recv()
                urls = [f"{endpoint}/{os.path.basename(u)}" for u in urls]
            else:
                _data.warm(urls)
            rows.append(run_regime(regime, urls, conf, args.quick))
    finally:
        if child is not None and ours is not None:
            ours.send("stop")
            child.join(60)
    print_table(rows, conf)
    if args.out:
        Path(args.out).write_text(json.dumps({"conf": conf, "rows": rows}, indent=2))
    return 0


def print_table(rows: list[dict[str, Any]], conf: dict[str, Any]) -> None:
    print(
        f"grid: {conf['grid_seconds']} s a setting; tuner: {conf['tune_seconds']} s; "
        f"re-measured {conf['rounds']} x {conf['check_seconds']} s each (median)"
    )
    head = (
        "regime",
        "grid",
        "grid best",
        "/s",
        "tuned",
        "/s",
        "tune s",
        "again: grid",
        "tuned",
        "ratio",
    )
    lines = [head]
    for r in rows:
        lines.append(
            (
                r["regime"],
                str(r["grid_settings"]),
                short(r["grid_best"]),
                f"{r['grid_best_rate']:,.0f}",
                short(r["tuned"]),
                f"{r['tuned_rate']:,.0f}",
                f"{r['tune_seconds']:.0f} ({r['trials']})",
                f"{r['grid_best_again']:,.0f}",
                f"{r['tuned_again']:,.0f}",
                f"{r['ratio']:.2f}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for line in lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


if __name__ == "__main__":
    sys.exit(main())
