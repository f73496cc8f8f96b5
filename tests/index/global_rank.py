"""Ranks of the global-order SIGKILL tests: ``python global_rank.py CONFIG_JSON``.

Imports torch once, then forks ``world`` ranks that join a gloo process group (``init``, a
``file://`` rendezvous) and iterate ``make_loader(order="global")`` over ``urls`` with
``workers`` DataLoader workers each, one epoch. Like DDP, the ranks go in step: after each
batch every rank appends ``"<step> <key> <rank>/<worker>"`` lines to ``log-<gen>-<rank>.txt``
(flushed), they meet (a barrier), and every ``every`` steps rank 0 writes ``{"gen", "step",
"loader"}`` to ``ckpt`` atomically, after checking that every rank's ``state_dict()`` is the
same. With ``kill`` set, rank 0 sends SIGKILL to the whole process group (every rank and
every DataLoader worker) once it has logged that step (:func:`after_step`, which
``tests/resume/mixplan_rank.py`` shares), so where the run dies does not depend
on how fast anything runs. With ``ckpt`` present the loader resumes from it first.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

import wds_cloud as wds

BATCH = 12


def with_reader(sample: tuple[bytes]) -> tuple[str, str]:
    """``(key, "rank/worker")`` of a ``(txt,)`` sample, in the process that read it."""
    import torch.utils.data

    from wds_cloud.core.shards import node_info

    info = torch.utils.data.get_worker_info()
    return sample[0].decode(), f"{node_info()[0]}/{info.id if info is not None else 0}"


def run_rank(cfg: dict[str, Any], rank: int) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=cfg["init"], rank=rank, world_size=cfg["world"])
    loader = wds.make_loader(
        cfg["urls"],
        order="global",
        batch_size=BATCH,
        num_workers=cfg["workers"],
        seed=17,
        to_tuple=("txt",),
        map=with_reader,
        collate=list,
        uneven="pad",
    )
    if os.path.exists(cfg["ckpt"]):
        with open(cfg["ckpt"]) as f:
            loader.load_state_dict(json.load(f)["loader"])
    with open(os.path.join(cfg["dir"], f"log-{cfg['gen']}-{rank}.txt"), "w") as log:
        for step, batch in enumerate(loader, 1):
            log.writelines(f"{step} {key} {reader}\n" for key, reader in batch)
            log.flush()
            after_step(cfg, rank, step, loader)
    dist.barrier()
    dist.destroy_process_group()


def after_step(cfg: dict[str, Any], rank: int, step: int, loader: Any) -> None:
    """What every rank does after a step: meet the others (a barrier, DDP's all-reduce); every
    ``every`` steps gather the states, check they are equal and (rank 0) write the checkpoint
    atomically; at step ``kill`` rank 0 SIGKILLs the process group."""
    import torch.distributed as dist

    dist.barrier()  # every rank has the batch (DDP's all-reduce)
    if step % cfg["every"] == 0:
        states: list[Any] = [None] * cfg["world"]
        dist.all_gather_object(states, loader.state_dict())
        if rank == 0:
            if any(s != states[0] for s in states):
                raise SystemExit(f"ranks disagree on the state: {states}")
            tmp = cfg["ckpt"] + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"gen": cfg["gen"], "step": step, "loader": states[0]}, f)
            os.replace(tmp, cfg["ckpt"])
    if rank == 0 and step == cfg["kill"]:
        os.killpg(os.getpgrp(), signal.SIGKILL)


def main(target: Any = run_rank) -> None:
    """Fork ``world`` ranks running ``target(cfg, rank)`` (also used by
    ``tests/resume/mixplan_rank.py``); exit non-zero when one fails."""
    import multiprocessing

    import torch.distributed  # noqa: F401  (imported once, before the fork)

    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    fork = multiprocessing.get_context("fork")
    procs = [fork.Process(target=target, args=(cfg, rank)) for rank in range(cfg["world"])]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=240)
    failed = [(rank, proc.exitcode) for rank, proc in enumerate(procs) if proc.exitcode != 0]
    if failed:
        sys.exit(f"ranks failed (rank, exit code): {failed}")
    print("done", flush=True)


if __name__ == "__main__":
    main()
