"""Sample grouping: the webdataset 1.0.2 contract, checked against the webdataset package."""

from __future__ import annotations

import io
import logging
import os
import re
import tarfile
from collections.abc import Generator

import pytest
import webdataset

from tests.support.tarbuild import gz, tar_bytes, write
from wds_cloud.core.handlers import ContinueHandler, StopHandler
from wds_cloud.core.samples import base_plus_ext, group_by_keys, tar_samples
from wds_cloud.core.shardopen import tar_file_expander, tarfile_samples, url_opener
from wds_cloud.errors import SampleError, ShardNotFoundError, ShardReadError

WDS_REGEX = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")

ODD_NAMES = [
    "a.jpg",
    "a.seg.png",
    "dir/a.b.c",
    "d.x/a.jpg",
    "d.x/a",
    "noext",
    "x.y/z",
    ".hidden",
    ".hidden.txt",
    "dir/.hidden.txt",
    "a/b/.hidden.txt",
    "a/b.c/.hidden.txt",
    "a//.x",
    "./a.jpg",
    "a.",
    "a..b",
    "a.JPG",
    "235342 Track 2.0 (Clean).mp3",
    "",
    "/",
    "/.x",
    "...",
    "a/.",
]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_base_plus_ext_matches_webdataset_regex(name: str) -> None:
    m = WDS_REGEX.match(name)
    expected = (m.group(1), m.group(2)) if m else (None, None)
    assert base_plus_ext(name) == expected


def test_base_plus_ext_matches_regex_on_generated_names() -> None:
    alphabet = "a./"
    # every string up to length 6 over a tiny alphabet: exhaustive, not random
    names = [""]
    for _ in range(6):
        names = names + [n + c for n in names if len(n) == len(names[-1]) for c in alphabet]
    for name in set(names):
        m = WDS_REGEX.match(name)
        assert base_plus_ext(name) == ((m.group(1), m.group(2)) if m else (None, None)), name


def conformance_shards(tmp_path: str) -> list[str]:
    """Shards covering every corner named in the issue, written to disk."""
    long_dir = "d" * 60 + "/" + "e" * 60
    shard1 = [
        ("dir.x/s1.jpg", b"jpg1"),
        ("dir.x/s1.json", b'{"a":1}'),
        (".dotfile", b"skipped"),
        ("noext", b"skipped too"),
        ("dir/.hidden.txt", b"quirk"),
        ("s2.TXT", b"upper"),
        ("s2.Seg.PNG", b"multi"),
        ("s2.empty", b""),
        (long_dir + "/s3." + "x" * 80, b"long name"),
        ("données/ключ.txt", b"non-ascii"),
        ("données/ключ.cls", b"3"),
        ("__meta__", b"meta is skipped"),
        ("__key__.txt", b"kept: its key is __key__"),
    ]
    shard2 = [("s2.txt", b"same key as the last sample of shard1 but a new shard")]
    paths = []
    for i, (members, fmt) in enumerate(
        [(shard1, tarfile.GNU_FORMAT), (shard1, tarfile.PAX_FORMAT), (shard2, tarfile.USTAR_FORMAT)]
    ):
        paths.append(write(os.path.join(tmp_path, f"c{i}.tar"), tar_bytes(members, fmt=fmt)))
    paths.append(
        write(os.path.join(tmp_path, "c3.tar.gz"), gz(tar_bytes(shard1, fmt=tarfile.PAX_FORMAT)))
    )
    # webdataset's own TarWriter with its defaults: a PAX header before every member
    pax = os.path.join(tmp_path, "c4.tar")
    with webdataset.TarWriter(pax) as w:
        for i in range(20):
            w.write({"__key__": f"k{i:03d}", "txt": f"t{i}", "json": {"i": i}, "EMPTY": b""})
    paths.append(pax)
    return paths


def test_conformance_with_webdataset_tarfile_to_samples(tmp_path: object) -> None:
    urls = conformance_shards(str(tmp_path))
    theirs = list(
        webdataset.DataPipeline(webdataset.SimpleShardList(urls), webdataset.tarfile_to_samples())
    )
    ours = list(tarfile_samples(urls))
    assert ours == theirs
    assert [list(s) for s in ours] == [list(s) for s in theirs]  # same key order too
    assert len(ours) > 20


