"""The YAML form of a :class:`~wds_cloud.core.mixplan.DataPlan` (``DataPlan.from_yaml``), mapping 1:1 to ``wds.mix``::

    seed: 17
    batching: stratified          # random | stratified | per_stream | per_device
    epoch_size: 100000            # with weights only
    sources:
      laion: {shards: "s3://b/laion-{000..099}.tar", weight: 0.5}
      coyo:  {shards: "s3://b/coyo-{000..049}.tar", weight: 0.5}

Each source has ``shards`` (a spec or a list of URLs) and one of ``weight``, ``count``,
``repeat``, ``choose``. Top-level keys are those of :data:`TOP_KEYS`; a later step of the plan
(packing, joined sources) adds its own key there.
"""

from __future__ import annotations

import os
from typing import Any

from wds_cloud.errors import ConfigError

TOP_KEYS = ("seed", "batching", "epoch_size", "sources")
SOURCE_KEYS = ("shards", "weight", "count", "repeat", "choose")
_ARG = {"weight": "weights", "count": "counts", "repeat": "repeat", "choose": "choose"}


def _load(path_or_text: str) -> tuple[Any, str]:
    import yaml

    where = "the YAML text"
    text = path_or_text
    if "\n" not in path_or_text and os.path.isfile(path_or_text):
        where = path_or_text
        with open(path_or_text, encoding="utf-8") as f:
            text = f.read()
    try:
        return yaml.safe_load(text), where
    except yaml.YAMLError as exc:
        raise ConfigError(f"data plan: {where} is not valid YAML: {exc}") from exc


def plan_arguments(path_or_text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(sources, options)`` of the plan a YAML file or text declares: the arguments of
    ``DataPlan(sources, **options)``.

    Raises:
        ConfigError: not a mapping, an unknown key (named, with where it is), a source
            without ``shards``.
    """
    doc, where = _load(path_or_text)
    if not isinstance(doc, dict) or not isinstance(doc.get("sources"), dict):
        raise ConfigError(f"data plan: {where} needs a 'sources:' mapping of name -> source")
    stray = sorted(set(doc) - set(TOP_KEYS))
    if stray:
        raise ConfigError(f"data plan: unknown keys {stray} in {where}; known: {list(TOP_KEYS)}")
    shards: dict[str, Any] = {}
    quotas: dict[str, dict[str, float]] = {}
    for name, spec in doc["sources"].items():
        if not isinstance(spec, dict) or "shards" not in spec:
            raise ConfigError(f"data plan: source {name!r} in {where} needs 'shards:'")
        stray = sorted(set(spec) - set(SOURCE_KEYS))
        if stray:
            raise ConfigError(
                f"data plan: source {name!r} in {where} has unknown keys {stray}; "
                f"known: {list(SOURCE_KEYS)}"
            )
        shards[str(name)] = spec["shards"]
        for key in SOURCE_KEYS[1:]:
            if key in spec:
                quotas.setdefault(_ARG[key], {})[str(name)] = spec[key]
    options: dict[str, Any] = {k: doc[k] for k in ("seed", "batching", "epoch_size") if k in doc}
    options.update(quotas)
    return shards, options


__all__ = ["SOURCE_KEYS", "TOP_KEYS", "plan_arguments"]
