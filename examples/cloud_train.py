"""The training loop shared by ``s3_train.py`` and ``gcs_train.py``: the same code, any URL.

``python examples/cloud_train.py --url s3://bucket/prefix --write`` works too; the backend is
chosen by the URL's scheme, configured by its usual environment variables.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

import numpy as np
import torch

import wds_cloud as wds
from wds_cloud.pytorch.builder import make_loader


def write_synthetic(prefix: str, samples: int = 256) -> list[str]:
    """Stream ``samples`` (``npy`` 16-float feature vector, ``cls``) as shards to ``prefix``."""
    rng = np.random.default_rng(0)
    with wds.ShardWriter(prefix.rstrip("/") + "/train-%04d.tar", maxcount=64) as sink:
        for i in range(samples):
            label = i % 4
            features = (rng.normal(size=16) + label).astype(np.float32)
            sink.write({"__key__": f"{i:06d}", "npy": features, "cls": label})
    return list(sink.shards)


def train(prefix: str, epochs: int = 2) -> int:
    """Train a linear model on the shards under ``prefix``; return samples seen."""
    shards = wds.list_shards(prefix.rstrip("/") + "/")
    loader = make_loader(shards, batch_size=32, num_workers=2, decode=(), to_tuple="npy cls")
    model = torch.nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    seen = 0
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for features, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += len(labels)
        print(f"epoch {epoch}: loss {loss.item():.3f}")
    print(f"{len(shards)} shards, {seen} samples in {epochs} epochs")
    return seen


def run(argv: Sequence[str] | None, *, scheme: str, endpoint_env: str, doc: str | None) -> None:
    """Parse ``--endpoint/--bucket/--prefix/--write/--epochs`` and train from ``scheme://``."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--endpoint", help=f"endpoint URL, exported as {endpoint_env}")
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", default="wds-example/train")
    parser.add_argument("--write", action="store_true", help="write synthetic shards first")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args(argv)
    if args.endpoint:
        os.environ[endpoint_env] = args.endpoint  # read when openers are created (and in workers)
    prefix = f"{scheme}://{args.bucket}/{args.prefix}"
    if args.write:
        write_synthetic(prefix)
    train(prefix, args.epochs)


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__)
    cli.add_argument("--url", required=True, help="shard prefix, e.g. s3://bucket/train")
    cli.add_argument("--write", action="store_true")
    cli.add_argument("--epochs", type=int, default=2)
    options = cli.parse_args()
    if options.write:
        write_synthetic(options.url)
    train(options.url, options.epochs)
