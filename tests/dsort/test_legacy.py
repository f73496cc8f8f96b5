"""Old dSort spec keys (the AIStore blog's spec, verbatim) load with one warning per old key."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from wds_cloud.aistore import dsort
from wds_cloud.aistore.dsort import DsortLegacyKeyWarning, DsortSizeWarning
from wds_cloud.errors import DsortSpecError

BLOG = Path(__file__).parent / "data" / "blog-webdataset-part1.json"

# the same job written with today's keys
CURRENT = {
    "input_extension": ".tar",
    "input_bck": {"name": "images"},
    "input_format": {"template": "samples-{00..18}"},
    "output_format": "shuffled-shard-%d",
    "output_shard_size": "100MB",
    "description": "Create new shuffled shards",
    "algorithm": {"kind": "shuffle"},
}


def _load(load: Any, *args: Any) -> tuple[Any, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = load(*args)
    return value, caught


def _legacy(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if w.category is DsortLegacyKeyWarning]


def test_blog_spec_is_verbatim_old_style() -> None:
    raw = json.loads(BLOG.read_text())
    assert {"extension", "bck"} <= set(raw) and isinstance(raw["input_format"], str)


def test_blog_spec_loads_with_one_warning_per_old_key() -> None:
    spec, caught = _load(dsort.load_spec, BLOG)
    messages = _legacy(caught)
    assert len(messages) == 3, messages
    expected = [("'extension'", "'input_extension'"), ("'bck'", "'input_bck'")]
    expected.append(("'input_format'", "'input_format.template'"))
    for old, new in expected:
        assert sum(old in m and f"the current key is {new}" in m for m in messages) == 1, messages
    # the decimal-looking size keeps its own warning, as for a current-key spec
    assert [w.category for w in caught].count(DsortSizeWarning) == 1
    current, caught_current = _load(dsort.validate, CURRENT)
    assert _legacy(caught_current) == []
    assert spec == current
    assert "extension" not in spec and "bck" not in spec


def test_blog_spec_builds_the_same_dsortspec() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = dsort.DsortSpec.load(BLOG)
        new = dsort.DsortSpec.from_dict(CURRENT)
    assert old == new and old.input_bck == "images" and old.input_template == "samples-{00..18}"


def test_other_old_keys_of_earlier_docs() -> None:
    old = {
        "extension": ".tar",
        "bucket": "src",
        "provider": "ais",
        "output_bucket": "dst",
        "input_format": "shard-{0..9}",
        "output_shard_size": "200KiB",
        "order_file": "http://website.web/static/order_file.txt",
        "order_file_sep": " ",
        "extract_concurrency_limit": "3",
        "create_concurrency_limit": 5,
        "missing_shards": "warn",
        "extended_metrics": True,
        "algorithm": {"kind": "content", "extension": ".cls", "format_type": "int"},
    }
    spec, caught = _load(dsort.validate, old)
    assert spec == {
        "input_extension": ".tar",
        "input_bck": {"name": "src", "provider": "ais"},
        "output_bck": {"name": "dst"},
        "input_format": {"template": "shard-{0..9}"},
        "output_shard_size": "200KiB",
        "ekm_file": "http://website.web/static/order_file.txt",
        "ekm_file_sep": " ",
        "extract_concurrency_max_limit": 3,
        "create_concurrency_max_limit": 5,
        "Config": {"missing_shards": "warn"},
        "algorithm": {"kind": "content", "extension": ".cls", "content_key_type": "int"},
    }
    messages = _legacy(caught)
    assert len(messages) == 12, messages  # one per old key
    for new in ("'input_bck.name'", "'ekm_file'", "'Config.missing_shards'"):
        assert any(new in m for m in messages), new
    assert any("'extended_metrics' no longer exists" in m for m in messages)
    assert any("'algorithm.content_key_type'" in m for m in messages)
    assert old["algorithm"] == {"kind": "content", "extension": ".cls", "format_type": "int"}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"extension": ".tar", "input_extension": ".tar"}, "extension"),
        ({"bucket": "x"}, "bucket"),
        ({"missing_shards": "warn", "Config": {"missing_shards": "abort"}}, "missing_shards"),
    ],
)
def test_old_and_current_key_together_is_an_error(changes: dict[str, Any], field: str) -> None:
    spec = {**CURRENT, **changes}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(DsortSpecError, match="the old name of") as err:
            dsort.validate(spec)
    assert err.value.field == field


def test_current_spec_gives_no_legacy_warning(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({**CURRENT, "output_shard_size": "100MiB"}))
    _, caught = _load(dsort.load_spec, path)
    assert caught == []
