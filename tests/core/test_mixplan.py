"""Data plans (``wds.mix`` / ``DataPlan``): quotas, batch composition, determinism, the YAML
form and bad input. Pure: no torch, no shards (the order over shards is in
``test_mixplan_order.py``, the loader in ``test_mixplan_loader.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import wds_cloud as wds
from wds_cloud.core.mixplan import BATCHINGS, DataPlan, compose_step
from wds_cloud.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def epoch_batches(plan: DataPlan, sizes: list[int], size: int, world: int, epoch: int = 0):
    """Every batch's composition of one epoch, step by step."""
    quotas = plan.quotas(sizes)
    done, batch, out = [0] * len(sizes), 0, []
    while sum(done) < sum(quotas):
        takes = compose_step(
            plan.batching, size, quotas, done, batch, world, plan.seed, epoch, plan.shares(quotas)
        )
        assert 1 <= len(takes) <= world
        for take in takes:
            out.append(take)
            done = [d + t for d, t in zip(done, take, strict=True)]
        batch += len(takes)
    assert done == quotas  # every quota spent exactly, nothing over
    return out


def test_mix_is_the_webdataset_module_and_makes_plans() -> None:
    plan = wds.mix({"a": "a-{0..3}.tar", "b": "b.tar"}, weights=[3, 1], seed=2)
    assert isinstance(plan, wds.DataPlan) and plan.names == ["a", "b"]
    assert wds.mix.RandomMix is wds.RandomMix  # webdataset's wds.mix module still works
    assert plan.quotas([100, 300]) == [300, 100]  # epoch = all samples, split 3:1


def test_import_does_not_pull_torch() -> None:
    code = "import sys, wds_cloud as w; w.mix({'a': 'x.tar'}); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("batching", BATCHINGS)
def test_every_batching_spends_the_exact_counts(batching: str) -> None:
    plan = DataPlan(
        {"a": "a", "b": "b", "c": "c"},
        counts={"a": 384},
        choose={"b": 230},
        repeat={"c": 2},
        batching=batching,
        seed=5,
    )
    assert plan.quotas([200, 300, 77]) == [384, 230, 154]
    batches = epoch_batches(plan, [200, 300, 77], 64, 3)
    assert all(sum(b) <= 64 for b in batches)
    if batching in ("per_stream", "per_device"):
        assert all(sum(1 for t in b if t) == 1 for b in batches)  # one source a batch
    else:
        assert all(sum(b) == 64 for b in batches[:-1])


