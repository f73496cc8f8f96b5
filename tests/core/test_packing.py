"""``wds.pack`` and ``wds.group_by``: what they emit, their errors, handlers and pipelines."""

from __future__ import annotations

import io
import pickle
import random
import tarfile
from pathlib import Path
from typing import Any

import pytest

import wds_cloud as wds
from tests.resume.helpers import write_shards
from wds_cloud.errors import ConfigError, SampleError


def lengths_of(packs: list[list[int]], lengths: list[int]) -> list[int]:
    return [sum(lengths[i] for i in p) for p in packs]


def test_every_sample_is_packed_once_within_capacity() -> None:
    rng = random.Random(3)
    lengths = [rng.randint(0, 100) for _ in range(2000)]
    packs: list[list[int]] = []
    made_before: list[int] = []  # packs made before each sample arrived

    def source() -> Any:
        for i in range(len(lengths)):
            made_before.append(len(packs))
            yield i

    for made in wds.pack(100, length=lambda i: lengths[i], buffer=50)(source()):
        packs.append(made)
    assert sorted(i for p in packs for i in p) == list(range(len(lengths)))
    assert max(lengths_of(packs, lengths)) <= 100
    assert all(p == sorted(p) for p in packs)  # members keep their arrival order
    # no sample waits for more than `buffer` packs after it arrived (the oldest seeds a pack)
    where = {i: n for n, p in enumerate(packs) for i in p}
    waits = [where[i] - made_before[i] for i in range(len(lengths))]
    assert max(waits) <= 50


def test_packing_is_first_fit_decreasing_over_the_buffer() -> None:
    # buffer of 4: [6, 5, 4, 3] -> the oldest (6) + the longest that fits (4), then 3 arrives ...
    lengths = [6, 5, 4, 3, 2, 7, 1]
    packs = list(wds.pack(10, length=lambda i: lengths[i], buffer=4)(range(7)))
    assert packs == [[0, 2], [1, 3, 4], [5, 6]]


def test_deterministic_given_the_input_order() -> None:
    rng = random.Random(5)
    lengths = [rng.randint(1, 64) for _ in range(500)]
    make = wds.pack(64, length=lambda i: lengths[i], buffer=32)
    assert list(make(range(500))) == list(make(range(500)))


def test_pack_fn_merges_a_pack() -> None:
    docs = [[1, 2, 3], [4, 5], [6], [7, 8, 9, 10]]

    def concat(pack: list[list[int]]) -> dict[str, list[int]]:
        tokens = [t for d in pack for t in d]
        segments = [n for n, d in enumerate(pack) for _ in d]
        positions = [p for d in pack for p in range(len(d))]
        return {"tokens": tokens, "segments": segments, "positions": positions}

    out = list(wds.pack(6, buffer=4, pack_fn=concat)(docs))
    assert out == [
        {
            "tokens": [1, 2, 3, 4, 5, 6],
            "segments": [0, 0, 0, 1, 1, 2],
            "positions": [0, 1, 2, 0, 1, 0],
        },
        {"tokens": [7, 8, 9, 10], "segments": [0, 0, 0, 0], "positions": [0, 1, 2, 3]},
    ]


def test_sample_longer_than_capacity_names_shard_and_key() -> None:
    samples = [{"__key__": "a", "__url__": "s3://b/shard-7.tar", "tok": [0] * 9}]
    with pytest.raises(SampleError, match="length 9 does not fit the capacity 8") as info:
        list(wds.pack(8, length=lambda s: len(s["tok"]))(samples))
    assert info.value.key == "a"
    assert info.value.url == "s3://b/shard-7.tar"
    assert "shard-7.tar" in str(info.value) and "'a'" in str(info.value)


def test_too_long_sample_is_skipped_and_counted_under_a_skipping_handler() -> None:
    handler = wds.ContinueHandler()
    lengths = [3, 12, 4, 15, 5]
    packs = list(wds.pack(10, length=lambda i: lengths[i], buffer=2, handler=handler)(range(5)))
    assert sorted(i for p in packs for i in p) == [0, 2, 4]
    assert handler.count == 2
    assert isinstance(handler.last, SampleError)


def test_a_stopping_handler_ends_the_packs() -> None:
    handler = wds.StopHandler()
    lengths = [3, 4, 12, 5]
    packs = list(wds.pack(10, length=lambda i: lengths[i], buffer=1, handler=handler)(range(4)))
    assert packs == [[0], [1]]
    assert handler.count == 1


