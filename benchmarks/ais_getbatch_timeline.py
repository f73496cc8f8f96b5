"""Where a GetBatch request's ~100 ms goes: byte arrival times of one request, per cluster size.

Starts real AIStore clusters (``tests/servers/aistore.py``) with 2 targets and with 1 target,
puts small objects, and times raw GetBatch requests (``client.batch(..., streaming_get=True)
.get(raw=True)``, the request ``AisOpener.read_batch`` sends): the response headers, the
first body byte, the byte that completes the last entry's data, and the end of the body.
Also one ranged GET for comparison. Run from the repository root::

    python -m benchmarks.ais_getbatch_timeline [--requests 20]

AIStore 5.0 (v1.5.0, ``xact/xs/moss.go``): after the archive is assembled, the designated
target's handler calls ``wi.cleanup()`` -> ``wi.quiesce()``, which waits until no data or
control message from a peer target has arrived for ``noRxWindow`` (100 ms, a hard-coded
constant); every peer sends at least a "started" control message, so with 2+ targets every
request waits ~100 ms before the handler returns and the response's last buffered bytes
(and the chunked end) are sent. With 1 target there is no peer and no wait.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from tests.servers.aistore import Cluster

BUCKET = "timeline"


def _timeline(client, names: list[str]) -> dict[str, float]:
    batch = client.batch(cont_on_err=True, streaming_get=True)
    for n in names:
        batch.add(n, bck=BUCKET, provider="ais", start=0, length=4096)
    t0 = time.perf_counter()
    resp = batch.get(raw=True)
    t_head = time.perf_counter()
    raw = getattr(resp, "raw", resp)
    data_end = len(names) * (512 + 4096)  # tar header + data per entry, no trailer
    got = 0
    t_first = t_data = None
    while True:
        chunk = raw.read1(65536) if hasattr(raw, "read1") else raw.read(65536)
        if not chunk:
            break
        got += len(chunk)
        now = time.perf_counter()
        if t_first is None:
            t_first = now
        if t_data is None and got >= data_end:
            t_data = now
    t_eof = time.perf_counter()
    return {
        "headers": (t_head - t0) * 1e3,
        "first byte": ((t_first or t_eof) - t0) * 1e3,
        "last entry byte": ((t_data or t_eof) - t0) * 1e3,
        "end of body": (t_eof - t0) * 1e3,
    }


def run(targets: int, requests: int) -> None:
    from aistore.sdk import Client

    with Cluster(targets=targets, mountpaths=1) as cluster:
        client = Client(cluster.endpoint)
        bck = client.bucket(BUCKET).create(exist_ok=True)
        names = [f"obj-{i:03d}" for i in range(64)]
        for n in names:
            bck.object(n).get_writer().put_content(bytes(4096))
        for count in (1, 64):
            rows = [_timeline(client, names[:count]) for _ in range(requests)]
            cells = ", ".join(f"{k} {statistics.median(r[k] for r in rows):.1f}" for k in rows[0])
            print(f"targets={targets} entries={count:2d}: median ms: {cells}", flush=True)
        ranged = []
        for _ in range(requests):
            t0 = time.perf_counter()
            bck.object(names[0]).get_reader(byte_range="bytes=0-4095").read_all()
            ranged.append((time.perf_counter() - t0) * 1e3)
        print(f"targets={targets} one ranged GET: median {statistics.median(ranged):.1f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ais_getbatch_timeline")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--targets", type=int, nargs="+", default=[2, 1])
    args = parser.parse_args(argv)
    for targets in args.targets:
        run(targets, args.requests)
    return 0


if __name__ == "__main__":
    sys.exit(main())