def test_stratified_batches_are_exact_to_one_sample() -> None:
    weights = [0.5, 0.3, 0.2]
    plan = DataPlan({"a": 1, "b": 2, "c": 3}, weights=weights, batching="stratified", seed=9)
    sizes = [1000, 1000, 1000]
    for epoch in range(3):
        batches = epoch_batches(plan, sizes, 64, 4, epoch)
        assert len(batches) == -(-3000 // 64)
        for take in batches[:-1]:  # every full batch
            assert sum(take) == 64
            assert all(abs(t - 64 * w) < 1 for t, w in zip(take, weights, strict=True)), take
    # the remainder rotates: source b (19.2 a batch) and c (12.8) each get the extra sample
    assert {tuple(b) for b in batches[:-1]} == {(32, 20, 12), (32, 19, 13)}


def test_stratified_with_odd_batches_and_many_sources() -> None:
    plan = DataPlan(
        {f"s{i}": i for i in range(5)}, weights=[5, 4, 3, 2, 1], batching="stratified", seed=1
    )
    sizes = [997, 801, 603, 411, 199]
    quotas = plan.quotas(sizes)
    share = [q / sum(quotas) for q in quotas]
    for size in (7, 10, 33):
        for take in epoch_batches(plan, sizes, size, 3)[:-2]:
            assert all(abs(t - size * w) < 1 for t, w in zip(take, share, strict=True)), take


def test_random_batches_follow_the_weights_on_average() -> None:
    plan = DataPlan({"a": 1, "b": 2}, weights=[0.8, 0.2], batching="random", seed=3)
    batches = epoch_batches(plan, [5000, 5000], 50, 2)
    first_half = batches[: len(batches) // 2]
    got = sum(b[0] for b in first_half) / sum(sum(b) for b in first_half)
    assert 0.77 < got < 0.83
    assert len({tuple(b) for b in batches}) > 3  # drawn, not fixed


@pytest.mark.parametrize("batching", BATCHINGS)
def test_the_same_seed_and_epoch_give_the_same_batches(batching: str) -> None:
    def plan(seed: int) -> DataPlan:
        return DataPlan({"a": 1, "b": 2}, weights=[0.6, 0.4], batching=batching, seed=seed)

    assert epoch_batches(plan(4), [300, 200], 16, 2) == epoch_batches(plan(4), [300, 200], 16, 2)
    if batching != "stratified":  # stratified differs only in tie-breaks, maybe not at all
        others = [epoch_batches(plan(4), [300, 200], 16, 2, epoch=e) for e in (1, 2)]
        others.append(epoch_batches(plan(5), [300, 200], 16, 2))
        assert any(o != epoch_batches(plan(4), [300, 200], 16, 2) for o in others)


def test_per_stream_steps_share_their_source() -> None:
    plan = DataPlan({"a": 1, "b": 2, "c": 3}, counts=[640, 640, 640], batching="per_stream")
    quotas = plan.quotas([10, 10, 10])
    done, batch, mixed = [0, 0, 0], 0, 0
    while sum(done) < sum(quotas):
        takes = compose_step("per_stream", 32, quotas, done, batch, 4, 0, 0)
        sources = {i for t in takes for i, n in enumerate(t) if n}
        mixed += len(sources) > 1  # only where a source ran out inside the step
        for t in takes:
            done = [d + n for d, n in zip(done, t, strict=True)]
        batch += len(takes)
    assert mixed <= 2


def test_weights_with_an_epoch_size_split_by_largest_remainder() -> None:
    plan = DataPlan({"a": 1, "b": 2, "c": 3}, weights=[1, 1, 1], epoch_size=100)
    assert plan.quotas([10, 10, 10]) == [34, 33, 33]
    assert sum(epoch_batches(plan, [10, 10, 10], 8, 1)[i][0] for i in range(13)) == 34


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"weights": [0, 0]}, "sum to a positive number"),
        ({"weights": [1, -1]}, "source 'b': weight must be >= 0"),
        ({"weights": [1]}, "1 weight values for 2 sources"),
        ({"weights": {"a": 1, "z": 1}}, "unknown sources ['z']"),
        ({"counts": {"a": 5}}, "source 'b' needs exactly one of"),
        ({"counts": {"a": 5, "b": 1}, "choose": {"b": 2}}, "source 'b' needs exactly one"),
        ({"weights": [1, 1], "counts": [1, 1]}, "cannot be combined"),
        ({"counts": [1.5, 1]}, "source 'a': count must be whole"),
        ({"batching": "by_source"}, "batching must be one of"),
        ({"counts": [3, 3], "epoch_size": 10}, "epoch_size (>= 1) goes with weights= only"),
    ],
)
def test_bad_plans_name_the_source(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        DataPlan({"a": "a.tar", "b": "b-{0..3}.tar"}, **kwargs)
    assert message in str(err.value)


def test_choose_more_than_a_source_holds_names_it() -> None:
    plan = DataPlan({"a": "a.tar", "b": "b-{0..3}.tar"}, choose={"a": 5, "b": 50})
    with pytest.raises(ConfigError) as err:
        plan.quotas([10, 40])
    assert "source 'b': choose=50 but it has 40 samples (shards 'b-{0..3}.tar')" in str(err.value)


def test_an_empty_source_with_a_quota_is_named() -> None:
    plan = DataPlan({"a": "a.tar", "b": ["b0.tar", "b1.tar"]}, counts=[5, 5])
    with pytest.raises(ConfigError, match=r"source 'b' has no samples \(2 shards from 'b0.tar'\)"):
        plan.quotas([10, 0])


def test_yaml_maps_one_to_one(tmp_path: Path) -> None:
    text = """
seed: 17
batching: stratified
sources:
  laion: {shards: "s3://b/laion-{000..099}.tar", count: 500}
  coyo: {shards: ["s3://b/coyo-0.tar", "s3://b/coyo-1.tar"], repeat: 2}
  cc: {shards: "gs://c/cc-{0..9}.tar", choose: 100}
"""
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    direct = wds.mix(
        {
            "laion": "s3://b/laion-{000..099}.tar",
            "coyo": ["s3://b/coyo-0.tar", "s3://b/coyo-1.tar"],
            "cc": "gs://c/cc-{0..9}.tar",
        },
        counts={"laion": 500},
        repeat={"coyo": 2},
        choose={"cc": 100},
        batching="stratified",
        seed=17,
    )
    for plan in (DataPlan.from_yaml(text), DataPlan.from_yaml(str(path))):
        assert plan.to_dict() == direct.to_dict()
        assert plan.quotas([1000, 60, 100]) == direct.quotas([1000, 60, 100]) == [500, 120, 100]
    # and back: to_dict is the YAML form
    assert DataPlan.from_yaml(json.dumps(direct.to_dict())).to_dict() == direct.to_dict()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sources: [a, b]", "needs a 'sources:' mapping"),
        ("seed: 1\npack: 3\nsources: {a: {shards: x, weight: 1}}", "unknown keys ['pack']"),
        ("sources: {a: {weight: 1}}", "source 'a' in the YAML text needs 'shards:'"),
        ("sources: {a: {shards: x, wieght: 1}}", "source 'a' in the YAML text has unknown keys"),
        ("sources: {a: {shards: x, choose: 2}, b: {shards: y}}", "source 'b' needs exactly one"),
        ("sources: {a: [", "is not valid YAML"),
    ],
)
def test_bad_yaml_names_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        DataPlan.from_yaml(text)
    assert message in str(err.value)


def test_counts_spent_per_source_are_the_quota_every_epoch() -> None:
    plan = DataPlan({"a": 1, "b": 2}, weights=[2, 1], batching="random", seed=11)
    for epoch in range(3):
        totals: Counter[int] = Counter()
        for take in epoch_batches(plan, [70, 50], 16, 3, epoch):
            totals.update({i: t for i, t in enumerate(take)})
        assert [totals[0], totals[1]] == plan.quotas([70, 50]) == [80, 40]
