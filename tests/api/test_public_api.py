"""The curated public surface: sorted, complete, importable, and light to import."""

from __future__ import annotations

import subprocess
import sys

import pytest

import wds_cloud


def test_all_is_sorted_and_unique() -> None:
    assert wds_cloud.__all__ == sorted(set(wds_cloud.__all__))


@pytest.mark.parametrize("name", wds_cloud.__all__)
def test_every_exported_name_resolves(name: str) -> None:
    assert getattr(wds_cloud, name) is not None


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        wds_cloud.no_such_thing  # noqa: B018


def test_torch_aware_classes_are_iterable_datasets_when_torch_is_installed() -> None:
    from torch.utils.data import IterableDataset

    assert issubclass(wds_cloud.WebDataset, IterableDataset)
    assert issubclass(wds_cloud.DataPipeline, IterableDataset)


def run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_import_has_no_heavy_side_effects() -> None:
    code = (
        "import sys, wds_cloud\n"
        "heavy = [m for m in ('torch', 'numpy', 'boto3', 'google.cloud.storage', 'aistore', 'PIL',"
        " 'azure.storage.blob', 'azure.core')"
        " if m in sys.modules]\n"
        "print(heavy)"
    )
    assert run(code) == "[]"


def test_core_pipeline_runs_without_importing_torch(tmp_path: object) -> None:
    import os

    from tests.support.tarbuild import tar_bytes, write

    path = write(
        os.path.join(str(tmp_path), "a.tar"), tar_bytes([("a.txt", b"1"), ("b.txt", b"2")])
    )
    code = (
        "import sys\n"
        "from wds_cloud.core.compat import WebDataset\n"
        f"print(len(list(WebDataset({path!r}, shardshuffle=False).to_tuple('txt'))),"
        " 'torch' in sys.modules)"
    )
    assert run(code) == "2 False"


def test_import_rss_is_small() -> None:
    # VmHWM (peak RSS of this process image); ru_maxrss would carry pytest's peak across exec.
    code = (
        "import wds_cloud\n"
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"
    )
    assert int(run(code)) < 40 * 1024  # KiB: the bound for import without torch
