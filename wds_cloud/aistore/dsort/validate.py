"""Checks a dSort spec dict the way the AIStore server will (``ext/dsort/request_spec.go``), and more."""

from __future__ import annotations

import difflib
import json
import re
import warnings
from collections.abc import Mapping
from typing import Any

from wds_cloud.aistore.dsort.legacy import upgrade
from wds_cloud.aistore.dsort.templates import parse_size, parse_template
from wds_cloud.errors import DsortSpecError

ALGORITHMS = ("", "alphanumeric", "md5", "shuffle", "content", "none")
CONTENT_KEY_TYPES = ("int", "float", "string")
ARCHIVE_EXTENSIONS = (".tar", ".tgz", ".tar.gz", ".zip", ".tar.lz4")
PROVIDERS = ("ais", "aws", "s3", "gcp", "gs", "azure", "az", "oci", "ht")
REACTIONS = ("ignore", "warn", "abort")
SPEC_KEYS = (
    "input_bck",
    "input_format",
    "input_extension",
    "output_bck",
    "output_format",
    "output_extension",
    "output_shard_size",
    "algorithm",
    "description",
    "ekm_file",
    "ekm_file_sep",
    "max_mem_usage",
    "extract_concurrency_max_limit",
    "create_concurrency_max_limit",
    "dry_run",
    "dsorter_type",
    "Config",
)
ALGORITHM_KEYS = ("kind", "decreasing", "seed", "extension", "content_key_type")
_MAX_INPUT_NAMES = 10_000_000
_BUCKET_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


class DsortSizeWarning(UserWarning):
    """A size like ``"100MB"`` that AIStore reads as binary (IEC) units: 100 MiB."""


