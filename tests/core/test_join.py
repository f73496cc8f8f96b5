"""wds.join: column sets read in lockstep and merged per key (local shards).

Differential against :func:`tests.core.joinsets.reference` (the sets read with ``tarfile``),
alignment under shard shuffle and node/worker splits, bad input, and resume in one process
(the SIGKILL and backend tests are in ``test_join_resume.py`` and ``test_join_backends.py``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.core.joinsets import aligned, fields, make_sets, reference, set_shard, shard_keys
from tests.resume.helpers import assert_exactly_once, run_interrupted
from wds_cloud.errors import ConfigError, SampleError


def write_sets(root: Path, sets: dict[str, list[bytes]]) -> dict[str, str]:
    """Write each set's shards as ``<column>-NNN.tar``; return brace specs."""
    specs = {}
    for column, shards in sets.items():
        for i, data in enumerate(shards):
            (root / f"{column}-{i:03d}.tar").write_bytes(data)
        specs[column] = f"{root}/{column}-{{000..{len(shards) - 1:03d}}}.tar"
    return specs


@pytest.fixture
def sets3(tmp_path: Path) -> tuple[dict[str, str], dict[str, list[bytes]]]:
    data = make_sets(5, 7)
    return write_sets(tmp_path, data), data


def test_matches_the_reference_in_order(sets3: Any) -> None:
    specs, data = sets3
    ds = wds.WebDataset(wds.join(specs, columns=["img", "txt"]), shardshuffle=False)
    got = [fields(s) for s in ds]
    want = reference(list(zip(data["img"], data["txt"], strict=True)), ["img", "txt"])
    assert got == want
    assert len(got) == 35 and "npy" not in got[0]


def test_all_columns_by_default_and_url_is_the_first_sets(sets3: Any) -> None:
    specs, data = sets3
    got = list(wds.WebDataset(wds.join(specs), shardshuffle=False))
    rows = list(zip(data["img"], data["txt"], data["emb"], strict=True))
    assert [fields(s) for s in got] == reference(rows, ["img", "txt", "emb"])
    assert got[0]["__url__"].endswith("img-000.tar")


def test_unasked_sets_are_never_resolved_nor_opened(tmp_path: Path, sets3: Any) -> None:
    specs, _ = sets3
    specs = dict(specs, emb=f"{tmp_path}/missing/emb-{{000..099}}.tar")  # does not exist
    got = list(wds.WebDataset(wds.join(specs, columns=["txt", "img"]), shardshuffle=False))
    assert len(got) == 35 and all(aligned(s) for s in got)
    assert got[0]["__url__"].endswith("txt-000.tar")  # the first asked set


