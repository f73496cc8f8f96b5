"""``fast_convert`` (the WebLoader's per-item conversion with batch_size=None) against torch's
``default_convert`` on thousands of generated nested values: same types, same structure, same
tensors."""

from __future__ import annotations

import random
from collections import OrderedDict, namedtuple
from typing import Any

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from torch.utils.data import default_convert  # noqa: E402

from wds_cloud.pytorch.loader import WebLoader, fast_convert  # noqa: E402

Pair = namedtuple("Pair", "a b")


class Tagged(list):  # a list subclass: default_convert keeps its type
    pass


def _leaf(rng: random.Random) -> Any:
    kind = rng.randrange(9)
    if kind == 0:
        return rng.randbytes(rng.randint(0, 20))
    if kind == 1:
        return "".join(rng.choice("abc.") for _ in range(rng.randint(0, 6)))
    if kind == 2:
        return rng.randint(-(10**6), 10**6)
    if kind == 3:
        return rng.random()
    if kind == 4:
        return rng.choice([True, False, None])
    if kind == 5:
        return np.arange(rng.randint(0, 5), dtype=rng.choice(["int64", "float32", "uint8"]))
    if kind == 6:
        return np.float64(rng.random())
    if kind == 7:
        return torch.arange(rng.randint(0, 4))
    return np.array(["a", "b"])  # a string array: default_convert leaves it


def _value(rng: random.Random, depth: int = 0) -> Any:
    if depth > 3 or rng.random() < 0.3:
        return _leaf(rng)
    n = rng.randint(0, 6)
    kind = rng.randrange(6)
    items = [_value(rng, depth + 1) for _ in range(n)]
    if kind == 0:
        return items
    if kind == 1:
        return tuple(items)
    if kind == 2:
        return {f"k{i}": v for i, v in enumerate(items)}
    if kind == 3:
        return Pair(_value(rng, depth + 1), _value(rng, depth + 1))
    if kind == 4:
        return OrderedDict((f"k{i}", v) for i, v in enumerate(items))
    return Tagged(items)


def _same(a: Any, b: Any) -> None:
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        assert a == b or (a != a and b != b)


@pytest.mark.parametrize("seed", range(3))
def test_same_as_default_convert(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(1500):
        value = _value(rng)
        _same(fast_convert(value), default_convert(value))


def test_batch_of_bytes_takes_the_shortcut_and_stays_equal() -> None:
    batch = ([b"x" * 10] * 64, (b"3",) * 64)
    out = fast_convert(batch)
    assert out == default_convert(batch) == [list(batch[0]), list(batch[1])]


def test_webloader_uses_it_only_in_place_of_default_convert() -> None:
    assert WebLoader(list(range(4)), batch_size=None).loader.collate_fn is fast_convert
    mine = WebLoader(list(range(4)), batch_size=None, collate_fn=len)
    assert mine.loader.collate_fn is len
    batched = WebLoader(list(range(4)), batch_size=2)
    assert batched.loader.collate_fn is not fast_convert
