"""Dataset jobs: the local engine against Ray with 1 and 2 workers, and Ray Data's own
``read_webdataset``/``write_webdataset`` on the same data.

Run from the repository root (needs ``pip install 'wds_cloud[ray]'``)::

    python -m benchmarks.bench_ray                        # 16 shards x 500 "small" samples
    python -m benchmarks.bench_ray --shards 8 --per-shard 250

Every contender runs in a fresh subprocess (its own local Ray on 127.0.0.1 with ``--cpus N``,
started and warmed up before the clock starts) and does the same work on the same shards
(``benchmarks/_data.py``'s ``small`` regime: 64x64 JPEG + class + JSON, ~9 KB a sample):

- **map**: read every sample, upper-case nothing but copy ``json`` to ``txt``, write shards.
  wds_cloud: ``map_shards``; Ray Data: ``read_webdataset(decoder=None).map(fn)
  .write_webdataset(encoder=None)``; wds_cloud.ray: ``read_dataset(...).map(fn)`` +
  ``write_dataset``.
- **reshard**: new shards of 1,000 samples (wds_cloud ``reshard``), and with ``--shuffle``
  a seeded global shuffle (Ray Data: ``random_shuffle()`` + ``repartition``).
- **convert**: the same samples as a directory of files grouped by key (``k.jpg``, ``k.cls``,
  ``k.json``, written once next to the shards) into shards of 1,000 samples (wds_cloud
  ``convert``; Ray Data: ``read_binary_files(include_paths=True)``, one row per file grouped
  by key with ``groupby().map_groups()``, ``repartition`` + ``write_webdataset``).

Reported: samples/s, MB/s of input, and peak RSS of the driver and of the busiest Ray worker
(``VmHWM`` of every worker process, read before Ray shuts down). Client, workers and disk share
this machine's cores: compare rows of one run, not across machines.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks._data import DataSpec, ensure, warm
from tests.jobs.helpers import descendants


def _fn(sample: dict[str, Any]) -> dict[str, Any]:
    out = dict(sample)
    out["txt"] = sample["json"]
    return out


def _worker_peak_kb() -> int:
    """Largest VmHWM among this process's Ray worker processes (not GCS, raylet, agents)."""
    peak = 0
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read()
            if not title.startswith(b"ray::") or b"Agent" in title:
                continue
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            continue
    return peak


def _start_ray(cpus: int) -> Any:
    from wds_cloud.jobs.engines import loopback_only

    loopback_only()
    import ray

    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)

    @ray.remote
    def warmup() -> int:
        import wds_cloud.jobs.task  # noqa: F401  (imports paid before the clock starts)

        return os.getpid()

    ray.get([warmup.remote() for _ in range(4 * cpus)])
    return ray


def run_one(contender: str, job: str, cpus: int, paths: list[str], out: str) -> dict[str, Any]:
    """Run one contender in this process; return its measurements."""
    ray = _start_ray(cpus) if contender != "local" else None
    import numpy  # noqa: F401  (imports paid before the clock starts)

    import wds_cloud.jobs
    import wds_cloud.jobs.task  # noqa: F401

    pattern = os.path.join(out, "o-%06d.tar")
    os.makedirs(out, exist_ok=True)
    files = _files_dir(paths)
    started = time.perf_counter()
    if job == "convert" and contender == "ray.data webdataset":
        assert ray is not None
        _ray_data_convert(ray, files, out, _nshards(paths))
    elif contender in ("local", "wds_cloud-ray"):
        from wds_cloud.jobs import convert, map_shards, reshard

        engine = "ray" if ray else "local"
        if job == "map":
            map_shards(paths, pattern, _fn, engine=engine, manifest=False)
        elif job == "convert":
            convert(files, pattern, maxcount=1000, engine=engine, manifest=False)
        else:
            reshard(
                paths,
                pattern,
                maxcount=1000,
                shuffle=job == "shuffle",
                seed=1,
                engine=engine,
                manifest=False,
            )
    elif contender == "wds_cloud.ray":
        from wds_cloud.ray import read_dataset, write_dataset

        ds = read_dataset(paths)
        if job == "map":
            ds = ds.map(_fn)
        elif job == "shuffle":
            ds = ds.random_shuffle(seed=1)
        write_dataset(ds, pattern, num_shards=None if job == "map" else _nshards(paths))
    else:  # Ray Data's own webdataset reader and writer
        assert ray is not None
        ds = ray.data.read_webdataset(paths, decoder=None)
        if job == "map":
            ds = ds.map(_fn)
        elif job == "shuffle":
            ds = ds.random_shuffle(seed=1)
        if job != "map":
            ds = ds.repartition(_nshards(paths))
        ds.write_webdataset(out, encoder=None)
    seconds = time.perf_counter() - started
    worker = _worker_peak_kb() if ray else 0
    if ray:
        ray.shutdown()
    return {
        "seconds": seconds,
        "driver_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "worker_kb": worker,
    }


