"""``make_loader(plan)``: a data plan over real local shards (indexed), read by DataLoader
workers; batch composition by source, resume mid-epoch in process, and bad input."""

from __future__ import annotations

import io
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.resume.mixplan_rank import write_sources
from wds_cloud.errors import ConfigError, SampleError


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Three indexed sources of 200, 300 and 77 samples (keys ``sNNN/kNNNNN``)."""
    return write_sources(tmp_path_factory.mktemp("mixsources"))


def loader(plan: wds.DataPlan, workers: int = 2, **kw: Any) -> Any:
    return wds.make_loader(
        plan,
        batch_size=64,
        num_workers=workers,
        to_tuple=("txt", "__source__"),
        map=lambda s: (f"{s[1]}:{s[0].decode()}", s[1]),
        collate=list,
        **kw,
    )


def test_stratified_loader_batches_hold_each_source_in_proportion(sources: dict) -> None:
    plan = wds.mix(sources, weights=[0.5, 0.3, 0.2], batching="stratified", seed=1)
    ld = loader(plan)
    assert len(ld) == -(-577 // 64)
    for _ in range(2):  # two epochs
        ids: Counter[str] = Counter()
        batches = list(ld)
        for batch in batches[:-1]:
            per = Counter(src for _, src in batch)
            assert len(batch) == 64
            for name, w in zip("abc", (0.5, 0.3, 0.2), strict=True):
                assert abs(per[name] - 64 * w) < 1, per
        ids.update(sid for batch in batches for sid, _ in batch)
        per_source = Counter(sid.split(":")[0] for sid in ids.elements())
        assert dict(per_source) == dict(zip("abc", plan.quotas([200, 300, 77]), strict=True))


def test_resume_mid_epoch_in_process(sources: dict) -> None:
    plan = wds.mix(sources, counts=[120, 90, 60], batching="random", seed=2)
    first = loader(plan)
    whole = [sid for batch in first for sid, _ in batch]
    ld = loader(plan)
    before = []
    for step, batch in enumerate(ld, 1):
        before += [sid for sid, _ in batch]
        if step == 2:
            break
    state = ld.state_dict()
    again = loader(plan, workers=1)
    again.load_state_dict(state)
    rest = [sid for batch in again for sid, _ in batch]
    assert before + rest == whole  # the same order, nothing repeated or lost
    assert again.state_dict()["epoch"] == 1


def test_per_stream_batches_are_one_source(sources: dict) -> None:
    plan = wds.mix(sources, repeat=[1, 1, 1], batching="per_stream", seed=3)
    for batch in loader(plan, workers=0):
        assert len({src for _, src in batch}) == 1


def test_choose_over_a_source_size_names_it(sources: dict) -> None:
    plan = wds.mix(sources, choose={"a": 10, "b": 10, "c": 78})
    with pytest.raises(ConfigError, match=r"source 'c': choose=78 but it has 77 samples"):
        loader(plan)


def test_streaming_options_are_refused_with_a_plan(sources: dict) -> None:
    plan = wds.mix(sources)
    with pytest.raises(ConfigError, match="epoch_size, resampled, inner_batch, order and"):
        loader(plan, epoch_size=10)
    with pytest.raises(ConfigError, match="executor='threads' do not apply"):
        loader(plan, executor="threads")


def other_fields(root: Path) -> list[str]:
    """An indexed source whose samples have ``.jpg`` and ``.json`` (no ``.txt``)."""
    path = root / "odd-000.tar"
    with tarfile.open(path, "w") as tar:
        for i in range(20):
            for ext, data in (("jpg", b"\xff\xd8"), ("json", b"{}")):
                info = tarfile.TarInfo(f"odd/k{i:03d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    wds.build_index([str(path)], json=None)
    return [str(path)]


def test_incompatible_fields_under_stratified_name_source_shard_and_key(
    sources: dict, tmp_path: Path
) -> None:
    plan = wds.mix(
        {"a": sources["a"], "odd": other_fields(tmp_path)}, weights=[1, 1], batching="stratified"
    )
    ld = wds.make_loader(plan, batch_size=8, num_workers=0, collate=list)
    with pytest.raises(SampleError) as err:
        next(iter(ld))
    text = str(err.value)
    assert "mixes incompatible samples" in text and "per_stream" in text
    assert "'odd'" in text and "'a'" in text  # both sources
    assert "odd-000.tar" in text or "shard-0" in text  # a shard
    assert "key=" in text
    # the same sources one batch each are fine
    plan = wds.mix(
        {"a": sources["a"], "odd": other_fields(tmp_path)}, weights=[1, 1], batching="per_stream"
    )
    assert next(iter(wds.make_loader(plan, batch_size=8, num_workers=0, collate=list)))


def test_unindexed_sources_are_named_or_indexed_with_build_missing(tmp_path: Path) -> None:
    from tests.resume.helpers import write_shards
    from wds_cloud.errors import ShardNotFoundError

    urls, keys = write_shards(tmp_path, 2, 10)
    plan = wds.mix({"plain": urls}, batching="random", seed=1)
    with pytest.raises(ShardNotFoundError, match="shard-000"):
        wds.make_loader(plan, batch_size=4, num_workers=0)
    ld = wds.make_loader(plan, batch_size=4, num_workers=0, build_missing=True, collate=list)
    assert sorted(s["__key__"] for batch in ld for s in batch) == sorted(keys)
    assert all(Path(u[: -len(".tar")] + ".idx").exists() for u in urls)


def test_rank_and_world_split_the_batches(sources: dict) -> None:
    plan = wds.mix(sources, counts=[64, 64, 64], batching="stratified", seed=4)
    whole = [sid for batch in loader(plan, workers=0) for sid, _ in batch]
    parts = [
        [sid for batch in loader(plan, workers=0, rank=r, world=2) for sid, _ in batch]
        for r in range(2)
    ]
    assert [len(p) for p in parts] == [128, 64]  # 3 batches: rank 0 gets the odd one
    assert sorted(parts[0] + parts[1]) == sorted(whole)


def test_a_plan_loader_can_be_profiled(sources: dict) -> None:
    plan = wds.mix(sources, counts=[64, 64, 64], batching="random", seed=4)
    ld = loader(plan, profile=True)
    assert sum(len(b) for b in ld) == 192
    report = ld.profile_report()
    assert any(p.role.startswith("worker") and "batch read" in p.timers for p in report.processes)
