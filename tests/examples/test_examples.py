"""Run the examples that need no external service, as users would (subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

import wds_cloud as wds

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=240, check=False
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.slow
def test_quickstart(tmp_path: Path) -> None:
    stdout = _run(str(EXAMPLES / "quickstart.py"), "--dir", str(tmp_path), "--epochs", "2")
    lines = [line for line in stdout.splitlines() if line.startswith("epoch")]
    assert len(lines) == 2 and all("512 samples" in line for line in lines)
    assert len(list(tmp_path.glob("train-*.tar"))) == 4


def test_convert_dataset(tmp_path: Path) -> None:
    root = tmp_path / "images"
    for name, colour in (("cat", "red"), ("dog", "blue")):
        (root / name).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (8, 8), colour).save(root / name / f"{name}.{i}.png")
        (root / name / "notes.txt").write_text("not an image")
    classes = tmp_path / "classes.txt"
    classes.write_text("dog\ncat\n")
    out = tmp_path / "shards"
    stdout = _run(
        str(EXAMPLES / "convert_dataset.py"),
        str(root),
        str(out),
        "--maxcount",
        "4",
        "--classes",
        str(classes),
    )
    assert "wrote 2 shards" in stdout
    samples = list(wds.WebDataset(str(out) + "/", shardshuffle=False).decode("rgb8"))
    assert len(samples) == 6
    assert [s["__key__"] for s in samples[:2]] == ["dog/dog_0", "dog/dog_1"]
    assert samples[0]["cls"] == 0 and samples[3]["cls"] == 1  # indices from --classes
    assert samples[3]["json"] == {"class": "cat", "file": "cat/cat.0.png"}
    assert samples[3]["png"][0, 0].tolist() == [255, 0, 0]