@pytest.mark.parametrize("bad", [-1, "x", 1.5, None])
def test_bad_length_result_is_a_sample_error(bad: Any) -> None:
    with pytest.raises(SampleError, match="integer >= 0"):
        list(wds.pack(8, length=lambda s: bad)([{"__key__": "k"}]))


def test_failing_length_is_a_sample_error() -> None:
    with pytest.raises(SampleError, match=r"length\(\) failed.*KeyError") as info:
        list(wds.pack(8, length=lambda s: len(s["tok"]))([{"__key__": "k7", "__url__": "u"}]))
    assert info.value.key == "k7"


@pytest.mark.parametrize("capacity", [0, -3, 2.5, True, "8"])
def test_capacity_below_one_is_a_config_error(capacity: Any) -> None:
    with pytest.raises(ConfigError, match="pack: capacity must be an integer >= 1"):
        wds.pack(capacity)


@pytest.mark.parametrize("buffer", [0, -1, None, 3.0])
def test_bad_buffer_is_a_config_error(buffer: Any) -> None:
    with pytest.raises(ConfigError, match="pack: buffer must be an integer >= 1"):
        wds.pack(8, buffer=buffer)


def test_uncallable_functions_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="length must be callable"):
        wds.pack(8, length=3)  # type: ignore[arg-type]  # the wrong type is the point
    with pytest.raises(ConfigError, match="pack_fn must be callable"):
        wds.pack(8, pack_fn="concat")  # type: ignore[arg-type]  # the wrong type is the point
    with pytest.raises(ConfigError, match="key must be callable"):
        wds.group_by("res", 4)  # type: ignore[arg-type]  # the wrong type is the point


def test_failing_pack_fn_goes_to_the_handler() -> None:
    handler = wds.ContinueHandler()

    def fussy(pack: list[int]) -> list[int]:
        if 0 in pack:
            raise ValueError("no zeros")
        return pack

    out = list(wds.pack(2, length=lambda i: 1, buffer=2, pack_fn=fussy, handler=handler)(range(6)))
    assert out == [[2, 3], [4, 5]]
    assert handler.count == 1
    with pytest.raises(ValueError, match="no zeros"):
        list(wds.pack(2, length=lambda i: 1, pack_fn=fussy)(range(6)))


def test_group_by_batches_one_key_each() -> None:
    samples = [("a", 0), ("b", 1), ("a", 2), ("c", 3), ("a", 4), ("b", 5), ("b", 6), ("c", 7)]
    out = list(wds.group_by(lambda s: s[0], 3)(samples))
    assert out == [
        [("a", 0), ("a", 2), ("a", 4)],
        [("b", 1), ("b", 5), ("b", 6)],
        [("c", 3), ("c", 7)],  # the rest, in the order of their first samples
    ]
    assert list(wds.group_by(lambda s: s[0], 3, partial=False)(samples)) == out[:2]


def test_group_by_full_buffer_emits_the_largest_group() -> None:
    samples = [("a", 0), ("b", 1), ("b", 2), ("c", 3), ("a", 4), ("a", 5)]
    out = list(wds.group_by(lambda s: s[0], 4, buffer=4)(samples))
    # at 4 held: a=1, b=2, c=1 -> b goes; then a reaches 3 and c 1 with 4 held -> a goes
    assert out == [[("b", 1), ("b", 2)], [("a", 0), ("a", 4), ("a", 5)], [("c", 3)]]


