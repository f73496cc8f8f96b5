"""webdataset's ``MultiShardSample``: a shard list drawn each epoch from several named sources.

A specification (a YAML file, or the same as a dict)::

    prefix: s3://bucket/          # optional, put before every shard name
    buckets: train/               # optional default bucket (one) for the datasets
    datasets:
      - name: web                 # optional (default "@<bucket>")
        buckets: web/             # optional, overrides the top-level one
        shards: web-{000..099}.tar   # a brace pattern or a list of them
        choose: 10                # optional: 10 shards drawn without replacement per epoch
      - shards: [books-{00..09}.tar]
        resample: 30              # optional: 30 shards drawn with replacement per epoch

Each epoch is the concatenation of every source's draw (all its shards when it has neither
``choose`` nor ``resample``), shuffled. ``$VARS`` and ``~`` are expanded in ``prefix``,
``buckets`` and ``shards`` (``os.path.expandvars``/``expanduser``) before the braces.
:meth:`MultiShardSample.set_epoch` seeds the draw (same seed on every rank: the same list);
until it is called every pass draws from a fresh random state, as in webdataset.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from wds_cloud.braces import check_count, max_urls, parse_braces
from wds_cloud.errors import ConfigError

log = logging.getLogger(__name__)

_TOP_KEYS = frozenset({"prefix", "datasets", "buckets"})
_SOURCE_KEYS = frozenset({"buckets", "name", "shards", "resample", "choose"})


@dataclass
class MSSource:
    """One source of a :class:`MultiShardSample`.

    Attributes:
        name: its name (for messages).
        perepoch: shards drawn without replacement per epoch (``-1``: every shard).
        resample: shards drawn with replacement per epoch (``-1``: no resampling).
        urls: its shard URLs.
    """

    name: str = ""
    perepoch: int = -1
    resample: int = -1
    urls: list[str] = field(default_factory=list)


def _expand(text: str) -> str:
    return os.path.expanduser(os.path.expandvars(text))


def _strings(value: Any, what: str, where: str) -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise ConfigError(f"{where}: {what} must be a string or a list of strings, got {value!r}")
    return items


def _unknown(keys: Any, allowed: frozenset[str], where: str) -> None:
    extra = sorted(set(keys) - allowed)
    if extra:
        raise ConfigError(f"{where}: unknown key(s) {extra}; allowed: {sorted(allowed)}")


class MultiShardSample:
    """Shards drawn per epoch from the sources of a YAML specification (see the module doc).

    Args:
        fname: the YAML file's path, or the specification as a dict.

    Raises:
        ConfigError: invalid YAML, an unknown key, no ``datasets`` or ``shards``, more than one bucket, or
            ``choose`` larger than the source or given together with ``resample``.
    """

    def __init__(self, fname: str | os.PathLike[str] | dict[str, Any]) -> None:
        self.epoch = -1
        self.parse_spec(fname)

    def parse_spec(self, fname: str | os.PathLike[str] | dict[str, Any]) -> None:
        """Read the specification into :attr:`sources`."""
        self.rng = random.Random()
        if isinstance(fname, dict):
            spec, where = fname, "MultiShardSample spec"
        else:
            import yaml

            where = os.fspath(fname)
            with open(fname) as stream:
                try:
                    spec = yaml.safe_load(stream)
                except yaml.YAMLError as exc:
                    raise ConfigError(f"{where}: not valid YAML: {exc}") from exc
        if not isinstance(spec, dict) or "datasets" not in spec:
            raise ConfigError(f"{where}: a specification is a mapping with a 'datasets' list")
        _unknown(spec, _TOP_KEYS, where)
        prefix = _expand(spec.get("prefix", ""))
        limit = max_urls()
        self.sources: list[MSSource] = []
        for index, ds in enumerate(spec["datasets"]):
            here = f"{where}: datasets[{index}]"
            if not isinstance(ds, dict) or "shards" not in ds:
                raise ConfigError(f"{here}: each dataset is a mapping with 'shards'")
            _unknown(ds, _SOURCE_KEYS, here)
            buckets = [
                _expand(b)
                for b in _strings(ds.get("buckets", spec.get("buckets", [])), "buckets", here)
            ] or [""]
            if len(buckets) != 1:
                raise ConfigError(f"{here}: one bucket per dataset, got {buckets}")
            bucket = buckets[0]
            urls = []
            for pattern in _strings(ds["shards"], "shards", here):
                braces = parse_braces(_expand(pattern))
                check_count(braces, limit)
                urls += [prefix + os.path.join(bucket, u) for u in braces]
            resample = int(ds.get("resample", -1))
            choose = int(ds.get("choose", -1))
            if choose > len(urls):
                raise ConfigError(f"{here}: choose={choose} is more than its {len(urls)} shard(s)")
            if choose > 0 and resample > 0:
                raise ConfigError(f"{here}: give only one of 'choose' and 'resample'")
            name = str(ds.get("name", "@" + bucket))
            self.sources.append(MSSource(name=name, urls=urls, perepoch=choose, resample=resample))
            log.info("MultiShardSample source %s: %d shard(s), choose %d", name, len(urls), choose)

    def set_epoch(self, seed: int) -> None:
        """Seed the draw: every process with the same ``seed`` draws the same shard list."""
        self.rng = random.Random(seed)

    def get_shards_for_epoch(self) -> list[str]:
        """Draw this epoch's shard list (advances the random state)."""
        result: list[str] = []
        for source in self.sources:
            if source.resample > 0:
                result += self.rng.choices(source.urls, k=source.resample)
            elif source.perepoch > 0:
                urls = list(source.urls)
                self.rng.shuffle(urls)
                result += urls[: source.perepoch]
            else:
                result += source.urls
        self.rng.shuffle(result)
        return result

    def __iter__(self) -> Iterator[dict[str, str]]:
        for url in self.get_shards_for_epoch():
            yield {"url": url}

    def __repr__(self) -> str:
        return f"MultiShardSample({[s.name for s in self.sources]})"
