"""Loaders into a GPU: ``make_loader(device="cuda", prefetch_to_device=True)`` against the
copy-in-the-loop pattern, with webdataset 1.0.2 beside it, in one run.

Run from the repository root on a machine with CUDA::

    python benchmarks/bench_cuda_loader.py --quick               # ~2 minutes
    python benchmarks/bench_cuda_loader.py --step-us 0,2000      # also with a 2 ms "step"
    python benchmarks/bench_cuda_loader.py --device cpu --quick  # the same code without a GPU

Data: ``jpeg256`` (``benchmarks/_data.py``: 256x256 JPEGs decoded with ``decode("rgb8")``),
batches of 64 ``(jpg, cls)``, ``--workers`` DataLoader workers (default 4), shuffles off.
Variants:

- ``webdataset+to``: ``webdataset.WebLoader(..., pin_memory=True)`` and
  ``batch.to(device, non_blocking=True)`` in the training loop, the pattern people copy;
- ``hand+to``: the same code with ``import wds_cloud as wds``;
- ``make_loader+to``: ``wds.make_loader(..., pin_memory=True)`` and the copy in the loop;
- ``make_loader+prefetch``: ``wds.make_loader(..., device=device, prefetch_to_device=True,
  pin_memory=True)``: batch ``i + 1`` is copied on a side stream while step ``i`` runs.

Each batch is "trained on" by a step on the compute stream: the images are summed as float32
(so the copy must be complete), then for ``--step-us`` microseconds the GPU spins
(``torch.cuda._sleep``, calibrated once per process), standing for the model. The pass ends
with a synchronize. Every variant must deliver the same per-pass checksum (sum of labels and
of all pixels, computed on the device) as webdataset does, so a copy that raced its use
fails the run. Reported: samples/s (median of rounds) and the ratio to ``webdataset+to`` per
round. Each measurement is a fresh interpreter; variants are interleaved, order rotating.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _data  # benchmarks/ is not a package

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("webdataset+to", "hand+to", "make_loader+to", "make_loader+prefetch")
REFERENCE = "webdataset+to"
FULL: dict[str, Any] = {"specs": {"jpeg256": (16, 500)}, "rounds": 3, "min_seconds": 3.0}
QUICK: dict[str, Any] = {"specs": {"jpeg256": (4, 500)}, "rounds": 2, "min_seconds": 1.0}


def build(variant: str, urls: list[str], device: str, workers: int) -> Any:
    """The timed loader of one variant; yields ``(images, labels)`` batches."""
    import wds_cloud as wds

    if variant.startswith("make_loader"):
        prefetch = variant.endswith("prefetch")
        return wds.make_loader(
            urls,
            batch_size=64,
            num_workers=workers,
            shuffle_buffer=0,
            shardshuffle=False,
            decode="rgb8",
            to_tuple="jpg cls",
            pin_memory=device != "cpu",
            device=device if prefetch else None,
            prefetch_to_device=prefetch,
        )
    lib: Any = wds
    if variant.startswith("webdataset"):
        import webdataset as wds_ref

        lib = wds_ref
    ds = lib.WebDataset(urls, shardshuffle=False).decode("rgb8").to_tuple("jpg", "cls").batched(64)
    return lib.WebLoader(ds, batch_size=None, num_workers=workers, pin_memory=device != "cpu")


def _spin_cycles_per_us(torch: Any) -> float:
    """GPU clock cycles ``torch.cuda._sleep`` spins per microsecond (measured with events)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 20_000_000
    torch.cuda._sleep(cycles)  # warm up
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return float(cycles / (start.elapsed_time(end) * 1000.0))


