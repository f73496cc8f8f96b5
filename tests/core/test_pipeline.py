"""DataPipeline: stage kinds, composition, epochs, length, pickling, lifetime."""

from __future__ import annotations

import pickle
import warnings

import pytest

from wds_cloud.core import stages
from wds_cloud.core.batching import batched
from wds_cloud.core.pipeline import DataPipeline
from wds_cloud.core.shards import SimpleShardList, split_by_worker
from wds_cloud.core.shuffle import shuffle
from wds_cloud.errors import ConfigError


def double(src):
    for x in src:
        yield 2 * x


class Runner:
    def __init__(self) -> None:
        self.closed = False
        self.epoch = None

    def run(self, src):
        return (x + 1 for x in src)

    def close(self) -> None:
        self.closed = True

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


class Source:
    def __iter__(self):
        return iter(range(5))


def test_stage_kinds():
    assert list(DataPipeline([[1, 2, 3]], double)) == [2, 4, 6]  # a list in a list = list source
    assert list(DataPipeline(Source(), double, Runner())) == [1, 3, 5, 7, 9]
    assert list(DataPipeline(lambda: iter([4]), None, double)) == [8]
    assert list(DataPipeline(range(3), stages.map(str))) == ["0", "1", "2"]
    assert list(DataPipeline(DataPipeline(range(2)), double)) == [0, 2]
    with pytest.raises(ConfigError, match="not a valid pipeline stage"):
        list(DataPipeline(range(3), 5))
    with pytest.raises(ConfigError, match="no stages"):
        list(DataPipeline())


def test_each_iter_runs_afresh():
    ds = DataPipeline(Source(), double)
    assert list(ds) == list(ds) == [0, 2, 4, 6, 8]


def test_compose_copies_append_mutates():
    base = DataPipeline(Source())
    composed = base.compose(double, Runner())
    assert len(base.pipeline) == 1 and len(composed.pipeline) == 3
    assert list(composed) == [1, 3, 5, 7, 9]
    base.append(double)
    assert list(base) == [0, 2, 4, 6, 8]
    assert composed.stage(1) is double


def test_with_epoch_restarts_and_caps():
    ds = DataPipeline(Source()).with_epoch(12)
    assert list(ds) == [0, 1, 2, 3, 4] * 2 + [0, 1]
    assert ds.with_epoch(nbatches=3) is ds and list(ds) == [0, 1, 2]


def test_with_epoch_empty_source_does_not_spin():
    assert list(DataPipeline([[]]).with_epoch(10)) == []


def test_with_epoch_per_rank_divides_among_workers(clean_env):
    counts = []
    for worker in range(3):
        clean_env.setenv("WORKER", str(worker))
        clean_env.setenv("NUM_WORKERS", "3")
        ds = DataPipeline(Source()).with_epoch(10, per_rank=True)
        counts.append(len(list(pickle.loads(pickle.dumps(ds)))))
    assert counts == [4, 3, 3]
    clean_env.setenv("WORKER", "2")
    clean_env.setenv("NUM_WORKERS", "4")
    assert list(DataPipeline(Source()).with_epoch(2, per_rank=True)) == []
    # default: per iterator, as webdataset
    assert len(list(DataPipeline(Source()).with_epoch(10))) == 10


def test_repeat():
    assert list(DataPipeline(Source()).repeat(2)) == [0, 1, 2, 3, 4] * 2
    assert list(DataPipeline(Source()).repeat(nbatches=7)) == [0, 1, 2, 3, 4, 0, 1]
    assert list(DataPipeline(Source()).repeat(3, 6)) == [0, 1, 2, 3, 4, 0]


def test_with_length_and_no_length():
    ds = DataPipeline(Source())
    with pytest.raises(TypeError, match="with_length"):
        len(ds)
    assert bool(ds) and list(ds) == [0, 1, 2, 3, 4]  # list() tolerates the TypeError
    with pytest.warns(UserWarning, match="does not change the number of samples"):
        assert ds.with_length(42) is ds and len(ds) == 42
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(ds.with_length(43, silent=True)) == 43  # webdataset's silent=True: no warning
    assert len(pickle.loads(pickle.dumps(ds))) == 43
    assert list(ds) == [0, 1, 2, 3, 4]  # length does not change the epoch


def test_set_epoch_close_and_context_manager():
    runner = Runner()
    with DataPipeline(Source(), runner) as ds:
        ds.set_epoch(4)
        assert runner.epoch == 4
    assert runner.closed


def test_full_pipeline_pickles_and_runs(shards, clean_env):
    from wds_cloud.core.shardopen import tarfile_to_samples

    ds = (
        DataPipeline(
            SimpleShardList(shards.pattern),
            shuffle(3, seed=1),
            split_by_worker,
            tarfile_to_samples(),
            shuffle(20, seed=2),
            stages.to_tuple("txt", "cls"),
            batched(8),
        )
        .with_epoch(11)
        .with_length(11, silent=True)
    )
    clone = pickle.loads(pickle.dumps(ds))
    out = list(clone)
    assert len(out) == 11 == len(clone)
    assert list(out[0][1]) and len(out[0][0]) == 8


def test_repr_lists_stages():
    assert "double" in repr(DataPipeline(Source(), double))
