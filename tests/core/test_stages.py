"""Sample-level stages: semantics, error messages and handlers."""

from __future__ import annotations

import io
import pickle

import pytest

from wds_cloud.core import stages
from wds_cloud.core.handlers import ContinueHandler, StopHandler
from wds_cloud.errors import ConfigError, SampleError


def samples(n: int = 5) -> list[dict]:
    return [
        {"__key__": f"k{i}", "__url__": "u.tar", "png": f"img{i}", "cls": i, "txt": f"t{i}"}
        for i in range(n)
    ]


def run(stage, data):
    return list(stage(iter(data)))


def test_map_applies_drops_none_and_keeps_key():
    out = run(stages.map(lambda s: None if s["cls"] == 1 else {"x": s["cls"]}), samples(3))
    assert out == [{"x": 0, "__key__": "k0"}, {"x": 2, "__key__": "k2"}]


def test_map_handler_skips_and_counts():
    h = ContinueHandler()
    out = run(stages.map(lambda s: 10 // s["cls"], handler=h), samples(4))
    assert out == [10, 5, 3]
    assert h.count == 1 and isinstance(h.last, ZeroDivisionError)


def test_map_stop_handler_stops():
    h = StopHandler()
    out = run(stages.map(lambda s: 1 // (s["cls"] - 2), handler=h), samples(5))
    assert out == [-1, -1]
    assert h.count == 1


def test_map_default_reraises():
    with pytest.raises(ZeroDivisionError):
        run(stages.map(lambda s: 1 // s["cls"]), samples(2))


def test_map_dict_in_place_and_missing_key():
    data = samples(2)
    out = run(stages.map_dict(cls=lambda v: v + 100), data)
    assert [s["cls"] for s in out] == [100, 101]
    with pytest.raises(SampleError, match="'jpg'") as info:
        run(stages.map_dict(jpg=str), samples(1))
    assert info.value.key == "k0" and info.value.url == "u.tar"
    with pytest.raises(ConfigError):
        run(stages.map_dict(cls=3), samples(1))


def test_map_tuple_identity_and_short():
    out = run(stages.map_tuple(None, lambda x: x * 2), [(1, 2, 3), (4, 5, 6)])
    assert out == [(1, 4, 3), (4, 10, 6)]
    with pytest.raises(SampleError, match="expected a tuple"):
        run(stages.map_tuple(str), [{"a": 1}])


def test_to_tuple_forms():
    data = samples(2)
    assert run(stages.to_tuple("png", "cls"), data) == [("img0", 0), ("img1", 1)]
    assert run(stages.to_tuple("png cls"), data) == [("img0", 0), ("img1", 1)]
    assert run(stages.to_tuple("jpg;png", "cls"), data) == [("img0", 0), ("img1", 1)]


def test_to_tuple_missing_names_key_and_sample():
    with pytest.raises(SampleError) as info:
        run(stages.to_tuple("jpg", "cls"), samples(1))
    msg = str(info.value)
    assert "jpg" in msg and "k0" in msg and "u.tar" in msg
    assert isinstance(info.value, ValueError)
    with pytest.raises(SampleError, match=r"jpg.*webp|webp.*jpg"):
        run(stages.to_tuple("jpg;webp", "cls"), samples(1))


def test_to_tuple_missing_allowed_and_none_is_error():
    data = samples(1)
    assert run(stages.to_tuple("jpg", "cls", missing_is_error=False), data) == [(None, 0)]
    with pytest.raises(SampleError, match="None"):
        run(stages.to_tuple("jpg", "cls", missing_is_error=False, none_is_error=True), data)
    data[0]["png"] = None
    with pytest.raises(SampleError):
        run(stages.to_tuple("png"), data)


def test_to_tuple_handler_counts_skips():
    data = samples(3)
    del data[1]["png"]
    h = ContinueHandler()
    assert run(stages.to_tuple("png", handler=h), data) == [("img0",), ("img2",)]
    assert h.count == 1 and "k1" in str(h.last)


def test_select():
    assert [s["cls"] for s in run(stages.select(lambda s: s["cls"] % 2), samples(5))] == [1, 3]


def test_rename_keep_and_not_keep():
    out = run(stages.rename(image="jpg;png", label="cls"), samples(1))
    assert out == [{"__key__": "k0", "__url__": "u.tar", "txt": "t0", "image": "img0", "label": 0}]
    out = run(stages.rename(image="png", keep=False), samples(1))
    assert out == [{"image": "img0"}]
    with pytest.raises(SampleError, match="jpg"):
        run(stages.rename(image="jpg"), samples(1))


def test_rename_keys():
    data = [{"a/B.PNG": 1, "c.cls": 2, "d.txt": 3}]
    assert run(stages.rename_keys(("image", "*.png"), label="*.cls"), data) == [
        {"image": 1, "label": 2}
    ]
    out = run(stages.rename_keys(image="*.png", keep_unselected=True), data)
    assert out == [{"image": 1, "c.cls": 2, "d.txt": 3}]
    with pytest.raises(SampleError, match=r"\*\.jpg"):
        run(stages.rename_keys(image="*.jpg"), data)
    with pytest.raises(SampleError, match="two keys"):
        run(stages.rename_keys(x="*.cls", y="*"), [{"a.cls": 1, "b.cls": 2}])
    h = ContinueHandler()
    assert run(stages.rename_keys(image="*.jpg", handler=h), data * 2) == []
    assert h.count == 2


def test_extract_keys():
    data = [{"a.png": 1, "a.cls": 2}, {"b.jpg": 3, "b.cls": 4}]
    assert run(stages.extract_keys("*.png;*.jpg", "*.cls"), data) == [(1, 2), (3, 4)]
    with pytest.raises(SampleError, match="matches no key"):
        run(stages.extract_keys("*.webp"), data)
    assert run(stages.extract_keys("*.webp", "*.cls", ignore_missing=True), data) == [(2,), (4,)]
    with pytest.raises(SampleError, match="several"):
        run(stages.extract_keys("*"), data)
    # the extension form matches with a leading dot, as webdataset
    assert run(stages.extract_keys("png"), [{"png": 5}]) == [(5,)]


def test_slice():
    assert run(stages.slice(2), range(10)) == [0, 1]
    assert run(stages.slice(1, 8, 3), range(10)) == [1, 4, 7]


def test_rsample_seeded_and_bounds():
    a = run(stages.rsample(0.5, seed=3), range(200))
    b = run(stages.rsample(0.5, seed=3), range(200))
    assert a == b and 40 < len(a) < 160
    assert run(stages.rsample(0.0), range(10)) == []
    assert run(stages.rsample(1.0), range(10)) == list(range(10))
    with pytest.raises(ConfigError):
        run(stages.rsample(1.5), range(3))


def test_info_prints_first_samples():
    out = io.StringIO()
    assert len(run(stages.info(n=2, stream=out, name="here"), samples(4))) == 4
    text = out.getvalue()
    assert text.count("--- here") == 2 and "img1" in text and "img2" not in text
    out = io.StringIO()
    run(stages.info(fmt="{__key__}", n=0, every=2, stream=out), samples(4))
    assert out.getvalue().split() == ["k1", "k3"]


def test_associate():
    out = run(stages.associate({"k1": {"extra": 1}}), samples(2))
    assert "extra" not in out[0] and out[1]["extra"] == 1
    out = run(stages.associate(lambda key: {"upper": key.upper()}), samples(1))
    assert out[0]["upper"] == "K0"


def test_log_keys(tmp_path):
    log = tmp_path / "keys.log"
    assert len(run(stages.log_keys(str(log)), samples(3))) == 3
    lines = log.read_text().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["0", "1", "2"]
    assert lines[2].endswith("\tk2")
    assert len(run(stages.log_keys(None), samples(3))) == 3


def test_non_empty_and_check_empty(clean_env):
    assert list(stages.non_empty(iter([1]))) == [1]
    with pytest.raises(ConfigError, match="no items"):
        list(stages.non_empty(iter([])))
    with pytest.raises(ConfigError, match=r"rank 0 of 1, worker 0 of 1"):
        list(stages.check_empty(iter([])))
    clean_env.setenv("WORKER", "2")
    clean_env.setenv("NUM_WORKERS", "3")
    with pytest.raises(ConfigError, match="worker 2 of 3"):
        list(stages.check_empty(iter([])))


def test_repeatedly():
    assert list(stages.repeatedly([1, 2], nepochs=3)) == [1, 2] * 3
    assert list(stages.repeatedly([1, 2], nbatches=5)) == [1, 2, 1, 2, 1]
    batches = [([1, 2], ["a", "b"]), ([3], ["c"])]
    assert list(stages.repeatedly(batches, nsamples=4)) == [*batches, batches[0]]
    assert list(stages.repeatedly([], nepochs=None)) == []


@pytest.mark.parametrize(
    "stage",
    [
        stages.map(str),
        stages.map_dict(cls=str),
        stages.map_tuple(str, None),
        stages.to_tuple("png;jpg", "cls", handler=ContinueHandler()),
        stages.select(bool),
        stages.rename(image="png"),
        stages.rename_keys(image="*.png"),
        stages.extract_keys("*.png"),
        stages.slice(3),
        stages.rsample(0.5, seed=1),
        stages.info(),
        stages.associate({}),
        stages.log_keys(),
    ],
    ids=repr,
)
def test_stages_pickle(stage):
    clone = pickle.loads(pickle.dumps(stage))
    assert clone.f is stage.f and clone.args == stage.args
