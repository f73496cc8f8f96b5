"""Read throughput against fake-gcs-server: GcsOpener vs download_to_file vs Blob.open("rb").

Also prints how much the process's peak RSS grew while each reader ran (Linux only).

Run: ``python -m benchmarks.bench_gcs_read [MiB]`` from the repository root. Prints MiB/s, the
median of 3 runs per reader, all against one in-memory fake-gcs-server on 127.0.0.1.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.fake_gcs import FakeGcsServer
from wds_cloud.openers.gcs import GcsOpener


def _peak_rss_reset() -> None:
    with open("/proc/self/clear_refs", "w") as f:  # resets VmHWM (Linux)
        f.write("5")


def _rss_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _drain_opener(opener: GcsOpener, url: str) -> int:
    buf = bytearray(1 << 20)
    total = 0
    with opener.open(url) as stream:
        while n := stream.readinto(buf):
            total += n
    return total


def main(mib: int = 128) -> None:
    """Upload one ``mib`` MiB blob and time each reader on it."""
    with tempfile.TemporaryDirectory() as tmp, FakeGcsServer(Path(tmp) / "fake-gcs.log") as srv:
        client = srv.client()
        client.create_bucket("bench")
        data = os.urandom(mib << 20)
        client.bucket("bench").blob("big.bin").upload_from_string(data)
        del data
        opener = GcsOpener(endpoint=srv.endpoint)
        url = "gs://bench/big.bin"
        blob = client.bucket("bench").blob("big.bin")

        def dl() -> int:
            with open(os.devnull, "wb") as sink:
                blob.download_to_file(sink)
            return mib << 20

        def blob_open() -> int:
            total = 0
            with blob.open("rb") as r:
                while chunk := r.read(1 << 20):
                    total += len(chunk)
            return total

        readers: dict[str, Callable[[], int]] = {
            "GcsOpener.open (readinto 1 MiB)": lambda: _drain_opener(opener, url),
            "blob.download_to_file": dl,
            "Blob.open('rb') read(1 MiB)": blob_open,
        }
        for name, fn in readers.items():
            rates = []
            _peak_rss_reset()
            base = _rss_mib("VmRSS")
            for _ in range(3):
                t0 = time.perf_counter()
                n = fn()
                assert n == mib << 20, (name, n)
                rates.append(n / (1 << 20) / (time.perf_counter() - t0))
            growth = _rss_mib("VmHWM") - base
            print(
                f"{name:34s} {statistics.median(rates):7.1f} MiB/s  "
                f"runs={[round(r) for r in rates]}  peak RSS growth {growth:.0f} MiB"
            )

        # Per-shard overhead: many small objects read one after another.
        names = [f"small/{i:04d}" for i in range(300)]
        for name in names:
            client.bucket("bench").blob(name).upload_from_string(b"x" * 65536)
        small: dict[str, Callable[[str], int]] = {
            "GcsOpener.open, 64 KiB objects": lambda n: _drain_opener(opener, f"gs://bench/{n}"),
            "blob.download_as_bytes, 64 KiB": lambda n: len(
                client.bucket("bench").blob(n).download_as_bytes()
            ),
        }
        for label, read_one in small.items():
            t0 = time.perf_counter()
            assert sum(read_one(n) for n in names) == 300 * 65536
            print(f"{label:34s} {300 / (time.perf_counter() - t0):7.0f} objects/s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 128)
