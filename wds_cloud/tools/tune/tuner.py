"""``tune(urls, ...)``: the search of :mod:`.search` over ``make_loader`` (the CLI's
``wds-cloud tune``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wds_cloud.tools.tune.plan import run
from wds_cloud.tools.tune.result import TuneResult

__all__ = ["tune"]


def tune(
    urls: Any,
    *,
    batch_size: int,
    seconds: float = 60.0,
    memory_budget: int | str | None = None,
    trial_seconds: float | None = None,
    cores: int | None = None,
    progress: Callable[[str], Any] | None = None,
    **loader_kw: Any,
) -> TuneResult:
    """Find the fastest ``make_loader`` setting for these shards and this pipeline.

    Searches ``num_workers``, ``prefetch_factor``, ``inner_batch``, ``shm_batches`` and, for
    remote shards, read-ahead (``registry=OpenerRegistry(readahead=)``) and parallel ranged
    reads (``prefetch=``), with short measured trials (``docs/observability.md``, "Autotune").

    Args:
        urls: shards, as ``make_loader`` takes them.
        batch_size: the loader's batch size.
        seconds: time for the whole search.
        memory_budget: bytes the process and its workers may hold (PSS), an int or text such
            as ``8GB`` / ``512MiB``; default: this process plus half the memory available.
        trial_seconds: measured seconds per trial (default ``seconds / 12``, at least 1).
        cores: CPUs to plan for (default: this machine's).
        progress: called with one line per trial.
        **loader_kw: the rest of the ``make_loader`` call (``decode``, ``to_tuple``,
            ``map``...); tuned arguments given here are kept, not searched.

    Returns:
        The chosen setting, its rate and memory, every trial; ``as_code()`` gives the call.

    Raises:
        ConfigError: bad arguments, no setting fitting the budget, a failing first trial.
    """
    from wds_cloud.pytorch.builder import make_loader

    return run(
        make_loader,
        urls,
        batch_size=batch_size,
        seconds=seconds,
        memory_budget=memory_budget,
        trial_seconds=trial_seconds,
        cores=cores,
        progress=progress,
        **loader_kw,
    )
