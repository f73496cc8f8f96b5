"""Ranks of the elastic resume tests: ``python elastic_rank.py CONFIG_JSON...``.

Imports torch once, then forks one process per CONFIG (a JSON file) and runs a rank in each;
exits non-zero when a rank fails. A CONFIG holds ``urls``, ``rank``, ``world``, ``workers``,
``out`` and:

- ``init``: a ``file://`` rendezvous for a gloo process group of ``world`` ranks; None runs
  without ``torch.distributed``, the rank and world size set in ``RANK``/``WORLD_SIZE`` only
  (as ranks that save their states separately);
- ``state``: a state to ``load_state_dict()`` first, or None;
- ``stop``: take ``state_dict()`` after this many batches and stop (every rank at the same
  step); None: finish the epoch, then run the next one;
- ``window`` and ``buffer`` (optional): use a ``WebLoader`` whose dataset has
  ``with_epoch(window)`` (batches of 4 per worker) and a shuffle buffer, instead;
- ``mix`` (optional): use a ``RandomMix`` of two datasets read by the workers, instead;
- ``ahead`` (optional): iterate through ``ReadAhead`` (``DevicePrefetcher``'s one-batch-ahead
  loop, here with no copy) and take its state instead of the loader's.

The loader is ``make_loader`` (shuffle buffers in the workers and in the main process) with
``split_by_node``; every sample comes out as ``(key, "rank/worker")`` so the test can see which
reader read it. OUT gets ``{"before", "state"}`` or ``{"rest", "next"}`` (lists of pairs).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import wds_cloud as wds

BATCH = 8


def with_reader(sample: tuple[bytes]) -> tuple[str, str]:
    """``(key, "rank/worker")`` of a ``(txt,)`` sample, inside a DataLoader worker."""
    import torch.utils.data

    from wds_cloud.core.shards import node_info

    info = torch.utils.data.get_worker_info()
    worker = info.id if info is not None else 0
    return sample[0].decode(), f"{node_info()[0]}/{worker}"


def make(urls: list[str], workers: int) -> Any:
    """The loader every rank builds (the same for saving and resuming)."""
    return wds.make_loader(
        urls,
        batch_size=BATCH,
        num_workers=workers,
        shuffle_buffer=10,
        seed=17,
        to_tuple=("txt",),
        map=with_reader,
        collate=list,
        nodesplitter=wds.split_by_node,
    )


def make_windows(urls: list[str], workers: int, window: int, buffer: int) -> Any:
    """A ``WebLoader`` whose dataset has ``with_epoch(window)``: each worker yields ``window``
    batches of 4 per ``iter()`` (a window per worker)."""
    ds = wds.WebDataset(urls, shardshuffle=True, seed=17, nodesplitter=wds.split_by_node)
    ds = ds.shuffle(buffer).to_tuple("txt").map(with_reader).batched(4, collation_fn=list)
    return wds.WebLoader(ds.with_epoch(window), num_workers=workers, batch_size=None)


def make_mix(urls: list[str], workers: int) -> Any:
    """A ``RandomMix`` of two datasets (the first 10 shards and the others) read by each
    DataLoader worker; shuffled and batched by 8 in the main process."""
    sets = [
        wds.WebDataset(part, shardshuffle=True, seed=i, nodesplitter=wds.split_by_node)
        .to_tuple("txt")
        .map(with_reader)
        for i, part in enumerate((urls[:10], urls[10:]))
    ]
    mix = wds.RandomMix(sets, [0.6, 0.4], longest=True, seed=5)
    loader = wds.WebLoader(wds.DataPipeline(mix), num_workers=workers, batch_size=None)
    return loader.shuffle(7).batched(BATCH, collation_fn=list)


def run_rank(cfg: dict[str, Any]) -> None:
    """One rank (in a forked process)."""
    if cfg["init"] is None:
        os.environ.update(RANK=str(cfg["rank"]), WORLD_SIZE=str(cfg["world"]))
    else:
        import torch.distributed as dist

        dist.init_process_group(
            "gloo", init_method=cfg["init"], rank=cfg["rank"], world_size=cfg["world"]
        )
    if cfg.get("mix"):
        loader = make_mix(cfg["urls"], cfg["workers"])
    elif cfg.get("window"):
        loader = make_windows(cfg["urls"], cfg["workers"], cfg["window"], cfg["buffer"])
    else:
        loader = make(cfg["urls"], cfg["workers"])
    if cfg.get("state") is not None:
        loader.load_state_dict(cfg["state"])
    result: dict[str, Any] = {}

    def passes() -> Any:
        """What the training loop iterates: the loader, or ReadAhead over it."""
        if not cfg.get("ahead"):
            return loader
        from wds_cloud.pytorch.builder import ReadAhead

        return ReadAhead(loader, lambda batch: batch)

    if cfg.get("stop") is not None:
        before: list[list[str]] = []
        it = passes()
        for step, batch in enumerate(it, 1):
            before.extend(list(pair) for pair in batch)
            if step == cfg["stop"]:
                break
        result = {
            "before": before,
            "state": it.state() if it is not loader else loader.state_dict(),
        }
    else:
        result["rest"] = [list(pair) for batch in passes() for pair in batch]
        result["next"] = [list(pair) for batch in passes() for pair in batch]
    with open(cfg["out"], "w") as f:
        json.dump(result, f)
    if cfg["init"] is not None:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()


def main() -> None:
    import multiprocessing

    import torch.distributed  # noqa: F401  (imported once, before the fork)

    configs = []
    for path in sys.argv[1:]:
        with open(path) as f:
            configs.append(json.load(f))
    fork = multiprocessing.get_context("fork")
    procs = [fork.Process(target=run_rank, args=(cfg,)) for cfg in configs]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    failed = [(cfg["rank"], proc.exitcode) for cfg, proc in zip(configs, procs, strict=True)]
    failed = [(rank, code) for rank, code in failed if code != 0]
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    if failed:
        sys.exit(f"ranks failed (rank, exit code): {failed}")


if __name__ == "__main__":
    main()
