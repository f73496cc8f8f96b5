"""GetBatch of tar samples: ``start``/``length`` ranges vs ``archpath`` members, with and
without AIStore's shard index.

Starts a real AIStore cluster (``tests/servers/aistore.py``), puts ``--shards`` TAR shards of
``--samples`` samples each (members ``.cls``, ``.json``, ``.jpg`` of ~``--size`` bytes), and
times raw GetBatch requests (``client.batch(..., streaming_get=True).get(raw=True)``, read to
the end) for ``--batch`` random samples, fetched four ways:

- ``ranges/sample``: one ``start``/``length`` entry per sample (the sample's tar headers and
  members, contiguous in the shard): what ``AisOpener.read_batch`` sends for
  ``IndexedWebDataset.get_batch``;
- ``ranges/member``: one range entry per member (data only);
- ``archpath/member``: one ``archpath`` entry per member (what a loader without an index of its
  own, e.g. ``aistore.pytorch.AISBatchIterDataset``, sends);
- ``archpath/jpg``: one ``archpath`` entry per sample, its largest member only.

Each way is timed before and after ``index-shard`` (the xaction behind ``ais bucket
shard-index build``; started here with a plain ``POST /v1/buckets/<bucket>``, as the SDK 2.0.0
has no call for it), rounds interleaved, median reported. The archpath answers are checked
against the range bytes. Run from the repository root::

    python -m benchmarks.ais_archpath [--targets 2 1] [--rounds 9]
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.servers.aistore import Cluster

BUCKET = "archpath"
EXTS = ("cls", "json", "jpg")


@dataclass(frozen=True)
class Member:
    shard: str
    name: str
    data_offset: int
    size: int


@dataclass(frozen=True)
class Sample:
    shard: str
    offset: int  # the first member's header
    length: int  # through the last member's data
    members: tuple[Member, ...]


def make_shard(name: str, count: int, size: int, rng: random.Random) -> tuple[bytes, list[Sample]]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(count):
            key = f"s{i:06d}"
            for ext in EXTS:
                n = {"cls": 2, "json": 100}.get(ext, rng.randint(size // 2, size * 3 // 2))
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = n
                tar.addfile(info, io.BytesIO(rng.randbytes(n)))
    data = buf.getvalue()
    samples: list[Sample] = []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        infos = tar.getmembers()
    for i in range(0, len(infos), len(EXTS)):
        group = infos[i : i + len(EXTS)]
        members = tuple(Member(name, m.name, m.offset_data, m.size) for m in group)
        last = members[-1]
        samples.append(
            Sample(name, group[0].offset, last.data_offset + last.size - group[0].offset, members)
        )
    return data, samples


def _send(client: Any, add: Callable[[Any], None]) -> tuple[float, bytes]:
    batch = client.batch(cont_on_err=True, streaming_get=True)
    add(batch)
    t0 = time.perf_counter()
    resp = batch.get(raw=True)
    raw = getattr(resp, "raw", resp)
    body = raw.read()
    return time.perf_counter() - t0, body


def members_of(body: bytes) -> list[bytes]:
    with tarfile.open(fileobj=io.BytesIO(body), mode="r|") as tar:
        out = []
        for m in tar:
            f = tar.extractfile(m) if m.isfile() else None
            if f is not None:
                out.append(f.read())
        return out


def ways(picked: list[Sample]) -> dict[str, Callable[[Any], None]]:
    def by_sample(batch: Any) -> None:
        for s in picked:
            batch.add(s.shard, bck=BUCKET, provider="ais", start=s.offset, length=s.length)

    def by_member_range(batch: Any) -> None:
        for s in picked:
            for m in s.members:
                batch.add(m.shard, bck=BUCKET, provider="ais", start=m.data_offset, length=m.size)

    def by_archpath(batch: Any) -> None:
        for s in picked:
            for m in s.members:
                batch.add(m.shard, bck=BUCKET, provider="ais", archpath=m.name)

    def by_archpath_jpg(batch: Any) -> None:
        for s in picked:
            batch.add(s.shard, bck=BUCKET, provider="ais", archpath=s.members[-1].name)

    return {
        "ranges/sample": by_sample,
        "ranges/member": by_member_range,
        "archpath/member": by_archpath,
        "archpath/jpg": by_archpath_jpg,
    }


def build_shard_index(client: Any, timeout: int = 300) -> float:
    """Start ``index-shard`` on the bucket and wait for it; seconds taken."""
    bck = client.bucket(BUCKET)
    t0 = time.perf_counter()
    resp = bck.make_request("POST", "index-shard", value={})
    xid = resp.text.strip().strip('"')
    client.job(job_id=xid, job_kind="index-shard").wait(timeout=timeout, verbose=False)
    return time.perf_counter() - t0


def timed_round(
    client: Any, all_ways: dict[str, Callable[[Any], None]], rows: dict[str, list[float]]
) -> dict[str, bytes]:
    bodies = {}
    for label, add in all_ways.items():
        secs, body = _send(client, add)
        rows.setdefault(label, []).append(secs * 1e3)
        bodies[label] = body
    return bodies


def run(targets: int, args: argparse.Namespace) -> None:
    from aistore.sdk import Client

    rng = random.Random(7)
    with Cluster(targets=targets, mountpaths=1) as cluster:
        client = Client(cluster.endpoint)
        bck = client.bucket(BUCKET).create(exist_ok=True)
        samples: list[Sample] = []
        total = 0
        for k in range(args.shards):
            name = f"shards/shard-{k:04d}.tar"
            data, ss = make_shard(name, args.samples, args.size, rng)
            bck.object(name).get_writer().put_content(data)
            samples += ss
            total += len(data)
        print(
            f"targets={targets}: {args.shards} shards x {args.samples} samples "
            f"({total / args.shards / 2**20:.1f} MiB/shard), batch {args.batch} samples",
            flush=True,
        )
        batches = [rng.sample(samples, args.batch) for _ in range(args.rounds)]
        warm = ways(batches[0])
        bodies = timed_round(client, warm, {})  # warm-up, and check the answers agree
        per_member = members_of(bodies["ranges/member"])
        assert per_member == members_of(bodies["archpath/member"]), "archpath != range bytes"
        for phase in ("no shard index", "shard index"):
            if phase == "shard index":
                secs = build_shard_index(client)
                print(f"targets={targets}: index-shard took {secs:.2f} s", flush=True)
                bodies = timed_round(client, warm, {})
                assert per_member == members_of(bodies["archpath/member"])
            rows: dict[str, list[float]] = {}
            for picked in batches:
                timed_round(client, ways(picked), rows)
            for label, ms in rows.items():
                print(
                    f"targets={targets} {phase:15s} {label:16s} median {statistics.median(ms):7.1f}"
                    f" ms  (min {min(ms):.1f}, max {max(ms):.1f})",
                    flush=True,
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ais_archpath")
    parser.add_argument("--targets", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--samples", type=int, default=1000, help="samples per shard")
    parser.add_argument("--size", type=int, default=16384, help="mean .jpg bytes")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    for targets in args.targets:
        run(targets, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
