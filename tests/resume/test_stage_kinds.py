"""Stages declare their tracking kind (``wds.stage_kind``); resume reads them from its plan.

A stage of your own with a declared kind resumes exactly; one that declares none is trusted
only as a map or a filter passing its inputs on: as soon as it yields a new item right after
pulling several inputs (it groups or buffers), ``state_dict()`` refuses, naming it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.resume.helpers import assert_exactly_once, key_of, run_interrupted, write_shards
from wds_cloud.errors import ConfigError
from wds_cloud.resume.plan import Level, Plan, Step, build


@pytest.fixture
def shards(tmp_path: Path) -> tuple[list[str], list[str]]:
    return write_shards(tmp_path, 4, 25)


def _threes(src: Iterable[Any]) -> Iterator[list[Any]]:
    """Group samples into lists of three (a stage of one's own, declaring no kind)."""
    group: list[Any] = []
    for sample in src:
        group.append(sample)
        if len(group) == 3:
            yield group
            group = []
    if group:
        yield group


@wds.stage_kind("batch", lazy=True)
def threes(src: Iterable[Any]) -> Iterator[list[Any]]:
    """The same, declared."""
    yield from _threes(src)


@wds.stage_kind("identity")
class Reversed:
    """Hands out every ``n`` samples in reverse order (the same objects, later)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def run(self, src: Iterable[Any]) -> Iterator[Any]:
        held: list[Any] = []
        for sample in src:
            held.append(sample)
            if len(held) == self.n:
                yield from reversed(held)
                held = []
        yield from reversed(held)


def test_a_declared_batch_stage_resumes_exactly(shards: tuple[list[str], list[str]]) -> None:
    """Its groups are split again by ``unlisted``: each row must stand for its own sample (as a
    stream stage, the first row of a group would stand for all three, and a state taken after
    it would lose the other two)."""
    urls, keys = shards

    def make() -> wds.DataPipeline:
        return wds.WebDataset(urls, shardshuffle=True, seed=5).shuffle(7).compose(threes).unlisted()

    delivered, _ = run_interrupted(make, [10, 11, 20, 25])
    assert_exactly_once(delivered, keys)


def test_a_declared_identity_class_resumes_exactly(shards: tuple[list[str], list[str]]) -> None:
    urls, keys = shards

    def make() -> wds.DataPipeline:
        return wds.WebDataset(urls).compose(Reversed(4)).shuffle(3)

    delivered, _ = run_interrupted(make, [2, 9, 30, 41])
    assert_exactly_once(delivered, keys)


def test_an_undeclared_grouping_stage_is_refused_naming_it(
    shards: tuple[list[str], list[str]],
) -> None:
    urls, _ = shards
    ds = wds.WebDataset(urls).compose(_threes).unlisted()
    state = ds.state_dict()  # before the first group: nothing is tied to a group yet
    assert state["delivered"] == 0
    items = iter(ds)
    next(items)
    with pytest.raises(
        ConfigError, match=r"stage 6 \(_threes\) of WebDataset declares no tracking kind"
    ):
        ds.state_dict()
    assert len(list(items)) == len(shards[1]) - 1  # it iterates as before, untouched


def test_an_undeclared_filter_passing_its_inputs_on_resumes_exactly(
    shards: tuple[list[str], list[str]],
) -> None:
    """A generator that drops samples and yields the others themselves is a filter: a dropped
    sample counts as delivered with the next one that passes, as for a declared ``stream``."""
    urls, keys = shards
    kept = [k for k in keys if not k.endswith("3")]

    def odd_out(src: Iterable[Any]) -> Iterator[Any]:
        for sample in src:
            if not sample["__key__"].endswith("3"):
                yield sample

    delivered, _ = run_interrupted(lambda: wds.WebDataset(urls).compose(odd_out), [3, 4, 40])
    assert_exactly_once(delivered, kept)


def test_an_undeclared_filter_that_makes_new_items_is_refused_until_declared(
    shards: tuple[list[str], list[str]],
) -> None:
    """Dropping samples and yielding new objects looks like grouping from outside: refused
    until it declares ``stream``."""
    urls, keys = shards
    kept = [k for k in keys if not k.endswith("3")]

    def odd_out_copied(src: Iterable[Any]) -> Iterator[Any]:
        for sample in src:
            if not sample["__key__"].endswith("3"):
                yield dict(sample)

    ds = wds.WebDataset(urls).compose(odd_out_copied)
    items = iter(ds)
    for _ in range(5):  # past k00003
        next(items)
    with pytest.raises(
        ConfigError, match=r"odd_out_copied\) of WebDataset declares no tracking kind"
    ):
        ds.state_dict()
    declared = wds.stage_kind("stream")(odd_out_copied)
    delivered, _ = run_interrupted(lambda: wds.WebDataset(urls).compose(declared), [3, 4, 40])
    assert_exactly_once(delivered, kept)


def test_an_undeclared_one_to_one_stage_resumes_as_before(
    shards: tuple[list[str], list[str]],
) -> None:
    urls, keys = shards

    def tagged(src: Iterable[Any]) -> Iterator[Any]:
        for sample in src:
            yield {**sample, "seen": True}

    def make() -> wds.DataPipeline:
        return wds.WebDataset(urls).shuffle(5).compose(tagged).batched(4).unbatched()

    delivered, _ = run_interrupted(make, [5, 6, 50], keys_of=lambda s: [key_of(s)])
    assert_exactly_once(delivered, keys)


def test_an_undeclared_grouping_stage_in_loader_workers_is_refused(
    shards: tuple[list[str], list[str]],
) -> None:
    """The workers' watch crosses to the main process with the tagged batches."""
    urls, _ = shards
    dataset = wds.WebDataset(urls).compose(_threes).unlisted().batched(2)
    loader = wds.WebLoader(dataset, batch_size=None, num_workers=2)
    batches = iter(loader)
    next(batches), next(batches)
    with pytest.raises(
        ConfigError, match=r"WebLoader cannot be resumed: stage 6 \(_threes\) of WebDataset"
    ):
        loader.state_dict()


def test_stage_kind_refuses_unknown_kinds() -> None:
    typo: Any = "batches"
    with pytest.raises(ConfigError, match=r"unknown kind 'batches'.*stream, batch, unbatch"):
        wds.stage_kind(typo)
    with pytest.raises(ConfigError, match="'identity' stage cannot be lazy"):
        wds.stage_kind("identity", lazy=True)


def test_the_plan_of_a_loader_pipeline(shards: tuple[list[str], list[str]]) -> None:
    urls, _ = shards

    def mine(src: Iterable[Any]) -> Iterator[Any]:
        yield from src

    ds = (
        wds.WebDataset(urls, shardshuffle=True, seed=1)
        .shuffle(10)
        .decode()
        .compose(mine)
        .to_tuple("txt", "cls")
        .batched(4)
    )
    loader = wds.WebLoader(ds, batch_size=None).unbatched().shuffle(5).batched(8)
    of_ds: dict[str, Any] = {"pipeline": "WebDataset", "stage": None}  # stage: not compared
    of_loader: dict[str, Any] = {"pipeline": "WebLoader", "stage": None}
    reader = Level(
        pipeline=ds,
        name="WebDataset",
        tracked=True,
        windowed=False,
        reads="shards",
        steps=(
            Step(index=6, name="check_empty", kind="passthrough", lazy=False, **of_ds),
            Step(index=7, name="_shuffle", kind="identity", lazy=False, **of_ds),
            Step(index=8, name="_decode", kind="stream", lazy=False, **of_ds),
            Step(index=9, name=mine.__qualname__, kind=None, lazy=False, **of_ds),
            Step(index=10, name="_to_tuple", kind="stream", lazy=True, **of_ds),
            Step(index=11, name="_batched", kind="batch", lazy=True, **of_ds),
        ),
    )
    top = Level(
        pipeline=loader,
        name="WebLoader",
        tracked=True,
        windowed=False,
        reads="loader",
        steps=(
            Step(index=1, name="_unbatched", kind="unbatch", lazy=False, **of_loader),
            Step(index=2, name="_shuffle", kind="identity", lazy=False, **of_loader),
            Step(index=3, name="_batched", kind="batch", lazy=True, **of_loader),
        ),
        below=reader,
    )
    plan = build(loader)
    assert plan == Plan(top=top, mode="pass", reader=reader, loader=top)
    assert plan.reader is not None and plan.reader.pipeline is ds
    assert plan.top.loader is loader.pipeline[0] and plan.reader.source is not None
    assert [s.stage for s in plan.top.steps] == loader.pipeline[1:]


def test_the_plan_says_how_windows_and_mixes_are_read(
    shards: tuple[list[str], list[str]],
) -> None:
    urls, _ = shards
    nested = wds.DataPipeline(wds.WebDataset(urls).with_epoch(10)).batched(2)
    plan = build(nested)
    assert plan.mode == "nested" and [v.name for v in plan.window] == ["DataPipeline", "WebDataset"]
    assert build(wds.DataPipeline(wds.WebDataset(urls).with_epoch(10)).shuffle(2)).mode == "off"
    mixed = wds.DataPipeline(wds.RandomMix([wds.WebDataset(urls)] * 2, seed=1)).shuffle(3)
    plan = build(mixed)
    assert plan.mode == "mix" and plan.mix is not None
    assert (
        not plan.mix.lazy and plan.mix.loader is None and plan.mix.mix.names == ("WebDataset",) * 2
    )
