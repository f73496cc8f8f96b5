"""Fixtures for the SageMaker tests: a fake ``/opt/ml`` tree, shards, and a Pipe-mode writer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from wds_cloud.writing.tarwriter import TarWriter

WRITER = str(Path(__file__).with_name("pipe_writer.py"))


def write_shards(
    directory: Path, nshards: int, per_shard: int, *, payload: int = 32, prefix: str = "shard"
) -> list[Path]:
    """Write ``nshards`` tar shards of ``per_shard`` samples (``input.bin`` + ``cls``)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(nshards):
        path = directory / f"{prefix}-{s:03d}.tar"
        with TarWriter(str(path)) as tw:
            for i in range(per_shard):
                key = f"{prefix}{s:03d}_{i:05d}"
                tw.write(
                    {
                        "__key__": key,
                        "input.bin": bytes([(s * 7 + i) % 256]) * payload,
                        "cls": str((s + i) % 2).encode(),
                    }
                )
        paths.append(path)
    return paths


def sample_keys(nshards: int, per_shard: int, prefix: str = "shard") -> list[str]:
    return [f"{prefix}{s:03d}_{i:05d}" for s in range(nshards) for i in range(per_shard)]


@dataclass
class FakeOptML:
    """A fake ``/opt/ml`` tree: config files and channel directories."""

    root: Path
    channels: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def data(self) -> Path:
        return self.root / "input" / "data"

    def write_config(self, hosts: list[str] | None = None, current: str | None = None) -> FakeOptML:
        config = self.root / "input" / "config"
        config.mkdir(parents=True, exist_ok=True)
        (config / "inputdataconfig.json").write_text(json.dumps(self.channels))
        if hosts is not None:
            resources = {"current_host": current, "hosts": hosts, "network_interface_name": "eth0"}
            (config / "resourceconfig.json").write_text(json.dumps(resources))
        return self

    def add_channel(
        self, name: str, mode: str = "File", distribution: str = "FullyReplicated"
    ) -> Path:
        self.channels[name] = {
            "ContentType": "application/x-tar",
            "TrainingInputMode": mode,
            "S3DistributionType": distribution,
            "RecordWrapperType": "None",
        }
        self.data.mkdir(parents=True, exist_ok=True)
        return self.data / name


@pytest.fixture
def optml(tmp_path: Path) -> FakeOptML:
    root = tmp_path / "opt" / "ml"
    root.mkdir(parents=True)
    return FakeOptML(root)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """``os.environ`` without SageMaker, torch-distributed and WDS_CLOUD_SM_* variables."""
    for name in list(os.environ):
        if name.startswith(("SM_", "WDS_CLOUD_SM_", "SAGEMAKER_")) or name in (
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "LOCAL_WORLD_SIZE",
            "WORKER",
            "NUM_WORKERS",
        ):
            monkeypatch.delenv(name)
    return dict(os.environ)


class PipeWriter:
    """A running ``pipe_writer.py`` process; stopped by PID at teardown if still alive."""

    def __init__(self, directory: Path, channel: str, epochs: int, shards: list[Path]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, WRITER, str(directory), channel, str(epochs), *map(str, shards)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def wait(self, timeout: float = 60) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def pipe_writer() -> Iterator[type[PipeWriter]]:
    started: list[PipeWriter] = []

    class _Writer(PipeWriter):
        def __init__(self, *args: object, **kw: object) -> None:
            super().__init__(*args, **kw)  # type: ignore[arg-type]
            started.append(self)

    yield _Writer
    for w in started:
        w.stop()
