"""``benchmarks/webdataset_suite.py`` offline: stand-in test data, test classification, and a
tiny suite run against both libraries through the alias (no network needed)."""

from __future__ import annotations

import io
import json
import sys
import tarfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import webdataset_suite as suite  # noqa: E402


def test_standins_have_what_the_tests_check(tmp_path: Path) -> None:
    suite.write_imagenet_standin(tmp_path / "i.tgz")
    with tarfile.open(tmp_path / "i.tgz") as tf:
        names = tf.getnames()
        first_png = tf.extractfile(sorted(n for n in names if n.endswith(".png"))[0])
        assert first_png is not None
        image = np.asarray(Image.open(io.BytesIO(first_png.read())))
    assert len(names) == 47 * 4 and image.shape == (793, 600, 3)
    assert {n.rsplit(".", 1)[1] for n in names} == {"cls", "png", "wnid", "xml"}
    suite.write_tendata_standin(tmp_path / "t.tar")
    import webdataset

    arrays = [
        s["ten"]
        for s in webdataset.WebDataset(str(tmp_path / "t.tar"), shardshuffle=False).decode()
    ]
    assert len(arrays) == 100 and all(
        a.shape == (28, 28) and a.dtype == np.float64 for x in arrays for a in x
    )


def _fake_source(root: Path) -> Path:
    tests = root / "tests"
    tests.mkdir(parents=True)
    (tests / "test_a.py").write_text(
        textwrap.dedent(
            """
            import webdataset as wds
            from tests.conftest import local_data, remote_loc

            def test_names():
                assert callable(wds.WebDataset) and callable(wds.gopen)

            def test_count():
                assert sum(1 for _ in wds.WebDataset(local_data, shardshuffle=False)) == 47

            def test_remote():
                wds.WebDataset(remote_loc)

            def test_only_webdataset_has_this():
                assert wds.__name__ == "webdataset"

            class TestX:
                def test_in_class(self):
                    assert wds.utils.enforce_security is False
            """
        )
    )
    (tests / "test_b.py").write_text(
        "from webdataset.filters import _shuffle\n\n\n"
        "def test_private():\n"
        "    assert list(_shuffle(iter([1]), bufsize=2)) == [1]\n"
    )
    return root


@pytest.mark.slow
def test_classify_and_run_both_libraries(tmp_path: Path) -> None:
    source = _fake_source(tmp_path / "src")
    out = tmp_path / "result.json"
    assert (
        suite.main(["--source", str(source), "--work", str(tmp_path / "w"), "--json", str(out)])
        == 0
    )
    result = json.loads(out.read_text())
    assert result["internet"] == ["tests/test_a.py::test_remote"]
    # webdataset.filters._shuffle works through the alias (docs/pipeline.md, private names)
    assert result["private"] == {"tests/test_b.py::test_private": True}
    assert result["private_runnable"] == result["private_passing"] == ["tests/test_b.py::test_private"]  # fmt: skip
    assert set(result["runnable"]) == {
        "tests/test_a.py::test_names",
        "tests/test_a.py::test_count",
        "tests/test_a.py::test_only_webdataset_has_this",
        "tests/test_a.py::TestX::test_in_class",
    }
    assert list(result["failing"]) == ["tests/test_a.py::test_only_webdataset_has_this"]
    assert result["share_percent"] == 75.0
    assert result["all_share_percent"] == 80.0  # the private-name test counts too
