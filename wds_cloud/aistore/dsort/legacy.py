"""Old dSort spec key names, as older AIStore docs and blog posts write them, mapped to today's.

AIStore renamed dSort spec keys over the years (``extension`` became ``input_extension``,
``bck`` became ``input_bck``, a bare ``input_format`` string became
``input_format: {template: ...}``...). The server ignores a key it does not know, so an old
spec fails there with a message about something else ("missing source bucket"). :func:`upgrade`
rewrites the old keys into the current ones and warns once per old key, naming the new key.
Sources: AIStore's ``docs/cli/dsort.md`` of 2019-2023 and the post "AIStore with WebDataset
Part 1" (2023), whose spec is ``tests/dsort/data/blog-webdataset-part1.json``.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping
from typing import Any

from wds_cloud.errors import DsortSpecError

__all__ = ["LEGACY_KEYS", "DsortLegacyKeyWarning", "upgrade"]

#: old top-level key -> its current place (a dotted path); None: no current key (dropped)
LEGACY_KEYS: dict[str, str | None] = {
    "extension": "input_extension",
    "bck": "input_bck",
    "bucket": "input_bck.name",
    "provider": "input_bck.provider",
    "output_bucket": "output_bck.name",
    "output_provider": "output_bck.provider",
    "order_file": "ekm_file",
    "order_file_sep": "ekm_file_sep",
    "extract_concurrency_limit": "extract_concurrency_max_limit",
    "create_concurrency_limit": "create_concurrency_max_limit",
    "duplicated_records": "Config.duplicated_records",
    "missing_shards": "Config.missing_shards",
    "ekm_malformed_line": "Config.ekm_malformed_line",
    "ekm_missing_key": "Config.ekm_missing_key",
    "dsorter_mem_threshold": "Config.dsorter_mem_threshold",
    "extended_metrics": None,
    "stream_multiplier": None,
    "bundle_multiplier": None,
}
_LEGACY_ALGORITHM_KEYS = {"format_type": "content_key_type"}
_INT_KEYS = ("extract_concurrency_max_limit", "create_concurrency_max_limit")


class DsortLegacyKeyWarning(UserWarning):
    """A dSort spec used an old key name; the message names the current key."""


def _warn(message: str) -> None:
    warnings.warn(message, DsortLegacyKeyWarning, stacklevel=4)


def _put(spec: dict[str, Any], path: str, value: Any, old: str) -> None:
    """Set ``spec[a][b]`` for ``path`` ``"a.b"``, refusing to overwrite a value given."""
    head, _, tail = path.partition(".")
    if not tail:
        if head in spec:
            raise DsortSpecError(
                f"both {old!r} (the old name of {path!r}) and {path!r} are given; keep {path!r}",
                field=old,
            )
        spec[head] = value
        return
    inner = spec.setdefault(head, {})
    if not isinstance(inner, dict):
        raise DsortSpecError(f"expected a mapping to hold {old!r}", field=head)
    if tail in inner:
        raise DsortSpecError(
            f"both {old!r} (the old name of {path!r}) and {path!r} are given; keep {path!r}",
            field=old,
        )
    inner[tail] = value


def upgrade(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``spec`` with old key names replaced by the current ones.

    Emits one :class:`DsortLegacyKeyWarning` per old key, naming its current key (or saying
    that it no longer exists and is dropped). A spec with current keys only is returned as
    a plain copy, with no warning.

    Raises:
        DsortSpecError: an old key and its current key are both given.
    """
    out: dict[str, Any] = {}
    moved: list[tuple[str, str, Any]] = []
    for key, value in copy.deepcopy(dict(spec)).items():
        if key in LEGACY_KEYS:
            new = LEGACY_KEYS[key]
            if new is None:
                _warn(f"dSort spec key {key!r} no longer exists in AIStore; dropped")
                continue
            if new in _INT_KEYS and isinstance(value, str) and value.strip().isdigit():
                value = int(value)
            _warn(f"dSort spec key {key!r} is an old name; the current key is {new!r}")
            moved.append((key, new, value))
        elif key == "input_format" and isinstance(value, str):
            _warn(
                "dSort spec: 'input_format' as a bare template string is the old form; "
                f"the current key is 'input_format.template' ({{template: {value!r}}})"
            )
            out[key] = {"template": value}
        elif key == "algorithm" and isinstance(value, Mapping):
            algorithm = dict(value)
            for old, new_key in _LEGACY_ALGORITHM_KEYS.items():
                if old in algorithm:
                    _warn(
                        f"dSort spec key 'algorithm.{old}' is an old name; the current key is "
                        f"'algorithm.{new_key}'"
                    )
                    _put(algorithm, new_key, algorithm.pop(old), f"algorithm.{old}")
            out[key] = algorithm
        else:
            out[key] = value
    for old, new, value in moved:
        _put(out, new, value, old)
    return out
