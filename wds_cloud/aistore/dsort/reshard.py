"""Reshard with a seeded global shuffle on AIStore itself, as one dSort job.

When the source and the destination of a reshard are both AIStore buckets, the cluster can do
the whole job: dSort extracts every sample (record) of every input shard, shuffles them all
with a seed (``"algorithm": {"kind": "shuffle", "seed": ...}``) and packs them into new shards
of about ``maxsize`` bytes, without the data leaving the cluster::

    from wds_cloud.aistore.dsort import reshard_via_dsort

    summary = reshard_via_dsort(
        "ais://raw/train-{0000..0999}.tar", "ais://train/shuffled-%06d.tar",
        maxsize="256MiB", seed=17, endpoint="http://aistore:51080")
    summary.shards, summary.samples

The generic reshard job calls this when :func:`can_reshard_via_dsort` says so, and runs on
the local or Ray engine otherwise. Differences from those engines, all the server's:
shards close once they *reach* ``maxsize`` (so they are a little larger; the last one is
smaller), there is no sample-count bound (``maxcount``), and the order for a seed is
dSort's own (the same seed and input give the same shards, but not the same order as the
local engine's shuffle).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wds_cloud.aistore.cluster import JobOptions, error_text, sdk_errors
from wds_cloud.aistore.dsort.job import DsortJobError, start_job, wait_job
from wds_cloud.aistore.dsort.spec import DsortSpec
from wds_cloud.aistore.dsort.templates import parse_size, parse_template
from wds_cloud.core.samples import base_plus_ext
from wds_cloud.errors import ConfigError, ShardNotFoundError

if TYPE_CHECKING:
    from wds_cloud.openers.ais.opener import AisConfig

SHARD_EXTENSIONS = (".tar.gz", ".tgz", ".tar")
DEFAULT_NAME = "shard-%06d"


@dataclass(frozen=True)
class ReshardSummary:
    """What a dSort reshard wrote.

    Attributes:
        job_id: the dSort job id (``srt-...``).
        shards: URLs of the shards written, in order (``ais://bucket/name``).
        samples: samples in them (WebDataset keys), counted from one listing of their members
            after the job (dSort reports only the tar members it extracted).
        input_shards: input shards read.
        bytes: sample bytes moved (member contents, without tar headers).
        seed: the shuffle seed.
        elapsed_s: job duration reported by the cluster, when known.
    """

    job_id: str
    shards: list[str]
    samples: int
    input_shards: int
    bytes: int
    seed: int
    elapsed_s: float | None

    @property
    def shards_written(self) -> int:
        """Number of output shards."""
        return len(self.shards)


def _split(url: str, what: str) -> tuple[str, str]:
    """``(bucket, key)`` of an ``ais://bucket/key`` URL."""
    from wds_cloud.urls import parse_object_url

    try:
        parsed = parse_object_url(url, schemes=("ais",))
    except ConfigError as exc:
        raise ConfigError(f"{what}: {exc} (dSort reads and writes ais:// buckets)") from None
    if parsed.query:
        raise ConfigError(f"{what} {url!r}: query options (?etl=...) do not apply to dSort")
    return parsed.bucket, parsed.key


def _suffix(name: str) -> str | None:
    return next((e for e in SHARD_EXTENSIONS if name.endswith(e)), None)


def can_reshard_via_dsort(
    src: str | Sequence[str], dst: str, *, maxcount: int | None = None
) -> bool:
    """Whether :func:`reshard_via_dsort` can run this reshard: every URL is ``ais://`` and no
    sample-count bound is asked for (dSort packs by size only)."""
    urls = [src] if isinstance(src, str) else list(src)
    return maxcount is None and bool(urls) and all(u.startswith("ais://") for u in [*urls, dst])


def _input(
    ais: Any, src: str | Sequence[str]
) -> tuple[str, dict[str, Any], str]:  # (bucket, input_format fields, extension)
    if not isinstance(src, str):
        urls = list(src)
        if not urls:
            raise ConfigError("reshard source: an empty list of shards")
        parts = [_split(u, "reshard source") for u in urls]
        buckets = sorted({b for b, _ in parts})
        if len(buckets) > 1:
            raise ConfigError(f"reshard source: dSort reads one bucket, got {buckets}")
        names = [k for _, k in parts]
        return buckets[0], {"input_objnames": names}, _one_ext(names, "reshard source")
    bucket, key = _split(src, "reshard source")
    if "{" in key:
        ext = _suffix(key)
        if ext is None:
            raise ConfigError(f"reshard source {src!r}: the template must end in .tar/.tgz")
        return bucket, {"input_template": key}, ext
    try:
        listed = [e.name for e in ais.bucket(bucket).list_objects_iter(prefix=key, props="name")]
    except sdk_errors() as exc:
        raise ShardNotFoundError(f"cannot list {src}: {error_text(exc)}", url=src) from exc
    names = [n for n in listed if _suffix(n)]
    if not names:
        raise ShardNotFoundError(f"no .tar/.tgz shards under {src}", url=src)
    return bucket, {"input_objnames": names}, _one_ext(names, src)


def _one_ext(names: list[str], where: str) -> str:
    exts = sorted({_suffix(n) or "" for n in names})
    if len(exts) != 1 or not exts[0]:
        raise ConfigError(f"{where}: one dSort job reads one shard type, found {exts}")
    return exts[0]


def _output(dst: str, in_ext: str) -> tuple[str, str, str]:
    """``(bucket, output_format, extension)``."""
    bucket, key = _split(dst, "reshard destination")
    tpl = parse_template(key, field="output_format") if key else None
    if tpl is None or not tpl.ranges:
        if key and not key.endswith("/"):
            raise ConfigError(
                f"reshard destination {dst!r}: give a name template (out-%06d.tar, "
                "out-{000000..999999}.tar) or a prefix ending in '/'"
            )
        key = f"{key}{DEFAULT_NAME}{in_ext}"
    return bucket, key, _suffix(key) or in_ext


def _common_prefix(names: Collection[str]) -> str:
    """The longest string every name starts with (a listing prefix, not a path)."""
    first, last = min(names, default=""), max(names, default="")
    pairs = enumerate(zip(first, last, strict=False))
    same = next((i for i, (a, b) in pairs if a != b), len(first))
    return first[:same]


def _count_samples(ais: Any, bucket: str, shards: list[str], job_id: str) -> int:
    """The samples in the shards written, from one listing of their members (AIStore lists
    the members of archives with the ``arch`` flag, reading only their headers).

    dSort itself reports only the tar members it extracted (``extracted_record_count`` counts
    files: 3 for a sample of ``.jpg``, ``.cls``, ``.json``), not the samples they form.
    """
    from aistore.sdk.list_object_flag import ListObjectFlag

    names = {url.split("/", 3)[3] for url in shards}
    keys: set[tuple[str, str]] = set()
    current = ""
    try:
        entries = ais.bucket(bucket).list_objects_iter(
            prefix=_common_prefix(names),
            props="name",
            flags=[ListObjectFlag.ARCH_DIR],
        )
        for entry in entries:
            if entry.name in names:
                current = entry.name
            elif current and entry.name.startswith(current + "/"):
                key, _ = base_plus_ext(entry.name[len(current) + 1 :])
                if key is not None:
                    keys.add((current, key))
    except sdk_errors() as exc:
        raise DsortJobError(
            f"the job finished, but listing its shards' members failed: {error_text(exc)}",
            job_id=job_id,
        ) from exc
    return len(keys)


def reshard_via_dsort(
    src: str | Sequence[str],
    dst: str,
    *,
    maxsize: int | str,
    seed: int,
    maxcount: int | None = None,
    description: str = "",
    timeout: float = 3600.0,
    progress: bool = True,
    poll_interval: float = 1.0,
    client: Any = None,
    endpoint: str | None = None,
    config: AisConfig | None = None,
) -> ReshardSummary:
    """Reshards ``ais://`` shards with a seeded shuffle of all samples, as one dSort job.

    Args:
        src: the input shards, one of: a template ``ais://b/train-{0000..0999}.tar`` (every
            name must exist: a missing shard aborts the job), a prefix ``ais://b/train/`` (its
            ``.tar``/``.tgz``/``.tar.gz`` objects, listed once), or a list of
            ``ais://b/name`` URLs of one bucket. One shard type per job.
        dst: where the shards go: a name template ``ais://out/shuffled-%06d.tar`` (or
            ``...-{000000..999999}.tar``), or a bucket/prefix ``ais://out/`` or
            ``ais://out/train/`` (names ``shard-000000.tar``, ...). The bucket is created when
            missing. Existing objects with the same names are overwritten.
        maxsize: target shard size, bytes or a size string (``"256MiB"``; K/M/G are binary).
            A shard closes once it reaches it.
        seed: the shuffle seed (an integer >= 0); the same seed and input give the same shards.
        maxcount: not supported by dSort; anything but None raises :class:`ConfigError` (use
            :func:`can_reshard_via_dsort` to choose an engine).
        description: the job's description on the cluster.
        timeout: seconds to wait for the job (it keeps running after that).
        progress: show a progress bar (shards created) on stderr.
        poll_interval: seconds between status requests.
        client: an ``aistore.sdk.Client``; by default the AIStore opener's client is used.
        endpoint: the AIStore URL (default: ``config``'s, else ``AIS_ENDPOINT``).
        config: an :class:`~wds_cloud.openers.ais.opener.AisConfig` (token, timeouts, retries).

    Returns:
        The shards written (in order), samples, input shards, bytes and the job id.

    Raises:
        ConfigError: a non-``ais://`` URL, ``maxcount``, a bad seed, size or destination.
        ShardNotFoundError: the source prefix holds no shard.
        DsortSpecError: the cluster (or the local check) rejected the spec.
        DsortJobError: the job failed or was aborted (a missing input shard among them);
            :class:`DsortTimeoutError` when still running after ``timeout``.
    """
    if maxcount is not None:
        raise ConfigError(
            "dSort packs shards by size only (output_shard_size): maxcount needs the local "
            "or Ray engine"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be an integer >= 0, got {seed!r}")
    size = parse_size(maxsize, field="maxsize")
    if size <= 0:
        raise ConfigError(f"maxsize must be > 0, got {maxsize!r}")
    options = JobOptions(
        client=client,
        endpoint=endpoint,
        config=config,
        timeout=timeout,
        progress=progress,
        poll_interval=poll_interval,
    ).connected()
    in_bucket, selection, in_ext = _input(options.client, src)
    out_bucket, out_format, out_ext = _output(dst, in_ext)
    spec = DsortSpec(
        input_bck=in_bucket,
        input_extension=in_ext,
        output_bck=out_bucket,
        output_format=out_format,
        output_extension=out_ext,
        output_shard_size=str(size),
        algorithm="shuffle",
        seed=str(seed),
        description=description or f"wds_cloud reshard (seed {seed})",
        config={"missing_shards": "abort"},
        **selection,
    )
    job_id = start_job(spec, options)
    result = wait_job(job_id, options)
    names = parse_template(out_format).names()
    shards = []
    for _ in range(result.shards_created):
        name = next(names)
        shards.append(f"ais://{out_bucket}/{name if _suffix(name) else name + out_ext}")
    return ReshardSummary(
        job_id=job_id,
        shards=shards,
        samples=_count_samples(options.client, out_bucket, shards, job_id),
        input_shards=result.input_shards,
        bytes=result.extracted_bytes,
        seed=seed,
        elapsed_s=result.elapsed_s,
    )
