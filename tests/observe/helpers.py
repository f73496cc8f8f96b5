"""Stages with known costs for the profiling tests (module level: they pickle into workers)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

SLOW_A = 0.004
SLOW_B = 0.002


def _sleep(sample: Any, seconds: float, field: str) -> Any:
    start = time.perf_counter()
    time.sleep(seconds)
    sample[field] = time.perf_counter() - start  # the truth the profile is checked against
    return sample


def slow_a(sample: Any) -> Any:
    """A user stage that sleeps ``SLOW_A`` seconds a sample (``slept_a``: how long)."""
    return _sleep(sample, SLOW_A, "slept_a")


def slow_b(sample: Any) -> Any:
    """A user stage that sleeps ``SLOW_B`` seconds a sample (``slept_b``: how long)."""
    return _sleep(sample, SLOW_B, "slept_b")


def slow_decoder(key: str, data: bytes) -> Any:
    """A decode handler that takes 3 ms per ``txt`` field."""
    if key.endswith("txt"):
        time.sleep(0.003)
        return data.decode()
    return None


def assert_no_recorder(sample: Any) -> Any:
    """A user stage that fails where this process has made a profiling recorder."""
    from wds_cloud.observe.profile import recorders_created

    assert recorders_created() == 0, "a recorder was made with profiling off"
    return sample


def run_python(*args: str, path: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` from the repository root, with it (after ``path``) on ``PYTHONPATH``
    and ``env`` added to the environment."""
    pythonpath = os.pathsep.join(p for p in (path, str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": pythonpath, **env},
        cwd=ROOT,
        timeout=300,
        check=False,
    )