def _files_dir(paths: list[str]) -> str:
    """The samples of ``paths`` as files grouped by key, in a folder next to the shards
    (written once; a ``files.done`` marker beside it says it is complete)."""
    import tarfile

    folder = os.path.join(os.path.dirname(paths[0]), "files")
    if not os.path.exists(folder + ".done"):
        os.makedirs(folder, exist_ok=True)
        for path in paths:
            with tarfile.open(path) as tar:
                for member in tar:
                    data = tar.extractfile(member)
                    assert data is not None
                    with open(os.path.join(folder, member.name.replace("/", "_")), "wb") as f:
                        f.write(data.read())
        open(folder + ".done", "w").close()
    return folder


def _ray_data_convert(ray: Any, folder: str, out: str, nshards: int) -> None:
    """Files grouped by key into shards with Ray Data's own operators."""
    import numpy as np

    def split(row: dict[str, Any]) -> dict[str, Any]:
        name = os.path.basename(row["path"])
        key, _, ext = name.partition(".")
        return {"__key__": key, "ext": ext, "data": row["bytes"]}

    def combine(group: dict[str, Any]) -> dict[str, Any]:
        sample = {"__key__": np.array([group["__key__"][0]])}
        for ext, data in zip(group["ext"], group["data"], strict=True):
            sample[str(ext)] = np.array([data], dtype=object)
        return sample

    names = [os.path.join(folder, n) for n in sorted(os.listdir(folder))]
    ds = ray.data.read_binary_files(names, include_paths=True).map(split)
    ds = ds.groupby("__key__").map_groups(combine, batch_format="numpy")
    ds.repartition(nshards).write_webdataset(out, encoder=None)


def _nshards(paths: list[str]) -> int:
    return max(1, int(os.environ.get("BENCH_SAMPLES", "0")) // 1000) or len(paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--per-shard", type=int, default=500)
    parser.add_argument("--root", default="bench_data")
    parser.add_argument("--jobs", default="map,reshard,shuffle,convert")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)  # contender job cpus out
    args = parser.parse_args()
    data = ensure(DataSpec("small", args.shards, args.per_shard), args.root, log=print)
    paths = list(data.paths)
    if args.one:
        contender, job, cpus, out = args.one
        print(json.dumps(run_one(contender, job, int(cpus), paths, out)))
        return
    warm(paths)
    rows = []
    contenders = [
        ("local", 1),
        ("wds_cloud-ray", 1),
        ("wds_cloud-ray", 2),
        ("wds_cloud.ray", 2),
        ("ray.data webdataset", 2),
    ]
    env = {**os.environ, "BENCH_SAMPLES": str(data.samples)}
    for job in args.jobs.split(","):
        for contender, cpus in contenders:
            if contender == "wds_cloud.ray" and job in ("reshard", "convert"):
                continue  # reshard: map without the function; convert: no files reader
            out = tempfile.mkdtemp(prefix="bench-ray-")
            try:
                proc = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks.bench_ray",
                        "--shards",
                        str(args.shards),
                        "--per-shard",
                        str(args.per_shard),
                        "--root",
                        args.root,
                        "--one",
                        contender,
                        job,
                        str(cpus),
                        out,
                    ],
                    capture_output=True,
                    text=True,
                    env=env,
                )
                if proc.returncode != 0:
                    print(f"{contender} {job} failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
                    continue
                m = json.loads(proc.stdout.strip().splitlines()[-1])
            finally:
                shutil.rmtree(out, ignore_errors=True)
            rows.append((job, contender, cpus, m))
            print(f"  done {job} {contender} x{cpus}: {m['seconds']:.2f} s", file=sys.stderr)
    mb = data.nbytes / 1e6
    print(f"\n{data.samples} samples, {mb:.1f} MB in {len(paths)} shards; {os.cpu_count()} cores\n")
    print("| job | contender | Ray CPUs | samples/s | MB/s | driver peak MB | worker peak MB |")
    print("|---|---|---|---|---|---|---|")
    for job, contender, cpus, m in rows:
        print(
            f"| {job} | {contender} | {cpus if contender != 'local' else '-'} | "
            f"{data.samples / m['seconds']:,.0f} | {mb / m['seconds']:.1f} | "
            f"{m['driver_kb'] / 1024:.0f} | {m['worker_kb'] / 1024 if m['worker_kb'] else 0:.0f} |"
        )


if __name__ == "__main__":
    main()
