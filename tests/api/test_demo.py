"""The README's first command runs the demo job: it must write, read back and report."""

from __future__ import annotations

import os
import subprocess
import sys

from wds_cloud.cli.demo import run_demo
from wds_cloud.core.shardopen import tarfile_samples


def test_demo_writes_shards_and_reads_every_sample_back(tmp_path: object) -> None:
    directory = os.path.join(str(tmp_path), "demo")
    result = run_demo(directory, samples=120, per_shard=50, batch_size=16)
    assert [os.path.basename(s) for s in result.shards] == [
        "demo-0000.tar",
        "demo-0001.tar",
        "demo-0002.tar",
    ]
    assert result.samples_read == 120 and result.batches == 8  # 7 full batches + 1 partial
    keys = [s["__key__"] for s in tarfile_samples(result.shards)]
    assert keys == [f"sample{i:06d}" for i in range(120)]
    again = run_demo(directory, samples=120, per_shard=50, batch_size=16)  # reuses the shards
    assert again.shards == result.shards and again.samples_read == 120


def test_demo_command_line_prints_throughput(tmp_path: object) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "wds_cloud.cli", "demo", "--dir", str(tmp_path), "--samples", "60"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "wrote 60 samples in 1 shards" in out and "samples/s" in out
