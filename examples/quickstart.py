"""Quick start on local disk: write image shards, train a tiny model from them.

Run::

    python examples/quickstart.py --dir /tmp/wds_quickstart

Needs torch. Writes 512 synthetic 32x32 images (10 classes) into 4 shards, then trains a
linear classifier for 2 epochs with ``make_loader`` (2 workers, exact epoch size).
"""

from __future__ import annotations

import argparse
import io
import os

import numpy as np
import torch
from PIL import Image

import wds_cloud as wds
from wds_cloud.pytorch.builder import make_loader


def write_shards(directory: str, samples: int = 512) -> list[str]:
    """Write synthetic class-coloured images as ``jpg``/``cls`` samples."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(0)
    with wds.ShardWriter(os.path.join(directory, "train-%04d.tar"), maxcount=128) as sink:
        for i in range(samples):
            label = i % 10
            pixels = rng.integers(0, 40, (32, 32, 3), dtype=np.uint8) + label * 20
            buf = io.BytesIO()
            Image.fromarray(pixels.astype(np.uint8)).save(buf, format="JPEG")
            sink.write({"__key__": f"{i:06d}", "jpg": buf.getvalue(), "cls": label})
    return list(sink.shards)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default="/tmp/wds_quickstart")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    shards = write_shards(args.dir)
    loader = make_loader(
        shards,
        batch_size=32,
        num_workers=2,
        decode="torchrgb",
        to_tuple="jpg cls",
        epoch_size=512,
    )
    model = torch.nn.Linear(3 * 32 * 32, 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        seen, total_loss = 0, 0.0
        for images, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(images.flatten(1)), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            seen += len(labels)
            total_loss += loss.item() * len(labels)
        print(f"epoch {epoch}: {seen} samples, mean loss {total_loss / seen:.3f}")


if __name__ == "__main__":
    main()