def test_group_by_collation_and_its_errors() -> None:
    samples = [{"res": r, "__key__": f"k{i}"} for i, r in enumerate([1, 2, 1, 2])]
    out = list(wds.group_by(lambda s: s["res"], 2, collation_fn=wds.default_collation_fn)(samples))
    assert [o["__key__"] for o in out] == [["k0", "k2"], ["k1", "k3"]]
    handler = wds.ContinueHandler()
    odd = [*samples, {"__key__": "bad", "__url__": "u.tar"}]
    out = list(wds.group_by(lambda s: s["res"], 2, handler=handler)(odd))
    assert handler.count == 1 and "'bad'" in str(handler.last)
    with pytest.raises(SampleError, match=r"key\(\) failed"):
        list(wds.group_by(lambda s: s["res"], 2)(odd))
    with pytest.raises(SampleError, match=r"key\(\) returned unhashable"):
        list(wds.group_by(lambda s: [1], 2)(samples))


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"batch_size": 0}, "batch_size must be an integer >= 1"),
        ({"batch_size": 4, "buffer": 0}, "buffer must be an integer >= 1"),
        ({"batch_size": 4, "buffer": 3}, r"buffer \(3\) must hold at least batch_size"),
    ],
)
def test_group_by_config_errors(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        wds.group_by(len, **kw)


def test_stages_pickle() -> None:
    stage = pickle.loads(pickle.dumps(wds.pack(8, buffer=3)))
    assert list(stage([[1] * 5, [1] * 3, [1] * 4])) == [[[1] * 5, [1] * 3], [[1] * 4]]
    grouping = pickle.loads(pickle.dumps(wds.group_by(len, 2)))
    assert list(grouping(["ab", "c", "de"])) == [["ab", "de"], ["c"]]


def test_fluid_and_pipeline_forms_agree(tmp_path: Path) -> None:
    urls, _ = write_shards(tmp_path, 3, 20)

    def size(sample: dict[str, Any]) -> int:
        return len(sample["bin"]) // 16  # 4 per sample (64-byte payloads)

    fluid = wds.WebDataset(urls, shardshuffle=False).pack(10, length=size, buffer=5)
    piped = wds.DataPipeline(
        wds.SimpleShardList(urls), wds.tarfile_to_samples(), wds.pack(10, length=size, buffer=5)
    )
    a = [[s["__key__"] for s in p] for p in fluid]
    b = [[s["__key__"] for s in p] for p in piped]
    assert a == b and len(a) == 30 and all(len(p) == 2 for p in a)
    groups = wds.WebDataset(urls, shardshuffle=False).group_by(lambda s: s["cls"], 4)
    for batch in groups:
        assert len({s["cls"] for s in batch}) == 1


def test_packs_unlist_back_into_samples(tmp_path: Path) -> None:
    urls, keys = write_shards(tmp_path, 2, 15)
    ds = (
        wds.WebDataset(urls, shardshuffle=False)
        .pack(9, length=lambda s: int(s["cls"]) + 1, buffer=6)
        .unlisted()
    )
    assert sorted(s["txt"].decode() for s in ds) == sorted(keys)


def doc_block(heading: str, index: int) -> str:
    """The ``index``-th python block after ``heading`` in docs/mixing.md."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "mixing.md").read_text()
    section = text[text.index(heading) :]
    return section.split("```python\n")[index + 1].split("```")[0]


def write_members(path: Path, samples: list[dict[str, bytes]]) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for sample in samples:
            key = sample["__key__"].decode()
            for ext, data in sample.items():
                if ext != "__key__":
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    return str(path)


def test_docs_token_packing_example_runs(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    rng = random.Random(1)
    urls, lengths = [], {}
    for s in range(3):
        samples = []
        for i in range(40):
            key = f"d{s}_{i:02d}"
            n = min(4096, max(1, int(rng.lognormvariate(6.5, 1.0))))
            lengths[key] = n
            out = io.BytesIO()
            np.save(out, np.arange(1, n + 1, dtype=np.int32))
            samples.append({"__key__": key.encode(), "input_ids.npy": out.getvalue()})
        urls.append(write_members(tmp_path / f"docs-{s}.tar", samples))
    scope: dict[str, Any] = {"urls": urls}
    exec(doc_block("### Worked example", 0), scope)
    seen = []
    for batch in scope["dataset"]:
        assert batch["input_ids"].shape[1:] == (4096,)
        for row in range(batch["input_ids"].shape[0]):
            keys = batch["keys"][row]
            seg, pos, ids = (batch[f][row] for f in ("segment_ids", "position_ids", "input_ids"))
            for n, key in enumerate(keys, 1):
                doc = seg == n
                assert int(doc.sum()) == lengths[key]
                assert (pos[doc] == np.arange(lengths[key])).all()
                assert (ids[doc] == np.arange(1, lengths[key] + 1)).all()
            assert (ids[seg == 0] == 0).all()
            seen.extend(keys)
    assert sorted(seen) == sorted(lengths)


def test_docs_resolution_bucket_example_runs(tmp_path: Path) -> None:
    image = pytest.importorskip("PIL.Image")
    samples = []
    for i in range(50):
        size = [(32, 48), (64, 64)][i % 3 == 0]
        out = io.BytesIO()
        image.new("RGB", size, (i, 0, 0)).save(out, format="JPEG")
        samples.append({"__key__": f"im{i:02d}".encode(), "jpg": out.getvalue()})
    scope: dict[str, Any] = {"urls": [write_members(tmp_path / "im.tar", samples)], "wds": wds}
    exec(doc_block("### Worked example", 1), scope)
    total = 0
    for batch in scope["buckets"]:
        assert len({tuple(shape) for shape in (im.shape for im in batch["jpg"])}) == 1
        total += len(batch["__key__"])
    assert total == 50