def _ext(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise DsortSpecError(f"expected a string such as '.tar', got {value!r}", field=field)
    ext = value if value.startswith(".") else "." + value
    if ext not in ARCHIVE_EXTENSIONS:
        raise DsortSpecError(
            f"unsupported archive {value!r}; one of {ARCHIVE_EXTENSIONS}", field=field
        )
    return ext


def suffix_ext(name: str) -> str | None:
    """The archive extension ``name`` ends with (the longest), or None."""
    return next(
        (e for e in sorted(ARCHIVE_EXTENSIONS, key=len, reverse=True) if name.endswith(e)), None
    )


def _bucket(value: Any, field: str) -> None:
    if not isinstance(value, Mapping) or not value.get("name"):
        raise DsortSpecError("expected a bucket {name: ..., provider: ais}", field=field)
    name, provider = value["name"], value.get("provider", "ais") or "ais"
    if not isinstance(name, str) or not _BUCKET_RE.match(name) or name in (".", ".."):
        raise DsortSpecError(
            f"invalid bucket name {name!r} (letters, digits, '-', '_', '.')", field=f"{field}.name"
        )
    if provider not in PROVIDERS:
        raise DsortSpecError(
            f"unknown provider {provider!r}; one of {PROVIDERS}", field=f"{field}.provider"
        )
    extra = set(value) - {"name", "provider", "namespace"}
    if extra:
        raise DsortSpecError(f"unknown bucket keys {sorted(extra)}", field=field)


def _size_field(spec: Mapping[str, Any], key: str) -> int:
    value = spec.get(key, "")
    if not isinstance(value, str):
        raise DsortSpecError(
            f"must be a string such as '64MiB' (the server rejects numbers), got {value!r}",
            field=key,
        )
    size = parse_size(value, field=key)
    unit = value.strip().upper().lstrip("0123456789. ")
    if unit in ("K", "M", "G", "T", "KB", "MB", "GB", "TB"):
        warnings.warn(
            f"{key}={value!r} means {size} bytes on the AIStore server: dSort reads K/M/G/T "
            f"as binary (IEC) units, so write {value.strip()[: -len(unit)]}{unit[0]}iB to say so",
            DsortSizeWarning,
            stacklevel=3,
        )
    return size


def _algorithm(alg: Any) -> None:
    if not isinstance(alg, Mapping):
        raise DsortSpecError(
            f"expected a mapping such as {{kind: shuffle}}, got {alg!r}", field="algorithm"
        )
    _unknown(alg, ALGORITHM_KEYS, "algorithm.")
    kind = alg.get("kind", "")
    if kind not in ALGORITHMS:
        raise DsortSpecError(
            f"invalid sorting algorithm {kind!r} (expecting one of: {list(ALGORITHMS)})",
            field="algorithm.kind",
        )
    if not isinstance(alg.get("decreasing", False), bool):
        raise DsortSpecError("must be true or false", field="algorithm.decreasing")
    seed = alg.get("seed", "")
    if not isinstance(seed, str):
        raise DsortSpecError(
            f"must be a string of digits, got {type(seed).__name__} {seed!r}; the server "
            'rejects a number (in YAML write seed: "42", quoted)',
            field="algorithm.seed",
        )
    if seed and (not seed.isdigit() or int(seed) >= 2**63):
        raise DsortSpecError(
            f"invalid seed {seed!r} (expecting integer value >= 0)", field="algorithm.seed"
        )
    ext, key_type = alg.get("extension", ""), alg.get("content_key_type", "")
    if kind == "content":
        if not isinstance(ext, str) or not ext.strip().startswith("."):
            raise DsortSpecError(
                f"content sort needs the member extension holding the key, "
                f"starting with '.', e.g. '.cls'; got {ext!r}",
                field="algorithm.extension",
            )
        if key_type not in CONTENT_KEY_TYPES:
            raise DsortSpecError(
                f"must be one of {CONTENT_KEY_TYPES}, got {key_type!r}",
                field="algorithm.content_key_type",
            )
    elif ext or key_type:
        raise DsortSpecError(
            f"'extension' and 'content_key_type' apply only to kind 'content' (kind is {kind!r})",
            field="algorithm",
        )


def _unknown(spec: Mapping[str, Any], known: tuple[str, ...], prefix: str = "") -> None:
    for key in spec:
        if key in known:
            continue
        hint = next(iter(difflib.get_close_matches(key, known, 1)), None)
        hint = f"; did you mean {prefix}{hint!r}?" if hint else ""
        raise DsortSpecError(
            f"unknown key (the server would silently ignore it){hint}", field=f"{prefix}{key}"
        )


def validate(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Checks a dSort spec (a dict with AIStore's keys) the way the server will, and more.

    Beyond the server's own checks it rejects unknown keys (the server ignores them silently),
    unbounded or prefix-only *input* templates, and numbers where the server wants strings.
    Old key names (``extension``, ``bck``, a bare ``input_format`` string... see
    :mod:`wds_cloud.aistore.dsort.legacy`) are accepted: each gives a :class:`DsortLegacyKeyWarning`
    naming the current key, and the returned spec has the current keys only.

    Args:
        spec: the spec mapping.

    Returns:
        A plain-dict copy of ``spec``, old keys replaced by the current ones.

    Raises:
        DsortSpecError: the first problem found; ``.field`` names the key.
    """
    if not isinstance(spec, Mapping):
        raise DsortSpecError(f"a dSort spec must be a mapping, got {type(spec).__name__}")
    spec = upgrade(spec)
    _unknown(spec, SPEC_KEYS)
    if "input_bck" not in spec:
        raise DsortSpecError("missing source bucket", field="input_bck")
    _bucket(spec["input_bck"], "input_bck")
    if spec.get("output_bck"):
        _bucket(spec["output_bck"], "output_bck")
    fmt = spec.get("input_format")
    if not isinstance(fmt, Mapping) or len(set(fmt) & {"template", "objnames"}) != 1:
        raise DsortSpecError(
            "expected exactly one of {template: 'shard-{0..9}.tar'} or {objnames: [...]}",
            field="input_format",
        )
    if "objnames" in fmt:
        names = fmt["objnames"]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise DsortSpecError(
                "must be a non-empty list of object names", field="input_format.objnames"
            )
    else:
        tpl = parse_template(fmt["template"], field="input_format.template")
        if not tpl.ranges or not tpl.bounded or tpl.count > _MAX_INPUT_NAMES:
            raise DsortSpecError(
                f"{fmt['template']!r} must have a bounded range such as "
                "'shard-{000..099}.tar' (at most 10,000,000 names)",
                field="input_format.template",
            )
    in_ext = _ext(spec["input_extension"], "input_extension") if "input_extension" in spec else None
    tpl_ext = suffix_ext(fmt.get("template", ""))
    if in_ext and tpl_ext and in_ext != tpl_ext:
        raise DsortSpecError(
            f"{in_ext!r} vs {tpl_ext!r} in the input template", field="input_extension"
        )
    if not (in_ext or tpl_ext):
        raise DsortSpecError(
            "set it (e.g. '.tar'): without it the server guesses each shard's "
            "type and skips names without an archive suffix",
            field="input_extension",
        )
    size = _size_field(spec, "output_shard_size")
    ekm = spec.get("ekm_file", "")
    if not isinstance(ekm, str) or not isinstance(spec.get("ekm_file_sep", ""), str):
        raise DsortSpecError("must be a string", field="ekm_file")
    if ekm:
        if not re.match(r"^[a-z][a-z0-9+.-]*://", ekm):
            raise DsortSpecError(f"{ekm!r} is not a URL", field="ekm_file")
        if size == 0:
            raise DsortSpecError(
                "output shard size must be set (cannot be 0 and cannot be "
                "omitted) when ekm_file is used",
                field="output_shard_size",
            )
    if not ekm or spec.get("output_format"):
        out = spec.get("output_format")
        if not isinstance(out, str) or not out:
            raise DsortSpecError(
                "required: a range template such as 'out-{000..999}.tar'", field="output_format"
            )
        tpl = parse_template(out, field="output_format")
        if not tpl.ranges:
            raise DsortSpecError(
                f"invalid output template {out!r}: no ranges (prefix-only output is not supported)",
                field="output_format",
            )
        if not tpl.bounded and size == 0:
            raise DsortSpecError(
                f"unbounded output template {out!r} needs output_shard_size "
                "(cannot be 0 and cannot be omitted)",
                field="output_shard_size",
            )
        out_ext = suffix_ext(out)
        if (
            out_ext
            and spec.get("output_extension")
            and _ext(spec["output_extension"], "output_extension") != out_ext
        ):
            raise DsortSpecError(
                f"{spec['output_extension']!r} vs {out_ext!r} in output_format",
                field="output_extension",
            )
    if "output_extension" in spec:
        _ext(spec["output_extension"], "output_extension")
    _algorithm(spec.get("algorithm", {}))
    mem = spec.get("max_mem_usage", "")
    if not isinstance(mem, str):
        raise DsortSpecError(
            f"must be a string such as '80%' or '16GiB', got {mem!r}", field="max_mem_usage"
        )
    if mem.strip().endswith("%"):
        pct = mem.strip()[:-1]
        if not pct.isdigit() or not 0 < int(pct) <= 100:
            raise DsortSpecError(f"percent must be in 1..100, got {mem!r}", field="max_mem_usage")
    else:
        parse_size(mem, field="max_mem_usage")
    for key in ("extract_concurrency_max_limit", "create_concurrency_max_limit"):
        value = spec.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DsortSpecError(f"must be an integer >= 0 (0 = auto), got {value!r}", field=key)
    for key in ("dry_run",):
        if not isinstance(spec.get(key, False), bool):
            raise DsortSpecError("must be true or false", field=key)
    config = spec.get("Config", {})
    if not isinstance(config, Mapping):
        raise DsortSpecError("must be a mapping", field="Config")
    for key in ("duplicated_records", "missing_shards", "ekm_malformed_line", "ekm_missing_key"):
        if config.get(key, "ignore") not in REACTIONS:
            raise DsortSpecError(f"must be one of {REACTIONS}", field=f"Config.{key}")
    copied: dict[str, Any] = json.loads(json.dumps(spec))
    return copied