def worker(variant: str, urls: list[str], args: Any) -> dict[str, Any]:
    """Subprocess side: time whole passes until ``min_seconds``; checksum each pass."""
    import torch

    device = torch.device(args.device)
    loader = build(variant, urls, args.device, args.workers)
    moves = not variant.endswith("prefetch")
    spin = 0
    if args.step_us and device.type == "cuda":
        spin = int(args.step_us * _spin_cycles_per_us(torch))
    elif args.step_us:
        raise SystemExit("--step-us needs a CUDA device")
    sums: list[list[int]] = []

    def one_pass() -> int:
        n = 0
        labels = torch.zeros((), dtype=torch.int64, device=device)
        pixels = torch.zeros((), dtype=torch.float64, device=device)
        for images, cls in loader:
            if moves:
                images = images.to(device, non_blocking=True)
                cls = cls.to(device, non_blocking=True)
            if images.device.type != device.type or cls.device.type != device.type:
                raise RuntimeError(f"{variant}: batch on {images.device}, not {device}")
            pixels += images.sum(dtype=torch.float64)
            labels += cls.sum()
            if spin:
                torch.cuda._sleep(spin)
            n += len(cls)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        sums.append([int(labels.item()), int(pixels.item())])
        return n

    timed = _data.timed_passes(one_pass, args.min_seconds)
    return {
        "samples_per_s": timed.samples / timed.wall_s,
        "counts": timed.counts,
        "checksums": sorted({tuple(s) for s in sums}),
    }


def run(variant: str, urls: list[str], args: Any, step_us: int, min_seconds: float) -> Any:
    """Parent side: one fresh interpreter for one (variant, step)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", variant]
    cmd += ["--urls", json.dumps(urls), "--min-seconds", str(min_seconds)]
    cmd += ["--device", args.device, "--workers", str(args.workers), "--step-us", str(step_us)]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} step {step_us} us failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Command-line entry; see the module docstring."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    _data.add_run_options(p, ROOT)
    p.add_argument("--device", default="cuda")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--step-us", default="0", help="comma-separated simulated step times")
    args = p.parse_args(argv)
    if args.worker:
        args.step_us = int(args.step_us)
        print(json.dumps(worker(args.worker, json.loads(args.urls), args)))
        return 0
    conf = _data.run_conf(args, QUICK, FULL)
    data = _data.ensure(_data.DataSpec("jpeg256", *conf["specs"]["jpeg256"]), args.data_dir, print)
    urls, expected = list(data.paths), data.samples
    if args.workers > len(urls):
        p.error(f"--workers {args.workers} is more than the {len(urls)} shards (webdataset fails)")
    steps = [int(s) for s in args.step_us.split(",")]
    runs: dict[tuple[int, str], list[Any]] = {(s, v): [] for s in steps for v in VARIANTS}
    t0 = time.perf_counter()
    for rnd in range(conf["rounds"]):
        order = VARIANTS[rnd % len(VARIANTS) :] + VARIANTS[: rnd % len(VARIANTS)]
        _data.warm(urls)
        for step in steps:
            for v in order:
                res = run(v, urls, args, step, conf["min_seconds"])
                if res["counts"] != [expected]:
                    raise RuntimeError(f"{v}: {res['counts']} samples a pass, not {expected}")
                runs[step, v].append(res)
                print(
                    f"round {rnd} step {step:>6d} us {v:22s} {res['samples_per_s']:>9,.0f} "
                    f"samples/s checksums {res['checksums']}",
                    file=sys.stderr,
                )
    checks = {tuple(map(tuple, r["checksums"])) for rs in runs.values() for r in rs}
    if len(checks) != 1 or len(next(iter(checks))) != 1:
        raise RuntimeError(f"variants delivered different data: checksums {sorted(checks)}")
    lines = [
        f"| step (us) | loader | samples/s | / {REFERENCE} (min-max) |",
        "|---:|---|---:|---|",
    ]
    summary = []
    for step in steps:
        ref = runs[step, REFERENCE]
        for v in VARIANTS:
            rate = statistics.median(r["samples_per_s"] for r in runs[step, v])
            ratios = [
                a["samples_per_s"] / b["samples_per_s"]
                for a, b in zip(runs[step, v], ref, strict=True)
            ]
            ratio = statistics.median(ratios)
            summary.append({"step_us": step, "variant": v, "samples_per_s": rate, "ratio": ratio})
            lines.append(
                f"| {step} | {v} | {rate:,.0f} | {ratio:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |"
            )
    md = "\n".join(lines)
    print(md)
    print(f"{time.perf_counter() - t0:.0f} s, device {args.device}, {args.workers} workers")
    if args.out:
        with open(args.out, "w") as f:
            out = {"conf": conf, "device": args.device, "workers": args.workers, "rows": summary}
            json.dump({**out, "table_markdown": md}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
