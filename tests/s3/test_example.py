"""``examples/s3_train.py`` runs as written against the SeaweedFS server."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.s3.conftest import ACCESS_KEY, REGION, SECRET_KEY

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")

pytestmark = [pytest.mark.s3, pytest.mark.slow]


def test_s3_train_example_writes_then_trains(s3_endpoint: str, bucket: str) -> None:
    env = dict(
        os.environ,
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_REGION=REGION,
    )
    out = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, "s3_train.py"), "--endpoint", s3_endpoint,
         "--bucket", bucket, "--write", "--epochs", "2"],
        capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "4 shards, 512 samples in 2 epochs" in out.stdout
