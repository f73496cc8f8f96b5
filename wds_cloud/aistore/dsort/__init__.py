"""AIStore dSort: build, check, save, launch and wait for shard shuffle/sort jobs.

A dSort job (``POST /v1/sort``) reads a set of input shards from one bucket, groups tar members
into records (member path up to the first dot of its basename, the WebDataset key rule), sorts
or shuffles the records across *all* shards and repacks them into new shards of about
``output_shard_size`` bytes named by ``output_format``. This module speaks AIStore's real
spec keys (``ext/dsort/api.go RequestSpec``), checks a spec before the cluster does, with
messages that name the key, and drives jobs through the ``aistore`` SDK (``extra: ais``).

Sizes: dSort parses ``output_shard_size`` with IEC units only, so ``"100MB"`` means 100 MiB
(104857600 bytes). :func:`validate` accepts it and emits a :class:`DsortSizeWarning`; write
``"100MiB"`` to be explicit. The endpoint is ``endpoint=`` or the ``AIS_ENDPOINT`` variable.

:func:`reshard_via_dsort` builds, runs and waits for the seeded-shuffle reshard of ``ais://``
shards in one call (the generic reshard job uses it when :func:`can_reshard_via_dsort`).

Old key names from earlier AIStore docs and blog posts (``extension``, ``bck``, a bare
``input_format`` string, ``order_file``...) are accepted everywhere a spec is read, each with a
:class:`DsortLegacyKeyWarning` naming the current key (:func:`upgrade`).
"""

from wds_cloud.aistore.dsort.job import (
    DEFAULT_DSORTER_TYPE,
    DsortJobError,
    DsortResult,
    DsortTimeoutError,
    abort,
    start,
    wait,
)
from wds_cloud.aistore.dsort.legacy import DsortLegacyKeyWarning, upgrade
from wds_cloud.aistore.dsort.reshard import ReshardSummary, can_reshard_via_dsort, reshard_via_dsort
from wds_cloud.aistore.dsort.spec import DsortSpec, load_spec
from wds_cloud.aistore.dsort.templates import Template, expand_template, parse_size, parse_template
from wds_cloud.aistore.dsort.validate import DsortSizeWarning, validate

__all__ = [
    "DEFAULT_DSORTER_TYPE",
    "DsortJobError",
    "DsortLegacyKeyWarning",
    "DsortResult",
    "DsortSizeWarning",
    "DsortSpec",
    "DsortTimeoutError",
    "ReshardSummary",
    "Template",
    "abort",
    "can_reshard_via_dsort",
    "expand_template",
    "load_spec",
    "parse_size",
    "parse_template",
    "reshard_via_dsort",
    "start",
    "upgrade",
    "validate",
    "wait",
]
