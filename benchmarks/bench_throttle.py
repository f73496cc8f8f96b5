"""Throttling: a loader behind a proxy that answers 503 above R requests a second, with the AIMD
limiter on (the default) and off (``WDS_CLOUD_THROTTLE=0``); and with no 503s, on vs off.

Run from the repository root (it starts an HTTP file server and
:class:`tests.support.throttle_proxy.ThrottleProxy` on 127.0.0.1, in this process)::

    python benchmarks/bench_throttle.py                   # R = 50/s, 32 shards, prefetch=16
    python benchmarks/bench_throttle.py --rate 50 --shards 8 --rounds 1

Each cell reads every shard with ``WebDataset`` (parallel ranged reads, ``prefetch`` parts of
``--part-kib`` KiB, read-ahead on) through the proxy, which waits ``--delay`` seconds before
forwarding each request (a far-away store: requests a second then follow requests in flight).
The proxy's token bucket holds ``--burst`` seconds of R (0.2 s: 10 requests at R = 50).
A shard that fails is counted (the handler skips it) and the samples are compared with a direct
read: "lost" and "repeated" count samples missing or seen twice. "req/s" is the proxy's
forwarded GETs a second over the cell's wall time; "of R" divides it by the rate. Cells are
interleaved round by round; the median round is shown.

``--getbatch`` adds two cells: the same shards in the AIStore emulator (in this process),
every sample's ``.bin`` member read by ``AisOpener.read_batch`` (GetBatch, ``--batch-entries``
entries a request) from ``--batch-threads`` threads at once through the proxy (AIStore's 503),
the limiter on and off; "samples/s" counts entries, "lost" the entries whose bytes are missing
or wrong (a failed batch loses all of its entries), "failed" the failed batches.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tests.support import tarbuild  # noqa: E402
from tests.support.http_server import HttpFileServer  # noqa: E402
from tests.support.throttle_proxy import ThrottleProxy  # noqa: E402
from wds_cloud import WebDataset  # noqa: E402 - imported before any cell is timed
from wds_cloud.openers.http.opener import HttpOpener  # noqa: E402
from wds_cloud.openers.registry import OpenerRegistry  # noqa: E402


def shard_members(s: int, samples: int, size: int) -> list[tuple[str, bytes]]:
    rng = random.Random(s)
    members = []
    for i in range(samples):
        key = f"s{s:03d}_{i:04d}"
        members += [(f"{key}.txt", key.encode()), (f"{key}.bin", rng.randbytes(size))]
    return members


def make_shards(root: Path, shards: int, samples: int, size: int) -> list[str]:
    names = []
    for s in range(shards):
        members = shard_members(s, samples, size)
        name = f"shard-{s:03d}.tar"
        tarbuild.write(str(root / name), tarbuild.tar_bytes(members, mtime=0))
        names.append(name)
    return names


def read_all(base: str, names: list[str], prefetch: int, part: int) -> tuple[Counter[str], int]:
    """(sample keys seen, failed shards) of one pass."""
    failed: list[BaseException] = []

    def skip(exc: BaseException) -> bool:
        failed.append(exc)
        return True

    registry = OpenerRegistry()
    registry.register("http", HttpOpener(prefetch=prefetch, prefetch_chunk=part), override=True)
    urls = [f"{base}/{n}" for n in names]
    dataset = WebDataset(urls, registry=registry, shardshuffle=False, handler=skip)
    seen: Counter[str] = Counter(s["__key__"] for s in dataset)
    return seen, len(failed)


def cell(
    server: HttpFileServer, names: list[str], args: argparse.Namespace, rate: float | None, on: bool
) -> dict[str, Any]:
    os.environ["WDS_CLOUD_THROTTLE"] = "1" if on else "0"
    burst = max(2.0, (rate or 0) * args.burst)
    with ThrottleProxy(
        server.port, rate=rate, style="http", burst=burst, delay=args.delay
    ) as proxy:
        start = time.monotonic()
        seen, failed = read_all(proxy.url, names, args.prefetch, args.part_kib << 10)
        wall = time.monotonic() - start
        gets = proxy.forwarded
    expected = args.shards * args.samples
    return {
        "wall": wall,
        "samples/s": sum(seen.values()) / wall,
        "req/s": gets / wall,
        "failed": failed,
        "lost": expected - len(seen),
        "repeated": sum(n - 1 for n in seen.values()),
        "503s": proxy.throttled,
    }


def getbatch_cell(
    emu: Any, root: Path, names: list[str], args: argparse.Namespace, rate: float, on: bool
) -> dict[str, Any]:
    """GetBatch of every sample's ``.bin`` member through the proxy in front of the emulator."""
    import tarfile

    from wds_cloud.openers.ais.opener import AisOpener
    from wds_cloud.openers.capabilities import RangeRequest

    requests, expected = [], []
    for name in names:
        data = (root / name).read_bytes()
        with tarfile.open(root / name) as tar:
            for info in tar:
                if info.name.endswith(".bin"):
                    requests.append(
                        RangeRequest(f"ais://bench/{name}", info.offset_data, info.size)
                    )
                    expected.append(data[info.offset_data : info.offset_data + info.size])
    threads = args.batch_threads
    share = -(-len(requests) // threads)
    parts = [range(i, min(i + share, len(requests))) for i in range(0, len(requests), share)]
    os.environ["WDS_CLOUD_THROTTLE"] = "1" if on else "0"
    burst = max(2.0, rate * args.burst)
    failed = 0
    with ThrottleProxy(emu.port, rate=rate, style="ais", burst=burst, delay=args.delay) as proxy:
        opener = AisOpener(endpoint=proxy.url, batch_entries=args.batch_entries)

        def read(part: range) -> list[bytes] | None:
            try:
                return opener.read_batch([requests[i] for i in part])
            except Exception:
                return None

        start = time.monotonic()
        with ThreadPoolExecutor(threads) as pool:
            answers = list(pool.map(read, parts))
        wall = time.monotonic() - start
        gets = proxy.forwarded
    good = 0
    for part, answer in zip(parts, answers, strict=True):
        if answer is None:
            failed += 1
            continue
        good += sum(answer[k] == expected[i] for k, i in enumerate(part))
    return {
        "wall": wall,
        "samples/s": good / wall,
        "req/s": gets / wall,
        "failed": failed,
        "lost": len(requests) - good,
        "repeated": "-",  # entries are answered by position
        "503s": proxy.throttled,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="R: requests/s let through")
    parser.add_argument("--delay", type=float, default=0.02, help="seconds added per request")
    parser.add_argument(
        "--burst", type=float, default=0.2, help="seconds of R the proxy lets burst"
    )
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--samples", type=int, default=64, help="samples per shard")
    parser.add_argument("--size", type=int, default=8000, help="bytes per sample")
    parser.add_argument("--prefetch", type=int, default=16)
    parser.add_argument("--part-kib", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--getbatch", action="store_true", help="add the GetBatch cells")
    parser.add_argument("--batch-entries", type=int, default=16, help="entries a GetBatch")
    parser.add_argument("--batch-threads", type=int, default=4, help="read_batch at once")
    args = parser.parse_args(argv)

    cells = [
        ("503 above R, throttle on", args.rate, True),
        ("503 above R, throttle off", args.rate, False),
        ("no 503s, throttle on", None, True),
        ("no 503s, throttle off", None, False),
    ]
    batch_cells = [("GetBatch, 503 above R, on", True), ("GetBatch, 503 above R, off", False)]
    if args.getbatch:
        cells += [(name, args.rate, on) for name, on in batch_cells]
    saved = os.environ.get("WDS_CLOUD_THROTTLE")
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in cells}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        root = Path(tmp)
        names = make_shards(root, args.shards, args.samples, args.size)
        server = stack.enter_context(HttpFileServer(root))
        emu = None
        if args.getbatch:
            from tests.emulators.ais.server import AisEmulator

            emu = stack.enter_context(AisEmulator())
            emu.store.create_bucket("bench", exist_ok=True)
            for name in names:
                emu.store.put_object("bench", name, (root / name).read_bytes())
        try:
            for _ in range(args.rounds):
                for name, rate, on in cells:
                    if name.startswith("GetBatch"):
                        assert rate is not None
                        got = getbatch_cell(emu, root, names, args, rate, on)
                    else:
                        got = cell(server, names, args, rate, on)
                    results[name].append(got)
        finally:
            if saved is None:
                os.environ.pop("WDS_CLOUD_THROTTLE", None)
            else:
                os.environ["WDS_CLOUD_THROTTLE"] = saved
    print(
        f"R = {args.rate:g} requests/s, {args.delay * 1000:g} ms per request, {args.shards} "
        f"shards x {args.samples} samples x {args.size} B, prefetch={args.prefetch} x "
        f"{args.part_kib} KiB, median of {args.rounds} rounds"
    )
    print(
        f"{'cell':28} {'samples/s':>10} {'req/s':>8} {'of R':>6} {'failed':>7} "
        f"{'lost':>5} {'repeated':>8} {'503s':>6}"
    )
    for name, rate, _ in cells:
        runs = sorted(results[name], key=lambda r: r["samples/s"])
        mid = runs[len(runs) // 2]
        share = f"{mid['req/s'] / rate:.2f}" if rate else "-"
        print(
            f"{name:28} {mid['samples/s']:>10.0f} {mid['req/s']:>8.1f} {share:>6} "
            f"{mid['failed']:>7} {mid['lost']:>5} {mid['repeated']:>8} {mid['503s']:>6}"
        )


if __name__ == "__main__":
    main()