def test_shuffled_and_split_the_sets_stay_aligned(
    sets3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs, _ = sets3
    seen: Counter[str] = Counter()
    for rank in range(2):
        for worker in range(2):
            for name, value in (("RANK", rank), ("WORLD_SIZE", 2), ("WORKER", worker)):
                monkeypatch.setenv(name, str(value))
            monkeypatch.setenv("NUM_WORKERS", "2")
            ds = wds.WebDataset(
                wds.join(specs, columns=["img", "txt"]),
                shardshuffle=True,
                seed=5,
                nodesplitter=wds.split_by_node,
                empty_check=False,
            )
            for s in ds:
                assert aligned(s), s["__key__"]
                seen[s["__key__"]] += 1
    assert seen == Counter(k for i in range(5) for k in shard_keys(i, 7))


def test_shard_order_follows_the_plain_shuffle(sets3: Any) -> None:
    """Row i of the join comes where shard i of one set comes in a WebDataset of that set."""
    specs, _ = sets3
    joined = [s["__key__"] for s in wds.WebDataset(wds.join(specs), shardshuffle=True, seed=9)]
    plain = [s["__key__"] for s in wds.WebDataset(specs["img"], shardshuffle=True, seed=9)]
    assert joined == plain


def test_a_hand_built_pipeline_reads_the_same(sets3: Any) -> None:
    specs, _ = sets3
    j = wds.join(specs, columns=["img", "emb"])
    built = wds.DataPipeline(
        j, wds.shuffle_shards(seed=2), wds.split_by_worker, wds.join_to_samples()
    )
    ds = wds.WebDataset(j, shardshuffle=True, seed=2)
    assert [fields(s) for s in built] == [fields(s) for s in ds]


# -- bad input -----------------------------------------------------------------------------------


def test_different_shard_counts_name_both_specs_and_counts(tmp_path: Path) -> None:
    specs = write_sets(tmp_path, make_sets(3, 2, columns=["img"]))
    specs |= write_sets(tmp_path, make_sets(4, 2, columns=["txt"]))
    with pytest.raises(ConfigError) as err:
        wds.join(specs)
    msg = str(err.value)
    assert specs["img"] in msg and specs["txt"] in msg
    assert "3 shards" in msg and "has 4" in msg


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"columns": ["img", "nope"]}, "columns"),
        ({"columns": []}, "columns"),
        ({"columns": ["img", "img"]}, "columns"),
        ({"clash": "rename"}, "clash"),
        ({"window": 0}, "window"),
    ],
)
def test_bad_arguments(sets3: Any, kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        wds.join(sets3[0], **kwargs)


def test_no_sets_and_resampled_are_refused(sets3: Any) -> None:
    with pytest.raises(ConfigError, match="non-empty dict"):
        wds.join({})
    with pytest.raises(ConfigError, match=r"img-000\.tar is in set 'img' and in set 'again'"):
        wds.join({"img": sets3[0]["img"], "again": sets3[0]["img"]})
    with pytest.raises(ConfigError, match="resampled"):
        wds.WebDataset(wds.join(sets3[0]), resampled=True)
    with pytest.raises(ConfigError, match="split_samples"):
        wds.WebDataset(wds.join(sets3[0]), split_samples=True)


def _drop_key(column: str, index: int, keys: list[str]) -> list[str]:
    return [k for k in keys if not (column == "txt" and index == 1 and k.endswith("k0003"))]


def test_a_missing_key_names_it_and_both_shards(tmp_path: Path) -> None:
    specs = write_sets(tmp_path, make_sets(3, 6, ["img", "txt"], edit=_drop_key))
    with pytest.raises(SampleError) as err:
        list(wds.WebDataset(wds.join(specs), shardshuffle=False))
    msg = str(err.value)
    assert "'s001/k0003'" in msg and "img-001.tar" in msg and "txt-001.tar" in msg


def test_a_missing_key_is_skipped_and_counted(tmp_path: Path) -> None:
    data = make_sets(3, 6, ["img", "txt"], edit=_drop_key)
    specs = write_sets(tmp_path, data)
    handler = wds.ContinueHandler()
    got = list(wds.WebDataset(wds.join(specs), shardshuffle=False, handler=handler))
    assert handler.count == 1 and isinstance(handler.last, SampleError)
    assert [s["__key__"] for s in got] == [
        k for i in range(3) for k in shard_keys(i, 6) if (i, k[-5:]) != (1, "k0003")
    ]
    assert all(aligned(s) for s in got)


def test_keys_out_of_order_are_an_error_or_skipped_and_counted(tmp_path: Path) -> None:
    def swap(column: str, index: int, keys: list[str]) -> list[str]:
        if column == "txt" and index == 0:
            keys[2], keys[3] = keys[3], keys[2]
        return keys

    specs = write_sets(tmp_path, make_sets(2, 6, ["img", "txt"], edit=swap))
    with pytest.raises(SampleError, match=r"'s000/k0003'.*txt-000.tar.*img-000.tar.*out of order"):
        list(wds.WebDataset(wds.join(specs), shardshuffle=False))
    handler = wds.ContinueHandler()
    got = list(wds.WebDataset(wds.join(specs), shardshuffle=False, handler=handler))
    assert handler.count == 2  # k0003 of txt (met again at k0002), then k0003 of img
    assert [s["__key__"][-5:] for s in got][:4] == ["k0000", "k0001", "k0002", "k0004"]
    assert len(got) == 11 and all(aligned(s) for s in got)


def test_a_set_with_extra_samples_at_the_end(tmp_path: Path) -> None:
    def extra(column: str, index: int, keys: list[str]) -> list[str]:
        return [*keys, "s000/zz"] if column == "img" and index == 0 else keys

    specs = write_sets(tmp_path, make_sets(2, 4, ["img", "txt"], edit=extra))
    with pytest.raises(SampleError, match=r"'s000/zz'.*img-000.tar.*txt-000.tar.*no more"):
        list(wds.WebDataset(wds.join(specs), shardshuffle=False))
    handler = wds.ContinueHandler()
    got = list(wds.WebDataset(wds.join(specs), shardshuffle=False, handler=handler))
    assert handler.count == 1 and len(got) == 8


def test_field_clash_is_an_error_or_prefixed(tmp_path: Path) -> None:
    data = make_sets(2, 3, ["img"])
    data["txt"] = [set_shard("txt", shard_keys(i, 3), ("txt", "json")) for i in range(2)]
    specs = write_sets(tmp_path, data)
    with pytest.raises(SampleError, match=r"'json'.*'img'.*img-000.tar.*'txt'.*txt-000.tar"):
        list(wds.WebDataset(wds.join(specs), shardshuffle=False))
    got = list(wds.WebDataset(wds.join(specs, clash="prefix"), shardshuffle=False))
    assert sorted(got[0]) == ["__key__", "__url__", "img.jpg", "img.json", "txt.json", "txt.txt"]
    assert all(aligned(s) for s in got)


def test_a_missing_shard_goes_to_the_handler(tmp_path: Path) -> None:
    specs = write_sets(tmp_path, make_sets(3, 4, ["img", "txt"]))
    (tmp_path / "txt-001.tar").unlink()
    with pytest.raises(FileNotFoundError, match=r"txt-001\.tar"):
        list(wds.WebDataset(wds.join(specs), shardshuffle=False))
    handler = wds.ContinueHandler()
    got = list(wds.WebDataset(wds.join(specs), shardshuffle=False, handler=handler))
    assert len(got) == 8  # row 1: img's samples have no partner (one open error + 4 drops)
    assert handler.count == 5


# -- resume in one process -------------------------------------------------------------------------


def _fields_of(sample: dict[str, Any]) -> list[str]:
    assert aligned(sample), sample["__key__"]
    return [repr(sorted(fields(sample).items()))]


@pytest.mark.parametrize("stops", [[1, 9, 4], [7], [20, 2, 2]])
def test_resumed_output_equals_uninterrupted(sets3: Any, stops: list[int]) -> None:
    specs, _ = sets3

    def make() -> Any:
        return wds.WebDataset(wds.join(specs, columns=["img", "txt"]), shardshuffle=True, seed=4)

    full = [_fields_of(s)[0] for s in make()]
    assert run_interrupted(make, stops, _fields_of)[0] == full


def test_resume_with_a_shuffle_buffer_delivers_each_sample_once(sets3: Any) -> None:
    specs, _ = sets3

    def make() -> Any:
        j = wds.join(specs, columns=["emb", "txt"])
        return wds.WebDataset(j, shardshuffle=True, seed=1).shuffle(10, seed=3)

    got, _ = run_interrupted(make, [5, 11, 3], lambda s: [s["__key__"]] if aligned(s) else [])
    assert_exactly_once(got, [k for i in range(5) for k in shard_keys(i, 7)])


@pytest.mark.parametrize(("stop", "drops"), [(10, 1), (9, 2)])
def test_resume_after_a_skip(tmp_path: Path, stop: int, drops: int) -> None:
    """A dropped sample goes with the next merged one: once that was delivered (stop 10), the
    resumed run does not read it again; before (stop 9), it drops it again (counted again)."""
    specs = write_sets(tmp_path, make_sets(3, 6, ["img", "txt"], edit=_drop_key))
    handler = wds.ContinueHandler()

    def make() -> Any:
        return wds.WebDataset(wds.join(specs), shardshuffle=False, handler=handler)

    full = [s["__key__"] for s in make()]
    handler.reset()
    assert run_interrupted(make, [stop], lambda s: [s["__key__"]])[0] == full
    assert handler.count == drops


def test_the_fluid_methods_apply_to_merged_samples(sets3: Any) -> None:
    specs, _ = sets3
    ds = wds.WebDataset(wds.join(specs, columns=["img", "txt"]), shardshuffle=True, seed=0)
    pairs = list(ds.shuffle(10, seed=1).to_tuple("__key__", "jpg", "txt"))
    assert len(pairs) == 35
    assert all(aligned({"__key__": k, "jpg": j, "txt": t}) for k, j, t in pairs)


def test_elastic_resume_from_two_ranks_to_three(
    sets3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """States of 2 ranks, merged, resumed by 3 ranks: the rest of the epoch exactly once."""
    from wds_cloud.resume import merge_states

    specs, _ = sets3

    def make(rank: int, world: int) -> Any:
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        j = wds.join(specs, columns=["img", "txt"])
        return wds.WebDataset(
            j, shardshuffle=True, seed=8, nodesplitter=wds.split_by_node, empty_check=False
        )

    delivered: list[str] = []
    states = []
    for rank, stop in ((0, 4), (1, 9)):
        ds = make(rank, 2)
        for n, s in enumerate(ds, 1):
            delivered.append(s["__key__"])
            if n == stop:
                break
        states.append(ds.state_dict())
    merged = merge_states(states)
    for rank in range(3):
        ds = make(rank, 3)
        ds.load_state_dict(merged)
        got = list(ds)
        assert all(aligned(s) for s in got)
        delivered += [s["__key__"] for s in got]
    assert_exactly_once(delivered, [k for i in range(5) for k in shard_keys(i, 7)])


def test_a_stopping_handler_ends_after_the_samples_made_before(tmp_path: Path) -> None:
    specs = write_sets(tmp_path, make_sets(3, 6, ["img", "txt"], edit=_drop_key))
    handler = wds.StopHandler()
    got = list(wds.WebDataset(wds.join(specs), shardshuffle=False, handler=handler))
    assert [s["__key__"] for s in got][-1] == "s001/k0002"  # the key before the missing one
    assert len(got) == 9 and handler.count == 1
