"""Bookkeeping stages: ``info``, ``log_keys``, ``associate``, ``non_empty``, ``check_empty``,
and the ``repeatedly`` generator (webdataset 1.0.2 names; re-exported by ``core.stages``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

from wds_cloud.core.curry import pipelinefilter
from wds_cloud.core.stagekind import stage_kind
from wds_cloud.errors import ConfigError


@stage_kind("stream")
def _info(
    data: Iterable[Any],
    fmt: str | None = None,
    n: int = 3,
    every: int = -1,
    width: int = 50,
    stream: TextIO | None = None,
    name: str = "",
) -> Iterator[Any]:
    """Print the first ``n`` samples (and every ``every``-th) to ``stream`` (default stderr)."""
    for i, sample in enumerate(data):
        if i < n or (every > 0 and (i + 1) % every == 0):
            out = sys.stderr if stream is None else stream
            if fmt is None:
                print("---", name, file=out)
                for k, v in sample.items():
                    print(k, repr(v)[:width], file=out)
            else:
                print(fmt.format(**sample), file=out)
        yield sample


@stage_kind("stream")
def _associate(
    data: Iterable[Any], associator: Callable[[str], dict[str, Any]] | dict[str, dict[str, Any]]
) -> Iterator[Any]:
    """Merge ``associator(sample["__key__"])`` (or ``associator[key]``, default ``{}``) into
    each sample, in place."""
    call = callable(associator)
    for sample in data:
        key = sample["__key__"]
        extra = associator(key) if call else associator.get(key, {})  # type: ignore[operator,union-attr]
        sample.update(extra)
        yield sample


@stage_kind("stream")
def _log_keys(data: Iterable[Any], logfile: str | None = None) -> Iterator[Any]:
    """Append ``index, __worker__, __rank__, __key__`` lines to ``logfile`` (locked)."""
    if not logfile:
        yield from data
        return
    import fcntl

    with open(logfile, "a") as stream:
        for i, sample in enumerate(data):
            line = (
                f"{i}\t{sample.get('__worker__')}\t{sample.get('__rank__')}\t"
                f"{sample.get('__key__')}\n"
            )
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX)
            try:
                stream.write(line)
                stream.flush()
            finally:
                fcntl.flock(stream.fileno(), fcntl.LOCK_UN)
            yield sample


@stage_kind("passthrough")
def non_empty(src: Iterable[Any]) -> Iterator[Any]:
    """Pass items through; raise if there were none.

    Raises:
        ConfigError: the source yielded nothing.
    """
    count = 0
    for s in src:
        yield s
        count += 1
    if count == 0:
        raise ConfigError("pipeline stage received no items (non_empty)")


class ShardTally:
    """A stage that counts the shards reaching this reader in the current pass.

    :class:`~wds_cloud.core.compat.WebDataset` puts one after its shard splitters and hands it
    to :func:`check_empty`, which then tells a surplus DataLoader worker (no shard, by design)
    from a reader whose shards produced nothing.
    """

    def __init__(self) -> None:
        self.count: int | None = None

    def run(self, src: Iterable[Any]) -> Iterator[Any]:
        self.count = 0
        for shard in src:
            self.count += 1
            yield shard


@stage_kind("passthrough")
def check_empty(src: Iterable[Any], tally: ShardTally | None = None) -> Iterator[Any]:
    """Pass samples through; raise a clear error if this reader produced none.

    Args:
        src: the samples.
        tally: the shard count of this reader; a DataLoader worker other than worker 0 that
            received no shard at all (more workers than shards) ends quietly instead.

    Raises:
        ConfigError: no samples, naming this reader's rank and worker.
    """
    source = iter(src)
    for first in source:  # at most one turn: then the rest is delegated without counting
        yield first
        yield from source
        return
    from wds_cloud.core.shards import worker_info

    rank, world, worker, nworkers = worker_info()
    if tally is not None and tally.count == 0 and worker > 0:
        return  # a surplus worker: split_by_worker warned in worker 0
    if tally is not None and getattr(tally, "resumed", False):
        return  # resumed mid-epoch: this reader may have had nothing left, or only filtered
    raise ConfigError(
        f"no samples found (rank {rank} of {world}, worker {worker} of {nworkers}); the "
        "shards may be empty, every sample may have been skipped by the handler, or this "
        "reader got no shards"
    )


def guess_batchsize(batch: Any) -> int:
    """Length of the first field of a batch (used by :func:`repeatedly`)."""
    return len(batch[0])


def repeatedly(
    source: Iterable[Any],
    nepochs: int | None = None,
    nbatches: int | None = None,
    nsamples: int | None = None,
    batchsize: Callable[[Any], int] = guess_batchsize,
) -> Iterator[Any]:
    """Iterate ``source`` again and again, up to ``nepochs`` passes / ``nbatches`` items /
    ``nsamples`` samples (counted with ``batchsize``). Stops if a pass yields nothing."""
    epoch = batch = total = 0
    while True:
        count = 0
        for sample in source:
            yield sample
            count += 1
            batch += 1
            if nbatches is not None and batch >= nbatches:
                return
            if nsamples is not None:
                total += batchsize(sample)
                if total >= nsamples:
                    return
        epoch += 1
        if count == 0 or (nepochs is not None and epoch >= nepochs):
            return


info = pipelinefilter(_info)
associate = pipelinefilter(_associate)
log_keys = pipelinefilter(_log_keys)
