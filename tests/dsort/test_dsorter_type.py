"""``dsorter_type``: AIStore 5.0 cannot choose one, so wds_cloud names one when a spec does not.

The emulator refuses a spec without ``dsorter_type`` the way AIStore 5.0 (v1.5.0) does (its
proxy's memory probe of the targets fails; ``tests/ais_real/test_conformance.py`` compares the
two), so these tests fail where ``dsort.start`` sends the spec without one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.dsort.conftest import make_shards
from tests.emulators.ais.server import AisEmulator
from wds_cloud.aistore import dsort

pytestmark = pytest.mark.ais


def _spec(**extra: Any) -> dict[str, Any]:
    return {
        "input_bck": {"name": "src"},
        "input_format": {"template": "samples-{00..01}.tar"},
        "output_bck": {"name": "dst"},
        "output_format": "out-{000..999}.tar",
        "output_shard_size": "1KiB",
        "algorithm": {"kind": "alphanumeric"},
        **extra,
    }


def test_a_spec_without_dsorter_type_is_sent_with_the_default(
    ais_emulator: AisEmulator, ais_client: Any
) -> None:
    make_shards(ais_emulator.store, "src", shards=2)
    job = dsort.start(_spec(), client=ais_client)
    result = dsort.wait(job, client=ais_client, progress=False, poll_interval=0.02, timeout=60)
    assert result.success and result.members == 3 * 12  # tar members, 3 a sample
    assert dsort.DEFAULT_DSORTER_TYPE == "dsort_general"


def test_the_cluster_refuses_a_spec_without_dsorter_type(
    ais_emulator: AisEmulator, ais_client: Any, tmp_path: Path
) -> None:
    """What the SDK alone gets from AIStore 5.0 (and so from the emulator)."""
    from aistore.sdk.errors import AISError

    make_shards(ais_emulator.store, "src", shards=2)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(_spec()))
    with pytest.raises(AISError, match=r"stats\.NodeStatus\.Status: ReadString") as info:
        ais_client.dsort().start(str(path))
    assert info.value.status_code == 400
    path.write_text(json.dumps(_spec(dsorter_type="dsort_mem")))
    assert ais_client.dsort().start(str(path)).startswith("srt-")
