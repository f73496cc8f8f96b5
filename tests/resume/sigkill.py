"""Run ``train_loop.py`` and kill it (and its DataLoader workers) with SIGKILL at given steps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("train_loop.py")


def run_until_step(
    cmd: Sequence[str], env: dict[str, str], kill: int | None, stderr: Any = subprocess.PIPE
) -> tuple[int, bool, str]:
    """Run ``cmd`` in a process group of its own; SIGKILL the group (the loop, its ranks and
    its DataLoader workers) once it prints ``step <kill>``. Returns (exit status, whether it
    was killed, its stderr when ``stderr`` is a pipe)."""
    proc = subprocess.Popen(
        list(cmd),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=env,
        start_new_session=True,  # its own process group: the workers die with it
    )
    assert proc.stdout is not None
    killed = False
    for line in proc.stdout:
        if kill is not None and line.strip() == f"step {kill}":
            os.killpg(proc.pid, signal.SIGKILL)
            killed = True
            break
    proc.wait(timeout=120)
    proc.stdout.close()
    err = ""
    if proc.stderr is not None:
        err = proc.stderr.read() if not killed else ""
        proc.stderr.close()
    return proc.returncode, killed, err


def run_killed(
    urls: Sequence[str], tmp: Path, kill_at: Sequence[int], env: dict[str, str]
) -> list[str]:
    """Start the loop, SIGKILL it at each step of ``kill_at`` (counted from its restart), then
    let the last run finish; return the keys of the log."""
    ckpt, log = tmp / "ckpt.json", tmp / "delivered.log"
    full_env = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
    for kill in [*kill_at, None]:
        code, killed, err = run_until_step(
            [sys.executable, str(SCRIPT), json.dumps(list(urls)), str(ckpt), str(log)],
            full_env,
            kill,
        )
        if kill is None or not killed:
            assert code == 0, err
    return log.read_text().split()
