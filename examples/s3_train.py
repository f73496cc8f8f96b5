"""Train from shards in S3 (or any S3-compatible server such as SeaweedFS or MinIO).

Run against a local S3-compatible server::

    AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \\
    python examples/s3_train.py --endpoint http://127.0.0.1:8333 --bucket mybucket --write

``--write`` first streams 256 synthetic samples as shards to ``s3://BUCKET/PREFIX``;
without it the shards must already be there. The shards are listed with ``list_shards``
and read by ``make_loader`` with 2 workers. ``--endpoint`` sets ``AWS_ENDPOINT_URL`` for
this process and its workers; leave it out for AWS itself.
"""

from __future__ import annotations

import argparse
import os

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoint", help="S3 endpoint URL (default: AWS)")
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", default="wds-example/train")
    parser.add_argument("--write", action="store_true", help="write synthetic shards first")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    if args.endpoint:
        os.environ["AWS_ENDPOINT_URL"] = args.endpoint  # read when openers are created
    prefix = f"s3://{args.bucket}/{args.prefix}"
    if args.write:
        write_synthetic(prefix)
    train(prefix, args.epochs)


if __name__ == "__main__":
    main()
