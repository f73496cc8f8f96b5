"""One rank of the per-rank profiling test: ``python dist_rank.py RANK WORLD INIT OUT URL...``.

Joins a gloo group through the ``file://`` rendezvous INIT, reads its share of the shards with
a profiled ``make_loader`` (one worker), then writes to OUT (JSON): the gathered report's
ranks and processes, the local report's, and (rank 0) the trace written next to OUT.
"""

from __future__ import annotations

import json
import sys

import torch.distributed as dist

import wds_cloud as wds
from wds_cloud.pytorch.builder import make_loader


def main() -> None:
    rank, world, init, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    loader = make_loader(
        sys.argv[5:],
        batch_size=8,
        num_workers=1,
        shuffle_buffer=0,
        nodesplitter=wds.split_by_node,
        profile=True,
    )
    samples = sum(len(batch["__key__"]) for batch in loader)
    report = loader.profile_report()  # every rank, gathered
    local = loader.profile_report(gather=False)
    loader.export_trace(out + ".trace.json")  # rank 0 writes it
    doc = {
        "samples": samples,
        "ranks": list(report.ranks),
        "processes": sorted((p.rank, p.role) for p in report.processes),
        "pids": sorted(p.pid for p in report.processes),
        "items": report.items,
        "per_rank_items": {r: report.rank(r).items for r in report.ranks},
        "table": report.table(),
        "local_ranks": list(local.ranks),
        "local_processes": sorted((p.rank, p.role) for p in local.processes),
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
