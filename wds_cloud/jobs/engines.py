"""Engines only schedule: they run ``fn(item, shared)`` for every item and hand back results.

- :class:`LocalEngine`: in this process, ``workers`` threads (1: one after the other).
- :class:`RayEngine`: one Ray task per item on an existing cluster (``address``) or a local
  Ray started on demand on 127.0.0.1; a task whose worker process dies is retried by Ray
  (``max_retries``), an exception raised by ``fn`` is not (it is reported).

Both yield ``(position, result or exception)`` as tasks finish; the order of completion never
matters to a job's output (each task's output depends on its item only).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Protocol

from wds_cloud.errors import ConfigError, MissingDependencyError
from wds_cloud.settings import env_str

Outcome = tuple[int, Any]


class Engine(Protocol):
    """Runs ``fn(item, shared)`` for every item; yields ``(position, result or exception)``."""

    name: str

    def run(
        self, fn: Callable[[Any, Any], Any], items: Sequence[Any], shared: Any
    ) -> Iterator[Outcome]: ...  # pragma: no cover - protocol


class LocalEngine:
    """Runs tasks in this process.

    Args:
        workers: threads (1: one task after the other, in order).
    """

    name = "local"

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise ConfigError(f"workers must be >= 1, got {workers}")
        self.workers = workers

    def run(
        self, fn: Callable[[Any, Any], Any], items: Sequence[Any], shared: Any
    ) -> Iterator[Outcome]:
        if self.workers == 1:
            for i, item in enumerate(items):
                try:
                    yield i, fn(item, shared)
                except Exception as exc:
                    yield i, exc
            return
        with ThreadPoolExecutor(self.workers) as pool:
            pending: dict[Future[Any], int] = {}
            queue = iter(enumerate(items))
            for i, item in queue:
                pending[pool.submit(fn, item, shared)] = i
                if len(pending) >= 2 * self.workers:
                    break
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    i = pending.pop(future)
                    error = future.exception()
                    yield i, error if error is not None else future.result()
                    nxt = next(queue, None)
                    if nxt is not None:
                        pending[pool.submit(fn, nxt[1], shared)] = nxt[0]


#: Ray reads this when it is imported; "0" makes a local instance bind to 127.0.0.1 only
#: (otherwise its servers listen on every interface).
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def loopback_only() -> bool:
    """Ask a Ray not yet imported in this process to keep a local instance on 127.0.0.1.

    Sets ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` unless the variable is set already. Returns
    False when Ray was imported before (then its own setting stands).
    """
    if "ray" in sys.modules:
        return False
    os.environ.setdefault(LOOPBACK_ENV, "0")
    return True


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise MissingDependencyError(
            "the ray engine needs Ray: pip install 'wds_cloud[ray]'"
        ) from exc
    return ray


def ensure_ray(address: str | None = None, *, num_cpus: int | None = None) -> Any:
    """Connect to Ray: ``address`` (an existing cluster, ``auto``), or the session already
    started in this process, or a new local one on 127.0.0.1 (no dashboard; see
    :func:`loopback_only`). Returns ``ray``."""
    if not address:
        loopback_only()
    ray = _import_ray()
    if ray.is_initialized():
        return ray
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(
            num_cpus=num_cpus,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
        )
    return ray


class RayEngine:
    """Runs each item as a Ray task.

    Args:
        address: Ray cluster address (``ray://host:10001``, ``auto``); None: the session this
            process already has, or a local Ray started on 127.0.0.1.
        max_retries: times Ray reruns a task whose worker died (SIGKILL, OOM, node loss).
        num_cpus: CPUs of a local Ray started here (None: all).
        in_flight: most tasks submitted at once (None: twice the cluster's CPUs), so a job of
            a million shards does not hold a million task specs in the object store.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        max_retries: int = 3,
        num_cpus: int | None = None,
        in_flight: int | None = None,
    ) -> None:
        if max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0, got {max_retries}")
        self.address = address or env_str("WDS_CLOUD_RAY_ADDRESS", None)
        self.max_retries = max_retries
        self.num_cpus = num_cpus
        self.in_flight = in_flight

    def run(
        self, fn: Callable[[Any, Any], Any], items: Sequence[Any], shared: Any
    ) -> Iterator[Outcome]:
        ray = ensure_ray(self.address, num_cpus=self.num_cpus)
        remote = ray.remote(num_cpus=1, max_retries=self.max_retries)(fn)
        shared_ref = ray.put(shared)
        window = self.in_flight or max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        pending: dict[Any, int] = {}
        queue = iter(enumerate(items))

        def submit() -> bool:
            nxt = next(queue, None)
            if nxt is None:
                return False
            pending[remote.remote(nxt[1], shared_ref)] = nxt[0]
            return True

        while len(pending) < window and submit():
            pass
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                i = pending.pop(ref)
                try:
                    yield i, ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.as_instanceof_cause()
                    yield i, getattr(cause, "cause", None) or cause
                except Exception as exc:  # worker crashed past max_retries, and the like
                    yield i, exc
                submit()


def make_engine(engine: str | Engine = "local", *, address: str | None = None, **kw: Any) -> Any:
    """``"local"`` or ``"ray"`` (or an engine object, returned as is)."""
    if not isinstance(engine, str):
        return engine
    if engine == "local":
        if address:
            raise ConfigError("--address is for the ray engine; the local engine takes none")
        return LocalEngine(**kw)
    if engine == "ray":
        return RayEngine(address, **kw)
    raise ConfigError(f"unknown engine {engine!r}; use 'local' or 'ray'")


__all__ = ["Engine", "LocalEngine", "RayEngine", "ensure_ray", "make_engine"]
