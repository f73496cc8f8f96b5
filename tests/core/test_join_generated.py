"""wds.join on generated inputs: the merged samples against the ``tarfile`` reference, and the
resume offsets against the uninterrupted run, on 1,000 generated cases.

Each case draws its sets (2 or 3 columns, 1-5 shard rows of 0-8 samples), sometimes a key
missing from one set (read with a ``ContinueHandler``: skipped and counted), the shard shuffle
(off, or a seed), sometimes a sample shuffle buffer, the ``window`` and 1-3 stopping points.
It checks that:

- without a missing key, the join equals the reference read with ``tarfile``
  (:func:`tests.core.joinsets.reference`), field for field (in order, unless shuffled);
- every sample is aligned (each field belongs to its key), no key is seen twice, and every
  sample of every set is either merged or counted by the handler (with ``window=1``, no
  read-ahead, a missing key drops the heads of all sets; from 2 on, only its partners);
- a run stopped at each point (its state through JSON) and resumed by a new dataset delivers
  what the uninterrupted run delivers, in the same order (with a shuffle buffer: every key
  exactly once); with a missing key, what the uninterrupted run skips is skipped, never a
  sample more.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import wds_cloud as wds
from tests.core.joinsets import aligned, fields, make_sets, reference, shard_keys
from tests.core.test_join import write_sets
from tests.resume.helpers import assert_exactly_once, run_interrupted
from wds_cloud.errors import ConfigError

CASES = 1000


def _case(rng: random.Random) -> dict[str, Any]:
    columns = rng.choice([["img", "txt"], ["txt", "emb"], ["img", "txt", "emb"], ["emb", "img"]])
    rows = rng.randint(1, 5)
    counts = [rng.randint(0, 8) for _ in range(rows)]
    if not any(counts):  # no sample at all is an error (tests/core/test_samples.py)
        counts[0] = 1
    missing = None
    if rng.random() < 0.25:
        row = rng.choice([i for i, n in enumerate(counts) if n])
        missing = (rng.choice(columns[1:]), row, rng.randrange(counts[row]))
    return {
        "columns": columns,
        "counts": counts,
        "missing": missing,
        "shardshuffle": rng.choice([False, True]),
        "seed": rng.randrange(1000),
        "buffer": rng.choice([0, 0, 0, 5]),
        "window": rng.choice([1, 2, 64]),
        "stop_seed": rng.randrange(1 << 30),  # the stops are drawn within the full run
    }


def _stops(rng: random.Random, total: int) -> list[int]:
    """1-3 stopping points, each within what is left after the ones before (a run that ends
    before its stop takes no state)."""
    stops: list[int] = []
    left = total
    for _ in range(rng.randint(1, 3)):
        if left < 1:
            break
        stops.append(rng.randint(1, left))  # a stop at the last item: the state of an end
        left -= stops[-1]
    return stops


def _sets(case: dict[str, Any]) -> dict[str, list[bytes]]:
    counts = case["counts"]
    missing = case["missing"]

    def edit(column: str, index: int, keys: list[str]) -> list[str]:
        keys = shard_keys(index, counts[index])
        if missing is not None and (column, index) == missing[:2]:
            del keys[missing[2]]
        return keys

    return make_sets(len(counts), max(counts), case["columns"], edit=edit)


def _expected_keys(case: dict[str, Any]) -> list[str]:
    missing = case["missing"]
    skipped = None if missing is None else shard_keys(missing[1], case["counts"][missing[1]])
    return [
        k
        for i, n in enumerate(case["counts"])
        for k in shard_keys(i, n)
        if skipped is None or k != skipped[missing[2]]
    ]


def _check(root: Path, case: dict[str, Any]) -> str:
    """Check one case; what kind of result it had."""
    data = _sets(case)
    specs = write_sets(root, data)
    handler = wds.ContinueHandler()

    def make() -> Any:
        ds = wds.WebDataset(
            wds.join(specs, window=case["window"]),
            shardshuffle=case["shardshuffle"],
            seed=case["seed"],
            handler=handler,
        )
        return ds.shuffle(case["buffer"], seed=case["seed"]) if case["buffer"] else ds

    try:
        full = list(make())
    except ConfigError as err:  # every sample skipped: an error, never an empty epoch
        assert "no samples found" in str(err) and case["missing"] is not None, case
        assert handler.count == sum(case["counts"]) * len(case["columns"]) - 1, case
        return "all skipped"
    assert all(aligned(s) for s in full), case
    keys = [s["__key__"] for s in full]
    # every sample of every set is delivered (merged) or counted by the handler: none vanishes
    samples = sum(case["counts"]) * len(case["columns"]) - (case["missing"] is not None)
    assert handler.count == samples - len(keys) * len(case["columns"]), case
    if case["window"] > 1:  # the sets meet again right after a missing key
        assert_exactly_once(keys, _expected_keys(case))
    else:  # no read-ahead: a missing key drops the heads of every set, each counted
        assert set(keys) <= set(_expected_keys(case)) and len(set(keys)) == len(keys), case
    if case["missing"] is None:
        rows = list(zip(*(data[c] for c in case["columns"]), strict=True))
        want = reference(rows, case["columns"])
        got_fields = [fields(s) for s in full]
        if case["shardshuffle"] or case["buffer"]:  # the same samples, in another order
            got_fields.sort(key=lambda f: f["__key__"])
            want.sort(key=lambda f: f["__key__"])
        assert got_fields == want, case

    handler.reset()
    stops = _stops(random.Random(case["stop_seed"]), len(keys))
    got, states = run_interrupted(make, stops, lambda s: [s["__key__"]])
    assert len(states) == len(stops), case
    if case["buffer"]:
        assert_exactly_once(got, keys)
    else:
        assert got == keys, case
    # a skipped sample is skipped again only by a run that had not passed it yet
    assert handler.count <= (samples - len(keys) * len(case["columns"])) * (1 + len(states))
    return "read"


def test_generated_joins_match_the_reference_and_resume_exactly(tmp_path: Path) -> None:
    rng = random.Random(20261128)
    seen: Counter[str] = Counter()
    for i in range(CASES):
        case = _case(rng)
        root = tmp_path / f"case{i:04d}"
        root.mkdir()
        seen[_check(root, case)] += 1
        seen["missing" if case["missing"] else "complete"] += 1
        seen["buffer" if case["buffer"] else "ordered"] += 1
        seen["shuffled" if case["shardshuffle"] else "in order"] += 1
        seen["empty row" if 0 in case["counts"] else "full rows"] += 1
    # the draw covers every kind of case
    assert min(v for k, v in seen.items() if k != "all skipped") >= 50, seen
