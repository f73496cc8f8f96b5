"""Resume in one process: WebDataset/DataPipeline state_dict()/load_state_dict()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import wds_cloud as wds
from tests.resume.helpers import (
    assert_exactly_once,
    key_of,
    keys_of_batch,
    random_stops,
    run_interrupted,
    write_shards,
)
from wds_cloud.errors import ConfigError


@pytest.fixture
def shards(tmp_path: Path) -> tuple[list[str], list[str]]:
    return write_shards(tmp_path, 6, 40)


def test_plain_in_order_three_interruptions(shards: tuple[list[str], list[str]]) -> None:
    urls, keys = shards
    delivered, states = run_interrupted(lambda: wds.WebDataset(urls), [17, 50, 1])
    assert delivered == keys  # in order, nothing lost or repeated
    assert all(len(json.dumps(s)) < 2000 for s in states)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shuffled_decoded_filtered_batched(shards: tuple[list[str], list[str]], seed: int) -> None:
    urls, keys = shards

    def make() -> wds.DataPipeline:
        return (
            wds.WebDataset(urls, shardshuffle=True, seed=seed)
            .shuffle(30)
            .decode()
            .select(lambda s: s["cls"] != 3)
            .to_tuple("txt", "cls")
            .batched(5)
            .unbatched()
            .shuffle(20)
            .batched(4)
        )

    expected = [k for k in keys if int(k[-5:]) % 7 != 3]
    delivered, states = run_interrupted(make, random_stops(seed, 3, 15), keys_of_batch)
    assert_exactly_once(delivered, expected)
    assert all(s["generation"] == i for i, s in enumerate(states))


def test_same_seed_same_sequence(shards: tuple[list[str], list[str]]) -> None:
    urls, _ = shards

    def run() -> list[str]:
        ds = wds.WebDataset(urls, shardshuffle=True, seed=5).shuffle(50).decode()
        return [key_of(s) for s in ds]

    first = run()
    assert first == run()
    other = [key_of(s) for s in wds.WebDataset(urls, shardshuffle=True, seed=6).shuffle(50)]
    assert other != first


def test_resumed_run_is_deterministic(shards: tuple[list[str], list[str]]) -> None:
    urls, _ = shards

    def make() -> wds.WebDataset:
        return wds.WebDataset(urls, shardshuffle=True, seed=5).shuffle(50).decode()

    a, _ = run_interrupted(make, [33, 70])
    b, _ = run_interrupted(make, [33, 70])
    assert a == b


def test_next_epoch_after_resumed_epoch(shards: tuple[list[str], list[str]]) -> None:
    urls, keys = shards
    ds = wds.WebDataset(urls, shardshuffle=True, seed=9).shuffle(10)
    it = iter(ds)
    for _ in range(30):
        next(it)
    state = ds.state_dict()
    epoch1 = [key_of(s) for s in ds]  # a fresh iter() starts the next epoch
    again = wds.WebDataset(urls, shardshuffle=True, seed=9).shuffle(10)
    again.load_state_dict(state)
    rest = [key_of(s) for s in again]
    assert len(rest) == len(keys) - 30
    assert [key_of(s) for s in again] == epoch1


def test_state_of_finished_epoch_starts_the_next(shards: tuple[list[str], list[str]]) -> None:
    urls, _ = shards
    ds = wds.WebDataset(urls, shardshuffle=True, seed=9)
    list(ds)
    state = ds.state_dict()
    assert state["finished"] and state["done"] == [[0, 6]] and not state["open"]
    nxt = [key_of(s) for s in ds]
    again = wds.WebDataset(urls, shardshuffle=True, seed=9)
    again.load_state_dict(state)
    assert [key_of(s) for s in again] == nxt


def test_state_of_other_shards_is_refused(shards: tuple[list[str], list[str]]) -> None:
    urls, _ = shards
    ds = wds.WebDataset(urls)
    next(iter(ds))
    state = ds.state_dict()
    other = wds.WebDataset(urls[:-1])
    other.load_state_dict(state)
    with pytest.raises(ConfigError, match="another shard list"):
        next(iter(other))
    with pytest.raises(ConfigError, match="not a wds_cloud loader state"):
        other.load_state_dict({"x": 1})


def test_unresumable_pipeline_says_why(shards: tuple[list[str], list[str]]) -> None:
    urls, _ = shards
    ds = wds.DataPipeline(wds.SimpleShardList(urls), wds.tarfile_to_samples())
    ds = ds.compose(wds.shuffle(5), wds.split_by_sample)
    with pytest.raises(ConfigError, match="split_by_sample"):
        ds.state_dict()
    ds = wds.DataPipeline(wds.WebDataset(urls).with_epoch(10)).shuffle(5)
    with pytest.raises(ConfigError, match="with_epoch"):
        ds.state_dict()


def test_user_datapipeline(shards: tuple[list[str], list[str]]) -> None:
    urls, keys = shards

    def make() -> wds.DataPipeline:
        return wds.DataPipeline(
            wds.SimpleShardList(urls),
            wds.shuffle_shards(seed=1) if hasattr(wds, "shuffle_shards") else None,
            wds.split_by_worker,
            wds.tarfile_to_samples(),
            wds.shuffle(25),
            wds.map(lambda s: (s["txt"],)),
        )

    delivered, _ = run_interrupted(make, [11, 60, 90])
    assert_exactly_once(delivered, keys)


def test_generator_stage_resumes_at_source_granularity(
    shards: tuple[list[str], list[str]],
) -> None:
    """A user generator yielding two items per sample: a source sample counts as delivered
    with its first item; resuming never repeats a source sample."""
    urls, keys = shards

    def twice(src):  # type: ignore[no-untyped-def]
        for s in src:
            yield {"txt": s["txt"], "half": 0}
            yield {"txt": s["txt"], "half": 1}

    def make() -> wds.DataPipeline:
        return wds.WebDataset(urls).compose(twice)

    delivered, _ = run_interrupted(make, [7, 20])
    firsts = []
    for k in delivered:
        if not firsts or firsts[-1] != k:
            firsts.append(k)
    assert_exactly_once(firsts, keys)


@pytest.mark.parametrize("resumable", [True, False])
def test_handlers_act_the_same_with_and_without_tracking(
    shards: tuple[list[str], list[str]], tmp_path: Path, resumable: bool
) -> None:
    # A handler that stops ends the iteration quietly; one that continues skips a shard that
    # cannot be opened or is cut short; the tracking reader must do exactly what the plain one does.
    urls, keys = shards
    good = Path(urls[0]).read_bytes()
    cut = tmp_path / "cut.tar"
    cut.write_bytes(good[: len(good) // 2])
    missing = str(tmp_path / "missing.tar")
    specs = [cut.as_posix(), missing, urls[1]]

    def keys_with(handler: object) -> list[str]:
        ds = wds.WebDataset(specs, handler=handler, empty_check=False)
        ds.resumable = resumable
        return [s["__key__"] for s in ds]

    go_on = wds.ContinueHandler()
    continued = keys_with(go_on)
    stopped = keys_with(wds.StopHandler())
    per_shard = len(keys) // 6
    assert continued[-per_shard:] == keys[per_shard : 2 * per_shard]  # the good shard, in full
    assert go_on.count == 2  # the cut shard and the missing one
    assert stopped == continued[: len(stopped)] and len(stopped) < per_shard


@pytest.mark.parametrize("value", ["0", "false", "off", "No"])
def test_tracking_switched_off_by_the_environment(
    shards: tuple[list[str], list[str]], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    urls, keys = shards
    monkeypatch.setenv("WDS_CLOUD_RESUMABLE", value)
    ds = wds.WebDataset(urls, shardshuffle=False)
    assert len(list(ds)) == len(keys)  # iterates as before
    with pytest.raises(ConfigError, match="switched off"):
        ds.state_dict()


def test_a_bad_resumable_value_is_named(
    shards: tuple[list[str], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WDS_CLOUD_RESUMABLE", "maybe")
    with pytest.raises(ConfigError, match="WDS_CLOUD_RESUMABLE='maybe' is not a boolean"):
        list(wds.WebDataset(shards[0], shardshuffle=False))
