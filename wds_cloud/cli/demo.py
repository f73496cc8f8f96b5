"""The quick-start job: write a small synthetic image dataset as shards, stream it back.

``wds-cloud demo`` (or ``python -m wds_cloud.cli demo``) writes ``--samples`` 64x64 JPEG images
with a class label and a JSON record into tar shards under ``--dir``, then reads them back the
way a training job would (shard shuffle, sample shuffle buffer, RGB decode, batches) and prints
the read throughput. It needs only the core dependencies (torch is not required).
"""

from __future__ import annotations

import argparse
import io
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class DemoResult:
    """What the demo wrote and read."""

    shards: list[str]
    samples_written: int
    samples_read: int
    batches: int
    seconds: float

    @property
    def samples_per_second(self) -> float:
        """Read throughput, decode included."""
        return self.samples_read / self.seconds if self.seconds > 0 else 0.0


def write_dataset(directory: str, samples: int, per_shard: int, seed: int = 0) -> list[str]:
    """Write ``samples`` synthetic image samples into shards; return their paths."""
    import numpy as np
    from PIL import Image

    from wds_cloud.writing.shardwriter import ShardWriter

    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    gradient = np.linspace(0, 255, 64, dtype=np.float32)
    with ShardWriter(os.path.join(directory, "demo-%04d.tar"), maxcount=per_shard) as sink:
        for i in range(samples):
            label = i % 10
            noise = rng.integers(0, 64, size=(64, 64, 3), dtype=np.uint8)
            brightness = gradient[None, :, None] * (label + 1) / 10
            image = np.clip(noise + brightness, 0, 255).astype(np.uint8)
            buf = io.BytesIO()
            Image.fromarray(image).save(buf, format="JPEG", quality=90)
            sink.write(
                {
                    "__key__": f"sample{i:06d}",
                    "jpg": buf.getvalue(),
                    "cls": label,
                    "json": {"index": i, "label": label},
                }
            )
    return list(sink.shards)  # complete only once the writer has closed the last shard


def read_dataset(shards: Sequence[str], batch_size: int, seed: int = 0) -> tuple[int, int]:
    """Stream the shards shuffled, decoded and batched; return (samples, batches)."""
    from wds_cloud.core.compat import WebDataset

    dataset = (
        WebDataset(list(shards), shardshuffle=True, seed=seed)
        .shuffle(1000)
        .decode("rgb8")
        .to_tuple("jpg", "cls")
        .batched(batch_size, partial=True)
    )
    samples = batches = 0
    for images, labels in dataset:
        samples += len(labels)
        batches += 1
        assert images.shape[1:] == (64, 64, 3)
    return samples, batches


def run_demo(
    directory: str = "wds_cloud_demo",
    samples: int = 2000,
    per_shard: int = 250,
    batch_size: int = 64,
) -> DemoResult:
    """Write the demo dataset (reusing it when present) and time reading it back."""
    shards = sorted(
        os.path.join(directory, name)
        for name in (os.listdir(directory) if os.path.isdir(directory) else [])
        if name.startswith("demo-") and name.endswith(".tar")
    )
    expected = (samples + per_shard - 1) // per_shard
    if len(shards) != expected:
        for path in shards:
            os.remove(path)
        shards = write_dataset(directory, samples, per_shard)
    start = time.perf_counter()
    read, batches = read_dataset(shards, batch_size)
    seconds = time.perf_counter() - start
    return DemoResult(shards, samples, read, batches, seconds)


def cmd_demo(args: argparse.Namespace) -> int:
    """``wds-cloud demo``: run the demo and print what it did."""
    if os.path.exists(args.dir) and not os.path.isdir(args.dir):
        from wds_cloud.errors import ConfigError

        raise ConfigError(f"--dir {args.dir!r} exists and is not a directory")
    result = run_demo(args.dir, args.samples, args.per_shard, args.batch_size)
    print(
        f"wrote {result.samples_written} samples in {len(result.shards)} shards under {args.dir}/"
    )
    print(
        f"read {result.samples_read} samples in {result.batches} batches "
        f"(shuffled, RGB-decoded) in {result.seconds:.2f} s: "
        f"{result.samples_per_second:,.0f} samples/s"
    )
    return 0 if result.samples_read == result.samples_written else 1


def register(sub: Any) -> None:
    """Add ``demo`` to the ``wds-cloud`` subcommands ``sub``."""
    from wds_cloud.cli.misc import positive_int as _positive

    parser = sub.add_parser(
        "demo",
        help="write a small synthetic dataset and stream it back (see demo --help)",
        description=__doc__,
    )
    parser.add_argument("--dir", default="wds_cloud_demo", help="where to write the shards")
    parser.add_argument("--samples", type=_positive, default=2000)
    parser.add_argument("--per-shard", type=_positive, default=250)
    parser.add_argument("--batch-size", type=_positive, default=64)
    parser.set_defaults(func=cmd_demo)
