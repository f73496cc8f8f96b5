"""One ``pipe:`` gate for reads and writes: with ``WDS_CLOUD_ALLOW_PIPE=0`` or ``WDS_SECURE=1``
no library entry point runs a command (each would ``touch`` its own marker file).

The checks run in a fresh interpreter per environment, because the default registry builds its
``pipe:`` opener (and reads the environment) once per process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wds_cloud.errors import ConfigError
from wds_cloud.openers.pipe import PipeOpener
from wds_cloud.openers.registry import OpenerRegistry
from wds_cloud.writing.shardwriter import ShardWriter
from wds_cloud.writing.tarwriter import TarWriter
from wds_cloud.writing.upload import upload_shards

ENTRY_POINTS = """
import json, os, sys
import wds_cloud as wds
from wds_cloud.errors import ConfigError

markers, src = sys.argv[1], sys.argv[2]

def cmd(name):
    return f"pipe:touch {markers}/{name}; cat >/dev/null #"

def tarwriter():
    with wds.TarWriter(cmd("tarwriter")) as w:
        w.write({"__key__": "a", "txt": "x"})

def shardwriter():
    with wds.ShardWriter(cmd("shardwriter") + "%d") as w:
        w.write({"__key__": "a", "txt": "x"})

def upload():
    wds.upload_shards([src], cmd("upload"), progress=False)

def read():
    list(wds.WebDataset(f"pipe:touch {markers}/read; cat {src}", shardshuffle=False))

outcome = {}
for run in (tarwriter, shardwriter, upload, read):
    try:
        run()
        outcome[run.__name__] = "ran"
    except ConfigError as exc:
        outcome[run.__name__] = "refused" if "pipe: URLs are disabled" in str(exc) else str(exc)
print(json.dumps(outcome))
"""

NAMES = ["read", "shardwriter", "tarwriter", "upload"]


def _shard(path: Path) -> Path:
    with TarWriter(str(path)) as writer:
        writer.write({"__key__": "k", "txt": "hello"})
    return path


def _run_entry_points(tmp_path: Path, env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    markers = tmp_path / "markers"
    markers.mkdir()
    src = _shard(tmp_path / "src.tar")
    clean = {k: v for k, v in os.environ.items() if k not in ("WDS_CLOUD_ALLOW_PIPE", "WDS_SECURE")}
    out = subprocess.run(
        [sys.executable, "-c", ENTRY_POINTS, str(markers), str(src)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1]), sorted(os.listdir(markers))


@pytest.mark.parametrize("env", [{"WDS_CLOUD_ALLOW_PIPE": "0"}, {"WDS_SECURE": "1"}])
def test_switched_off_pipe_runs_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    outcome, markers = _run_entry_points(tmp_path, env)
    assert outcome == dict.fromkeys(NAMES, "refused")
    assert markers == [], "a disabled pipe: command ran"


def test_allowed_pipe_runs_every_entry_point(tmp_path: Path) -> None:
    # the control: the same entry points do run their commands when pipe: is allowed
    outcome, markers = _run_entry_points(tmp_path, {})
    assert outcome == dict.fromkeys(NAMES, "ran")
    assert markers == NAMES


def test_registry_gate_applies_to_writers(tmp_path: Path) -> None:
    registry = OpenerRegistry()
    registry.register("pipe", PipeOpener(allow=False), override=True)
    marker = tmp_path / "ran"
    url = f"pipe:touch {marker}; cat >/dev/null #"
    with pytest.raises(ConfigError, match="pipe: URLs are disabled"):
        TarWriter(url, registry=registry)
    writer = ShardWriter(url + "%d", registry=registry)
    with pytest.raises(ConfigError, match="pipe: URLs are disabled"):
        writer.write({"__key__": "a", "txt": "x"})
    with pytest.raises(ConfigError, match="pipe: URLs are disabled"):
        upload_shards([_shard(tmp_path / "s.tar")], url, progress=False, registry=registry)
    assert not marker.exists()
