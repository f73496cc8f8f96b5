"""The one handler loop (``core.handlers.handled``) as every per-sample stage uses it.

For each stage a sample that makes it fail sits in the middle of good ones: a continuing
handler skips exactly that sample (and counts it), a stopping handler ends the stream there,
and the default re-raises the stage's own error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from wds_cloud.core import stages
from wds_cloud.core.decode import decode
from wds_cloud.core.handlers import ContinueHandler, StopHandler, handled


def good(i: int) -> dict[str, Any]:
    return {"__key__": f"k{i}", "txt": b"%d" % i, "cls": i, "jpg": b"j"}


BAD: dict[str, Any] = {"__key__": "bad", "cls": "x"}  # no txt/jpg, cls not a number

STAGES: dict[str, Callable[..., Any]] = {
    "map": lambda h: stages.map(lambda s: {"n": 10 // s["cls"]}, handler=h),
    "map_dict": lambda h: stages.map_dict(cls=lambda c: c + 1, handler=h),
    "map_tuple": lambda h: stages.map_tuple(lambda c: c + 1, handler=h),
    "to_tuple": lambda h: stages.to_tuple("txt", handler=h),
    "rename": lambda h: stages.rename(text="txt", handler=h),
    "rename_keys": lambda h: stages.rename_keys(text="txt", handler=h),
    "extract_keys": lambda h: stages.extract_keys("txt", handler=h),
    "decode": lambda h: decode(handler=h),
}


def inputs(name: str) -> list[Any]:
    data = [good(1), good(2), BAD, good(3)]
    if name == "map_tuple":
        return [(s["cls"],) for s in data]
    if name == "rename_keys":
        return [{k: v for k, v in s.items() if k != "__key__"} for s in data]
    if name == "decode":
        data = [{"__key__": s["__key__"], "txt": s["txt"]} for s in data if s is not BAD]
        data.insert(2, {"__key__": "bad", "json": b"{not json"})
    return data


@pytest.mark.parametrize("name", sorted(STAGES))
def test_continue_skips_only_the_failing_sample(name: str) -> None:
    h = ContinueHandler()
    out = list(STAGES[name](h)(iter(inputs(name))))
    assert len(out) == 3 and h.count == 1
    assert isinstance(h.last, Exception)


@pytest.mark.parametrize("name", sorted(STAGES))
def test_stop_ends_the_stream_at_the_failing_sample(name: str) -> None:
    h = StopHandler()
    out = list(STAGES[name](h)(iter(inputs(name))))
    assert len(out) == 2 and h.count == 1


@pytest.mark.parametrize("name", sorted(STAGES))
def test_default_reraises(name: str) -> None:
    with pytest.raises(Exception) as info:
        list(STAGES[name](stages.reraise_exception)(iter(inputs(name))))
    assert not isinstance(info.value, StopIteration)


def test_handled_drop_none_and_stop() -> None:
    h = ContinueHandler()
    f = lambda x: None if x == 2 else 10 // x  # noqa: E731
    assert list(handled([1, 2, 0, 5], f, h, drop_none=True)) == [10, 2]
    assert list(handled([1, 2, 5], f, h)) == [10, None, 2]
    assert list(handled([1, 0, 5], f, StopHandler())) == [10]
