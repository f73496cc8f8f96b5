"""Read-only shard inspection the CLI (``ls``, ``stats``, ``verify``) and the jobs
(``verify``) share: the sizes of every sample's files, and a full parse of a shard reported as
data (``ok``, samples, or where it failed).
"""

from __future__ import annotations

from typing import Any

from wds_cloud.errors import SampleError, ShardError


def sample_sizes(url: str, on_warning: Any = None, registry: Any = None) -> Any:
    """Yield ``(key, {ext: size})`` for every sample of a shard."""
    from wds_cloud.core.samples import tar_samples
    from wds_cloud.openers.registry import open_url

    stream = open_url(url, registry=registry)
    try:
        for sample in tar_samples(stream, url, on_warning=on_warning):
            sizes = {k: len(v) for k, v in sample.items() if not k.startswith("__")}
            yield sample["__key__"], sizes
    finally:
        stream.close()


def verify_shard(url: str, registry: Any = None) -> dict[str, Any]:
    """Parse one shard fully (through ``registry``, the default one when None); return its
    report (``ok``, samples, or the error's location)."""
    samples = 0
    warnings: list[dict[str, Any]] = []

    def warn(message: str, offset: int) -> None:
        warnings.append({"offset": offset, "warning": message})

    try:
        for _ in sample_sizes(url, warn, registry):
            samples += 1
    except ShardError as exc:
        return {
            "url": url,
            "ok": False,
            "samples": samples,
            "offset": exc.offset,
            "member": getattr(exc, "member", None),
            "error": getattr(exc, "reason", None) or str(exc),
            "type": type(exc).__name__,
            "warnings": warnings,
        }
    except SampleError as exc:
        return {
            "url": url,
            "ok": False,
            "samples": samples,
            "offset": None,
            "member": getattr(exc, "key", None),
            "error": getattr(exc, "reason", None) or str(exc),
            "type": type(exc).__name__,
            "warnings": warnings,
        }
    return {"url": url, "ok": True, "samples": samples, "warnings": warnings}
