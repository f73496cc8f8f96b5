"""``import wds_cloud`` (and the core decode/collate path) never imports torch."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(code: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_import_wds_cloud_does_not_import_torch() -> None:
    _run("import wds_cloud, sys; assert 'torch' not in sys.modules, 'torch imported'")


def test_core_decode_and_collate_do_not_import_torch() -> None:
    _run(
        "import sys, io, numpy as np, PIL.Image\n"
        "from wds_cloud.core.decode import decode, Decoder\n"
        "from wds_cloud.core.collate import default_collation_fn\n"
        "import wds_cloud.core.imagedecode, wds_cloud.core.tenbin, wds_cloud.core.compat\n"
        "b = io.BytesIO(); PIL.Image.new('RGB', (3, 2)).save(b, 'png')\n"
        "s = {'__key__': 'k', 'png': b.getvalue(), 'cls': b'1', 'json': b'[1]'}\n"
        "out = list(decode('rgb8')(iter([s, dict(s)])))\n"
        "batch = default_collation_fn(out)\n"
        "assert batch['png'].shape == (2, 2, 3, 3), batch['png'].shape\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )


def test_pytorch_package_imports_torch() -> None:
    pytest.importorskip("torch")
    _run(
        "import sys, wds_cloud.pytorch as wp, torch.utils.data as tud\n"
        "assert 'torch' in sys.modules\n"
        "assert issubclass(wp.WebDataset, tud.IterableDataset)\n"
        "assert issubclass(wp.DataPipeline, tud.IterableDataset)\n"
    )
