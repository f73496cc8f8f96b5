"""Buffer shuffle, detshuffle and the batching stages."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest

from wds_cloud.core import batching
from wds_cloud.core.handlers import ContinueHandler
from wds_cloud.core.shuffle import buffer_shuffle, detshuffle, shuffle, stable_seed
from wds_cloud.errors import SampleError


@pytest.mark.parametrize("n,bufsize,initial", [(0, 10, 5), (7, 10, 5), (1000, 100, 10), (50, 1, 1)])
def test_shuffle_is_a_permutation(n, bufsize, initial):
    out = list(shuffle(bufsize, initial, seed=1)(iter(range(n))))
    assert sorted(out) == list(range(n))


def test_shuffle_seeded_reproducible_and_actually_shuffles():
    a = list(shuffle(100, seed=5)(iter(range(1000))))
    b = list(shuffle(100, seed=5)(iter(range(1000))))
    c = list(shuffle(100, seed=6)(iter(range(1000))))
    assert a == b and a != c and a != list(range(1000))
    rng = random.Random(5)
    assert list(shuffle(100, rng=rng)(iter(range(1000)))) == a
    with pytest.raises(ValueError):
        list(shuffle(10, rng=random.Random(), seed=1)(iter(range(3))))


def test_shuffle_first_output_waits_for_initial():
    seen = []

    def src():
        for i in range(50):
            seen.append(i)
            yield i

    it = shuffle(20, initial=10, seed=0)(src())
    next(it)
    assert len(seen) == 10


def test_shuffle_mixes_beyond_initial():
    # with a full buffer, an item can travel far from its original position
    out = list(shuffle(200, initial=200, seed=0)(iter(range(2000))))
    displacement = max(abs(i - v) for i, v in enumerate(out))
    assert displacement > 150


def test_stable_seed_is_stable():
    assert stable_seed(1, "a", 2) == stable_seed(1, "a", 2)
    assert stable_seed(1, 2) != stable_seed(2, 1)


def test_detshuffle_epochs():
    stage = detshuffle(50, 10, seed=3)
    e0 = list(stage.run(iter(range(200))))
    e1 = list(stage.run(iter(range(200))))
    assert sorted(e0) == sorted(e1) == list(range(200)) and e0 != e1
    assert stage.epoch == 1
    again = detshuffle(50, 10, seed=3)
    again.set_epoch(1)
    assert list(again.run(iter(range(200)))) == e1
    assert list(pickle.loads(pickle.dumps(stage)).run(iter(range(200)))) != e1  # epoch 2


def test_buffer_shuffle_small_buffer_passthrough():
    assert list(buffer_shuffle(iter(range(5)), 1, 1, random.Random(0))) == list(range(5))


def test_batched_default_collation_tuples_and_dicts():
    data = [(np.ones(3) * i, i, f"s{i}") for i in range(5)]
    out = list(batching.batched(2)(iter(data)))
    assert len(out) == 3
    img, cls, txt = out[0]
    assert img.shape == (2, 3) and list(cls) == [0, 1] and txt == ["s0", "s1"]
    assert out[2][0].shape == (1, 3)
    out = list(batching.batched(2, partial=False)(iter(data)))
    assert len(out) == 2
    dicts = [{"a": i, "b": "x"} for i in range(4)]
    out = list(batching.batched(4)(iter(dicts)))
    assert list(out[0]["a"]) == [0, 1, 2, 3] and out[0]["b"] == ["x"] * 4


def test_batched_collation_errors_and_handler():
    data = [{"a": 1}, {"b": 2}, {"a": 3}, {"a": 4}]
    with pytest.raises(SampleError):
        list(batching.batched(2)(iter(data)))
    h = ContinueHandler()
    out = list(batching.batched(2, handler=h)(iter(data)))
    assert len(out) == 1 and list(out[0]["a"]) == [3, 4] and h.count == 1
    with pytest.raises(ValueError):
        list(batching.batched(0)(iter(data)))


def test_listed_unlisted_partial():
    assert list(batching.listed(3)(iter(range(7)))) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(batching.listed(3, partial=False)(iter(range(7)))) == [[0, 1, 2], [3, 4, 5]]
    assert list(batching.unlisted()(iter([[1, 2], [3]]))) == [1, 2, 3]
    with pytest.raises(SampleError):
        list(batching.unlisted()(iter([(1, 2)])))


def test_unbatched_roundtrip():
    data = [(np.ones(2) * i, i) for i in range(5)]
    back = list(batching.unbatched()(batching.batched(2)(iter(data))))
    assert len(back) == 5 and all(int(c) == i for i, (_, c) in enumerate(back))
    dicts = list(batching.unbatched()(iter([{"a": [1, 2], "b": ["x", "y"]}])))
    assert dicts == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    with pytest.raises(SampleError, match="differ"):
        list(batching.unbatched()(iter([{"a": [1, 2], "b": ["x"]}])))
    with pytest.raises(SampleError, match="differ"):
        list(batching.unbatched()(iter([([1, 2], [3])])))
    with pytest.raises(SampleError, match="unknown"):
        list(batching.unbatched()(iter([5])))


def test_batching_stages_pickle():
    for stage in (batching.batched(4), batching.listed(2), batching.unbatched(), shuffle(10)):
        clone = pickle.loads(pickle.dumps(stage))
        assert clone.f is stage.f
