"""SageMaker training entry point that reads a WebDataset channel in File, FastFile or Pipe mode.

The same script runs unchanged in all three input modes: ``sagemaker_dataset`` looks at
``/opt/ml/input/config/inputdataconfig.json`` and either lists the channel's shards (File,
FastFile; split across hosts) or reads the epoch's FIFO ``/opt/ml/input/data/<channel>_<epoch>``
(Pipe). Samples hold ``input.bin`` (8 bytes -> 8 features) and ``cls`` (0 or 1).

SageMaker passes hyperparameters as ``--name value`` arguments::

    python train.py --epochs 2 --batch-size 16

Each epoch prints one JSON line ``{"epoch": e, "samples": n, "keys": k, "resumed_from": r,
"loss": l}`` (``samples`` counts the whole epoch, ``keys`` the distinct keys this process saw,
``resumed_from`` the samples of the epoch delivered before a restart).

Spot training (File and FastFile mode): every ``--checkpoint-every`` steps and at the end of
each epoch the model, the optimizer and the loader's position (``loader.state_dict()``) are
saved together in ``<checkpoint dir>/checkpoint.pt``, written to a temporary file and renamed,
so a kill at any moment leaves the previous checkpoint or the new one, never half of one. The
checkpoint directory is ``--checkpoint-dir``, by default ``<root>/checkpoints`` where the root
is that of ``SageMakerEnv`` (``/opt/ml``, or ``$WDS_CLOUD_SM_ROOT``): ``/opt/ml/checkpoints`` is
the ``checkpoint_local_path`` SageMaker syncs with ``checkpoint_s3_uri`` and restores on a
restart. A restarted job loads the checkpoint and continues the epoch where it was saved:
every sample of the epoch is delivered once (those after the checkpoint are read again, as
the model trained on them was lost). Pipe mode (a FIFO cannot be read again) and several
hosts reading without ``torch.distributed`` cannot be resumed mid-epoch: no checkpoint then.

With ``WDS_CLOUD_EXAMPLE_KEY_LOG=FILE`` each delivered sample appends ``pid epoch step key`` to
FILE (the tests use it to check exactly-once delivery across kills). With
``WDS_CLOUD_EXAMPLE_HOLD_AT=EPOCH:STEP`` the script stops after that step (and its checkpoint,
if one is due) and waits to be killed, so a test's SIGKILL lands at a known point whatever the
machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np
import torch

import wds_cloud as wds
from wds_cloud.sagemaker import SageMakerEnv, channel_shards, sagemaker_dataset

CHECKPOINT = "checkpoint.pt"


def to_example(sample: dict[str, Any]) -> tuple[np.ndarray, int, str]:
    features = np.frombuffer(sample["input.bin"][:8], dtype=np.uint8).astype(np.float32) / 255
    return features, int(sample["cls"]), sample["__key__"]


def collate(
    batch: list[tuple[np.ndarray, int, str]],
) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    xs, ys, keys = zip(*batch, strict=True)
    return torch.from_numpy(np.stack(xs)), torch.tensor(ys), list(keys)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = SageMakerEnv()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--channel", default="train")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader workers (Pipe: 0/1)")
    parser.add_argument("--shuffle", type=int, default=64, help="sample shuffle buffer")
    parser.add_argument("--model-dir", default=env.model_dir)
    parser.add_argument(
        "--checkpoint-dir",
        default=os.path.join(env.root, "checkpoints"),
        help="model + loader state for spot restarts (default <root>/checkpoints)",
    )
    parser.add_argument(
        "--checkpoint-every", type=int, default=50, help="steps between checkpoints (0: off)"
    )
    return parser.parse_args(argv)


def save_checkpoint(directory: str, state: dict[str, Any]) -> None:
    """Write ``state`` to ``directory/checkpoint.pt`` atomically (temporary file + rename)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, CHECKPOINT)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(directory: str) -> dict[str, Any] | None:
    """The checkpoint in ``directory``, or None when there is none.

    A run killed while writing one leaves its temporary file: removed here, so that it is
    neither synced to S3 nor mistaken for a checkpoint.
    """
    path = os.path.join(directory, CHECKPOINT)
    for name in os.listdir(directory) if os.path.isdir(directory) else []:
        if name.startswith(f"{CHECKPOINT}.tmp-"):
            os.remove(os.path.join(directory, name))
    if not os.path.exists(path):
        return None
    return torch.load(path, weights_only=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.manual_seed(0)
    source = channel_shards(args.channel)
    # File and FastFile channels resume mid-epoch on one host, or on several under
    # torch.distributed (state_dict() then gathers every host's position). A Pipe-mode FIFO
    # cannot be read again; hosts without a process group would each save only their own part.
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    resumable = not source.is_pipe and (source.world_size == 1 or distributed)
    split: dict[str, Any] = {"seed": 17} if resumable else {}
    if not resumable:
        print("input not resumable mid-epoch here: no checkpoints", file=sys.stderr)
    dataset = (
        sagemaker_dataset(source, shardshuffle=True, **split)
        .shuffle(args.shuffle)
        .map(to_example)
        .batched(args.batch_size, collation_fn=collate)
    )
    # Workers are not persistent, so each epoch's copy of the dataset carries set_epoch's value.
    loader = wds.WebLoader(dataset, batch_size=None, num_workers=args.workers)
    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    every = args.checkpoint_every if resumable else 0
    saved = load_checkpoint(args.checkpoint_dir) if resumable else None
    start_epoch, step, samples = 0, 0, 0
    if saved is not None:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        start_epoch, step, samples = saved["epoch"], saved["step"], saved["samples"]
        resumed = {"epoch": start_epoch, "step": step, "samples": samples}
        print(json.dumps({"resumed": resumed}), flush=True)
    key_log = os.environ.get("WDS_CLOUD_EXAMPLE_KEY_LOG")
    log = open(key_log, "a") if key_log else None
    hold_at = os.environ.get("WDS_CLOUD_EXAMPLE_HOLD_AT")
    hold = tuple(int(x) for x in hold_at.split(":")) if hold_at else None

    def checkpoint(epoch: int, step: int, samples: int, position: dict[str, Any] | None) -> None:
        state = {
            "epoch": epoch,
            "step": step,
            "samples": samples,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "loader": position,
        }
        save_checkpoint(args.checkpoint_dir, state)

    for epoch in range(start_epoch, args.epochs):
        dataset.set_epoch(epoch)  # File: new shard order; Pipe: read <channel>_<epoch>
        if epoch == start_epoch and saved is not None and saved["loader"] is not None:
            loader.load_state_dict(saved["loader"])  # the rest of this epoch, once each
        else:
            step, samples = 0, 0
        resumed_from = samples
        seen: set[str] = set()
        loss_sum, steps = 0.0, 0
        for x, y, keys in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            step += 1
            samples += len(keys)
            seen.update(keys)
            loss_sum += float(loss.detach())
            steps += 1
            if log is not None:
                log.write("".join(f"{os.getpid()} {epoch} {step} {k}\n" for k in keys))
                log.flush()
            if every and step % every == 0:
                checkpoint(epoch, step, samples, loader.state_dict())
            if hold == (epoch, step):
                while True:  # a test kills the run here
                    time.sleep(1)
        if every:  # the epoch is done: a restart begins the next one
            checkpoint(epoch + 1, 0, 0, None)
        loss_mean = round(loss_sum / max(steps, 1), 4)
        report = {
            "epoch": epoch,
            "samples": samples,
            "keys": len(seen),
            "resumed_from": resumed_from,
            "loss": loss_mean,
        }
        print(json.dumps(report), flush=True)
    if log is not None:
        log.close()
    os.makedirs(args.model_dir, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(args.model_dir, "model.pt"))


if __name__ == "__main__":
    main()
