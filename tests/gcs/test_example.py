"""``examples/gcs_train.py`` runs as written against fake-gcs-server."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from tests.support.fake_gcs import FakeGcsServer

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")

pytestmark = [pytest.mark.gcs, pytest.mark.slow]


def test_gcs_train_example_writes_then_trains(fake_gcs: FakeGcsServer, bucket: Any) -> None:
    env = dict(os.environ, GOOGLE_CLOUD_PROJECT="test")
    out = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, "gcs_train.py"), "--endpoint", fake_gcs.endpoint,
         "--bucket", bucket.name, "--write", "--epochs", "2"],
        capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "4 shards, 512 samples in 2 epochs" in out.stdout
