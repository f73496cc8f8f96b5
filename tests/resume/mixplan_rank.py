"""Ranks of the data-plan SIGKILL test: ``python mixplan_rank.py CONFIG_JSON``.

Imports torch once, then forks ``world`` ranks that join a gloo process group (``init``, a
``file://`` rendezvous) and iterate ``make_loader(plan)`` (the plan of :func:`make_plan` over
``sources``) with ``workers`` DataLoader workers each, until epoch ``epochs``. Like DDP, the
ranks go in step, and as under ``torch.distributed``'s ``Join`` a rank past the end of an
epoch's last step takes the step without a batch: after each step every rank appends
``"<epoch> <step> <rank> <source>:<key> <rank>/<worker>"`` lines to ``log-<gen>-<rank>.txt``
(flushed), they meet (a barrier), and every ``every`` steps rank 0 writes ``{"gen", "step",
"loader"}`` to ``ckpt`` atomically, after checking that every rank's ``state_dict()`` is the
same. With ``kill`` set, rank 0 sends SIGKILL to the whole process group (every rank and every
DataLoader worker) once it has logged that step. With ``ckpt`` present the loader resumes from
it first.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import wds_cloud as wds
from tests.index.global_rank import after_step

BATCH = 64


def write_sources(root: Path) -> dict[str, list[str]]:
    """Three indexed local sources under ``root``: ``a`` 4 shards x 50 samples, ``b`` 3 x 100,
    ``c`` 1 x 77 (keys ``sNNN/kNNNNN``, ``.txt`` = the key)."""
    from tests.resume.helpers import write_shards

    sources = {}
    for name, shards, per in (("a", 4, 50), ("b", 3, 100), ("c", 1, 77)):
        (root / name).mkdir()
        urls, _ = write_shards(root / name, shards, per)
        wds.build_index(urls, json=None)
        sources[name] = urls
    return sources


def make_plan(sources: dict[str, list[str]]) -> wds.DataPlan:
    """3 sources, 0.5 / 0.3 / 0.2 of each epoch by exact counts: ``a`` (200 samples) gives 384
    (``counts``: almost two passes), ``b`` (300) 230 drawn without replacement (``choose``),
    ``c`` (77) two passes (``repeat``); stratified batches of 64; 768 samples an epoch."""
    return wds.mix(
        sources,
        counts={"a": 384},
        choose={"b": 230},
        repeat={"c": 2},
        batching="stratified",
        seed=23,
    )


def with_reader(sample: tuple[bytes, str]) -> tuple[str, str]:
    """``("<source>:<key>", "rank/worker")``, in the process that read the sample."""
    import torch.utils.data

    from wds_cloud.core.shards import node_info

    info = torch.utils.data.get_worker_info()
    reader = f"{node_info()[0]}/{info.id if info is not None else 0}"
    return f"{sample[1]}:{sample[0].decode()}", reader


def make_loader(sources: dict[str, list[str]], workers: int) -> Any:
    return wds.make_loader(
        make_plan(sources),
        batch_size=BATCH,
        num_workers=workers,
        to_tuple=("txt", "__source__"),
        map=with_reader,
        collate=list,
    )


def run_rank(cfg: dict[str, Any], rank: int) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=cfg["init"], rank=rank, world_size=cfg["world"])
    loader = make_loader(cfg["sources"], cfg["workers"])
    if os.path.exists(cfg["ckpt"]):
        with open(cfg["ckpt"]) as f:
            loader.load_state_dict(json.load(f)["loader"])
    step = 0
    with open(os.path.join(cfg["dir"], f"log-{cfg['gen']}-{rank}.txt"), "w") as log:
        while (epoch := loader.state_dict()["epoch"]) < cfg["epochs"]:
            steps = torch.tensor([len(loader)])
            dist.all_reduce(steps, op=dist.ReduceOp.MAX)  # rank 0's count: the most
            batches = iter(loader)
            for _ in range(int(steps.item())):
                batch = next(batches, None) or []  # none: past the end of the last step
                step += 1
                log.writelines(f"{epoch} {step} {rank} {sid} {reader}\n" for sid, reader in batch)
                log.flush()
                after_step(cfg, rank, step, loader)
            next(batches, None)  # end the pass
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    from tests.index.global_rank import main

    main(run_rank)
