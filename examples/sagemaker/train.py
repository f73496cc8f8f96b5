"""SageMaker training entry point that reads a WebDataset channel in File, FastFile or Pipe mode.

The same script runs unchanged in all three input modes: ``sagemaker_dataset`` looks at
``/opt/ml/input/config/inputdataconfig.json`` and either lists the channel's shards (File,
FastFile; split across hosts) or reads the epoch's FIFO ``/opt/ml/input/data/<channel>_<epoch>``
(Pipe). Samples hold ``input.bin`` (8 bytes -> 8 features) and ``cls`` (0 or 1).

SageMaker passes hyperparameters as ``--name value`` arguments::

    python train.py --epochs 2 --batch-size 16

Each epoch prints one JSON line ``{"epoch": e, "samples": n, "keys": k, "loss": l}``.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import numpy as np
import torch

import wds_cloud as wds
from wds_cloud.sagemaker import SageMakerEnv, sagemaker_dataset


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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.manual_seed(0)
    dataset = (
        sagemaker_dataset(args.channel, shardshuffle=True)
        .shuffle(args.shuffle)
        .map(to_example)
        .batched(args.batch_size, collation_fn=collate)
    )
    # Workers are not persistent, so each epoch's copy of the dataset carries set_epoch's value.
    loader = wds.WebLoader(dataset, batch_size=None, num_workers=args.workers)
    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        dataset.set_epoch(epoch)  # File: new shard order; Pipe: read <channel>_<epoch>
        seen: set[str] = set()
        samples, loss_sum, steps = 0, 0.0, 0
        for x, y, keys in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            samples += len(keys)
            seen.update(keys)
            loss_sum += float(loss)
            steps += 1
        loss_mean = round(loss_sum / max(steps, 1), 4)
        report = {"epoch": epoch, "samples": samples, "keys": len(seen), "loss": loss_mean}
        print(json.dumps(report), flush=True)
    os.makedirs(args.model_dir, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(args.model_dir, "model.pt"))


if __name__ == "__main__":
    main()
