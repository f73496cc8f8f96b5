"""Each ETL folder's pod.yaml drives a real SDK ``init(image=...)`` against the emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.emulators.ais.server import AisEmulator
from tests.etl.conftest import ROOT, tar_bytes
from wds_cloud.core.compat import WebDataset
from wds_cloud.openers.registry import OpenerRegistry

pytestmark = pytest.mark.ais


@pytest.mark.parametrize(
    ("folder", "fixture"), [("wds_transform", "resize_etl_url"), ("pets", "pets_etl_url")]
)
def test_pod_yaml_init_image(
    folder: str,
    fixture: str,
    ais_emulator: AisEmulator,
    ais_client: Any,
    registry: OpenerRegistry,
    request: pytest.FixtureRequest,
) -> None:
    from etl.deploy import deploy_image

    spec = yaml.safe_load((ROOT / "etl" / folder / "pod.yaml").read_text())
    assert spec["communication"] == "hpush://"
    assert spec["runtime"]["command"][:3] == ["python", "-m", f"etl.{folder}.server"]
    assert Path(ROOT / "etl" / folder / "Dockerfile").read_text().count(f"etl.{folder}.server") == 1
    ais_emulator.register_etl_image(spec["runtime"]["image"], request.getfixturevalue(fixture))
    deploy_image(ais_client, spec["name"], spec["runtime"]["image"])
    info = ais_client.etl(spec["name"]).view()
    assert info.init_msg.name == spec["name"]
    ais_emulator.store.create_bucket("b")
    ais_emulator.store.put_object("b", "s.tar", tar_bytes([("k.cls", b"3"), ("k.txt", b"hi")]))
    got = list(WebDataset(["ais://b/s.tar"], registry=registry, etl=spec["name"]))
    assert [(s["cls"], s["txt"]) for s in got] == [(b"3", b"hi")]
