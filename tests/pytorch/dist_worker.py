"""Run as a subprocess: read the shards as one rank and print the keys as JSON.

Usage: ``python dist_worker.py MODE PATTERN [RANK WORLD PORT]``. MODE ``env`` takes the rank
from ``RANK``/``WORLD_SIZE``; ``gloo`` joins a torch.distributed gloo group on 127.0.0.1 first;
``single`` uses the default nodesplitter (which must refuse world size > 1).
"""

from __future__ import annotations

import json
import sys

import torch.distributed as dist
from torch.utils.data import DataLoader

import wds_cloud.core.shards as shards
from wds_cloud.pytorch import WebDataset


def _key(sample: dict[str, object]) -> object:
    return sample["__key__"]


def main() -> None:
    mode, pattern = sys.argv[1], sys.argv[2]
    if mode == "gloo":
        rank, world, port = (int(x) for x in sys.argv[3:6])
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
        )
    splitter = shards.single_node_only if mode == "single" else shards.split_by_node
    ds = WebDataset(pattern, shardshuffle=False, nodesplitter=splitter).map(_key)
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork")
    keys = list(loader)
    print(json.dumps({"rank": shards.node_info()[0], "keys": keys}))
    if mode == "gloo":
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
