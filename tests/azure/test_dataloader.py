"""An AzureOpener travels into DataLoader workers started with spawn (its clients are made
again in each worker, never pickled)."""

from __future__ import annotations

from typing import Any

import pytest

import wds_cloud as wds
from tests.azure.conftest import azure_opener
from tests.support import tarbuild
from tests.support.azurite import AzuriteServer
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = [pytest.mark.azure, pytest.mark.slow]


def test_two_spawned_workers_read_every_sample_once(azurite: AzuriteServer, container: Any) -> None:
    import torch.utils.data as torch_data

    keys = []
    for s in range(4):
        members = [(f"s{s}-{i:03d}.bin", bytes([i]) * 3000) for i in range(10)]
        keys += [f"s{s}-{i:03d}" for i in range(10)]
        container.upload_blob(f"dl/{s}.tar", tarbuild.tar_bytes(members))
    registry = OpenerRegistry()
    opener = azure_opener(azurite)
    registry.register("az", opener, override=True)
    urls = [f"az://{container.container_name}/dl/{s}.tar" for s in range(4)]
    with opener.open(urls[0]) as stream:  # the parent has live clients now
        stream.read(10)
    dataset = wds.WebDataset(urls, shardshuffle=False, registry=registry)
    loader = torch_data.DataLoader(
        dataset, num_workers=2, batch_size=None, multiprocessing_context="spawn"
    )
    got = [sample["__key__"] for sample in loader]
    assert sorted(got) == sorted(keys)