def test_conformance_with_webdataset_webdataset_class(tmp_path: object) -> None:
    urls = conformance_shards(str(tmp_path))
    theirs = list(webdataset.WebDataset(urls, shardshuffle=False, empty_check=False))
    ours = list(tarfile_samples(urls, local_paths=True))
    assert ours == theirs
    assert all(s["__local_path__"] == s["__url__"] for s in ours)


def test_unkeyed_members_are_logged_not_silent(
    tmp_path: object, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(
        os.path.join(str(tmp_path), "x.tar"), tar_bytes([("noext", b"1"), ("a.txt", b"2")])
    )
    with caplog.at_level(logging.WARNING, logger="wds_cloud.core.samples"):
        assert [s["__key__"] for s in tarfile_samples([path])] == ["a"]
    assert "skipped 1 member" in caplog.text and "noext" in caplog.text


def test_samples_never_span_shards(tmp_path: object) -> None:
    a = write(os.path.join(str(tmp_path), "a.tar"), tar_bytes([("k.txt", b"1")]))
    b = write(os.path.join(str(tmp_path), "b.tar"), tar_bytes([("k.cls", b"2")]))
    samples = list(tarfile_samples([a, {"url": b}]))
    assert [(s["__key__"], s["__url__"], sorted(s)) for s in samples] == [
        ("k", a, ["__key__", "__url__", "txt"]),
        ("k", b, ["__key__", "__url__", "cls"]),
    ]


def test_non_contiguous_keys_give_two_samples() -> None:
    data = tar_bytes([("a.jpg", b"1"), ("b.txt", b"2"), ("a.txt", b"3")])
    assert [s["__key__"] for s in tar_samples(io.BytesIO(data), "u")] == ["a", "b", "a"]


def test_duplicate_extension_is_an_error_through_the_handler() -> None:
    data = tar_bytes([("a.txt", b"1"), ("a.txt", b"2"), ("b.txt", b"3")])
    with pytest.raises(SampleError, match="duplicate file name") as info:
        list(tar_samples(io.BytesIO(data), "u.tar"))
    assert info.value.key == "a" and "u.tar" in str(info.value)
    assert isinstance(info.value, ValueError)

    skip = ContinueHandler()
    got = list(tar_samples(io.BytesIO(data), "u.tar", handler=skip))
    assert got == [
        {"__key__": "a", "__url__": "u.tar", "txt": b"1"},
        {"__key__": "b", "__url__": "u.tar", "txt": b"3"},
    ]
    assert skip.count == 1

    stop = StopHandler()
    assert [s["txt"] for s in tar_samples(io.BytesIO(data), "u.tar", handler=stop)] == []
    assert stop.count == 1


def _drain(samples: Generator[dict, None, bool]) -> tuple[list[dict], bool]:
    got = []
    while True:
        try:
            got.append(next(samples))
        except StopIteration as end:
            return got, end.value


def test_tar_samples_returns_whether_the_handler_stopped() -> None:
    """``stopped = yield from tar_samples(...)`` is how a reader of several shards stops."""
    data = tar_bytes([("a.txt", b"1"), ("a.txt", b"2"), ("b.txt", b"3")])
    got, stopped = _drain(tar_samples(io.BytesIO(data), "u.tar", handler=StopHandler()))
    assert (got, stopped) == ([], True)
    got, stopped = _drain(tar_samples(io.BytesIO(data), "u.tar", handler=ContinueHandler()))
    assert ([s["__key__"] for s in got], stopped) == (["a", "b"], False)


def test_select_and_rename_files() -> None:
    data = tar_bytes([("a.jpg", b"1"), ("a.txt", b"2"), ("b.jpg", b"3")])
    got = list(tar_samples(io.BytesIO(data), "u", select_files=lambda n: n.endswith(".jpg")))
    assert [sorted(s) for s in got] == [["__key__", "__url__", "jpg"]] * 2
    renamed = list(tar_samples(io.BytesIO(data), "u", rename_files=lambda n: "x/" + n.upper()))
    assert [s["__key__"] for s in renamed] == ["x/A", "x/B"]
    assert sorted(renamed[0]) == ["__key__", "__url__", "jpg", "txt"]


def test_read_error_with_continue_handler_keeps_earlier_samples_and_moves_on(
    tmp_path: object,
) -> None:
    good = tar_bytes([("a.txt", b"1"), ("b.txt", b"2"), ("c.txt", b"3")])
    bad = write(os.path.join(str(tmp_path), "bad.tar"), good[: 512 * 4 + 100])  # cut in c's header
    ok = write(os.path.join(str(tmp_path), "ok.tar"), good)
    with pytest.raises(ShardReadError) as info:
        list(tarfile_samples([bad, ok]))
    assert info.value.url == bad
    handler = ContinueHandler()
    got = list(tarfile_samples([bad, ok], handler=handler))
    keys = [(s["__url__"], s["__key__"]) for s in got]
    # "a" is complete; "b" was being assembled when the error hit in the next header: as in
    # webdataset it arrives with the members read in full; the rest of the shard is skipped,
    # the handler counts the error, and the next shard is read in full.
    assert keys == [(bad, "a"), (bad, "b"), (ok, "a"), (ok, "b"), (ok, "c")]
    assert got[1]["txt"] == b"2"
    assert handler.count == 1 and isinstance(handler.last, ShardReadError)
    stop = StopHandler()
    assert [s["__key__"] for s in tarfile_samples([bad, ok], handler=stop)] == ["a", "b"]


def test_member_cut_short_under_a_handler_is_not_yielded(tmp_path: object) -> None:
    # The sample being assembled keeps only members read in full: the cut member is not there.
    good = tar_bytes([("a.txt", b"1"), ("b.txt", b"2"), ("b.jpg", b"x" * 5000)])
    bad = write(os.path.join(str(tmp_path), "bad.tar"), good[: 512 * 5 + 100])  # inside b.jpg
    got = list(tarfile_samples([bad], handler=ContinueHandler()))
    assert [(s["__key__"], sorted(k for k in s if not k.startswith("__"))) for s in got] == [
        ("a", ["txt"]),
        ("b", ["txt"]),
    ]


def test_missing_shard_goes_through_the_handler(tmp_path: object) -> None:
    ok = write(os.path.join(str(tmp_path), "ok.tar"), tar_bytes([("a.txt", b"1")]))
    missing = os.path.join(str(tmp_path), "missing.tar")
    with pytest.raises(ShardNotFoundError) as info:
        list(tarfile_samples([missing, ok]))
    assert missing in str(info.value)
    handler = ContinueHandler()
    assert [s["__url__"] for s in tarfile_samples([missing, ok], handler=handler)] == [ok]
    assert handler.count == 1


def test_webdataset_style_building_blocks(tmp_path: object) -> None:
    urls = conformance_shards(str(tmp_path))
    chained = list(group_by_keys(tar_file_expander(url_opener(urls), eof_value={})))
    assert chained == list(tarfile_samples(urls, local_paths=True))


def test_pipe_shards_have_no_local_path(tmp_path: object) -> None:
    path = write(os.path.join(str(tmp_path), "a.tar"), tar_bytes([("a.txt", b"1")]))
    got = list(tarfile_samples([f"pipe:cat {path}"], local_paths=True))
    assert got == [{"__key__": "a", "__url__": f"pipe:cat {path}", "txt": b"1"}]


def test_file_urls_give_a_decoded_local_path(tmp_path: object) -> None:
    path = write(os.path.join(str(tmp_path), "a b.tar"), tar_bytes([("a.txt", b"1")]))
    url = "file://" + path.replace(" ", "%20")
    (sample,) = tarfile_samples([url], local_paths=True)
    assert sample["__url__"] == url and sample["__local_path__"] == path


def test_concatenated_archives_in_one_stream_are_all_read(tmp_path: object) -> None:
    one = tar_bytes([("a.txt", b"1"), ("b.txt", b"2")])
    two = tar_bytes([("c.txt", b"3")])
    path = write(os.path.join(str(tmp_path), "fifo-like.tar"), one + two)
    assert [s["__key__"] for s in tarfile_samples([path])] == ["a", "b"]
    assert [s["__key__"] for s in tarfile_samples([path], concatenated=True)] == ["a", "b", "c"]
