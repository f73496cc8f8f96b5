"""Run ``train_loop.py`` and kill it (and its DataLoader workers) with SIGKILL at given steps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("train_loop.py")


def run_killed(
    urls: Sequence[str],
    tmp: Path,
    kill_at: Sequence[int],
    env: dict[str, str],
    script: Path = SCRIPT,
) -> list[str]:
    """Start the loop (``script``, called as ``train_loop.py`` is), SIGKILL it at each step of
    ``kill_at`` (counted from its restart), then let the last run finish; return the keys of
    the log."""
    ckpt, log = tmp / "ckpt.json", tmp / "delivered.log"
    full_env = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
    for kill in [*kill_at, None]:
        proc = subprocess.Popen(
            [sys.executable, str(script), json.dumps(list(urls)), str(ckpt), str(log)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=full_env,
            start_new_session=True,  # its own process group: the workers die with it
        )
        assert proc.stdout is not None
        killed = False
        for line in proc.stdout:
            if kill is not None and line.strip() == f"step {kill}":
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
                break
        proc.wait(timeout=60)
        if kill is None or not killed:
            err = proc.stderr.read() if proc.stderr else ""
            assert proc.returncode == 0, err
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    return log.read_text().split()
