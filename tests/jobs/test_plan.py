"""Planning: sample spans against the sequential reader, cuts against ShardWriter's rollover."""

from __future__ import annotations

import io
import itertools
import random

import pytest

from tests.jobs.helpers import read_samples
from tests.support import samplegen
from wds_cloud.core.samples import tar_samples
from wds_cloud.errors import ConfigError
from wds_cloud.jobs.plan import group_samples, plan_spans, sample_spans
from wds_cloud.openers.registry import default_registry
from wds_cloud.writing.shardwriter import ShardWriter


def test_spans_give_the_samples_the_reader_gives(tmp_path):
    """On 150 generated archives (ustar, GNU, PAX, webdataset's and our writer, skipped entries
    in between), reading each sample's span alone gives what the sequential reader gives."""
    checked = 0
    for archive in samplegen.archives(range(150)):
        path = tmp_path / f"a{archive.seed}.tar"
        path.write_bytes(archive.blob)
        try:
            expected = read_samples([str(path)])
        except Exception:
            continue  # archives the reader refuses are the reader tests' business
        spans = sample_spans(str(path), None)
        assert len(spans) == len(expected), archive
        assert not spans or spans[0][0] == 0
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
        got = []
        for start, end in spans:
            data = archive.blob[start:end] + bytes(1024)
            one = list(tar_samples(io.BytesIO(data), str(path)))
            assert len(one) == 1, (archive, start, end)
            one[0].pop("__url__")
            got.append(one[0])
        assert got == expected, archive
        checked += 1
    assert checked >= 100


def test_plan_merges_consecutive_samples_into_one_read(tmp_path):
    with ShardWriter(str(tmp_path / "s%d.tar"), maxcount=100) as w:
        for i in range(6):
            w.write({"__key__": f"k{i}", "txt": b"x" * i})
    path = str(tmp_path / "s0.tar")
    spans = [sample_spans(path, None)]
    plan = plan_spans([path], spans, "o-%d.tar", seed=None, maxcount=4, maxsize=None, nshards=None)
    assert len(plan) == 2 and plan[1].output == "o-1.tar" and plan[-1].index == 1
    assert [len(t.source.spans) for t in plan] == [1, 1]  # one ranged read a task
    assert plan[0].source.spans == ((path, spans[0][0][0], spans[0][3][1]),)
    keys = [s["__key__"] for t in plan for s, _ in t.source.read(default_registry())]
    assert keys == [f"k{i}" for i in range(6)]
    with pytest.raises(IndexError):
        plan[2]


def _writer_cuts(sizes_payloads, maxcount, maxsize, tmp_path):
    """Shard boundaries ShardWriter draws for the samples, as [lo, hi) ranges."""
    counts = []
    with ShardWriter(str(tmp_path / "w-%04d.tar"), maxcount=maxcount, maxsize=maxsize) as w:
        for i, payload in enumerate(sizes_payloads):
            w.write({"__key__": f"k{i:05d}", "bin": payload})
    for url in w.shards:
        counts.append(len(read_samples([url])))
    cuts, lo = [], 0
    for n in counts:
        cuts.append((lo, lo + n))
        lo += n
    return cuts


@pytest.mark.parametrize("seed", range(12))
def test_cuts_match_shardwriter_rollover(seed, tmp_path):
    """group_samples over the samples' tar sizes cuts where ShardWriter rolls over."""
    rng = random.Random(seed)
    payloads = [
        bytes(rng.choice([0, 1, 100, 511, 512, 513, 3000])) for _ in range(rng.randint(1, 60))
    ]
    maxcount = rng.choice([1, 3, 7, 1000])
    maxsize = rng.choice([2048, 5000, 20000, 1e9])
    one = tmp_path / "one"
    one.mkdir()
    with ShardWriter(str(one / "all-%d.tar"), maxcount=10**6) as w:
        for i, payload in enumerate(payloads):
            w.write({"__key__": f"k{i:05d}", "bin": payload})
    spans = sample_spans(w.shards[0], None)
    sizes = [b - a for a, b in spans]
    assert group_samples(sizes, maxcount=maxcount, maxsize=maxsize) == _writer_cuts(
        payloads, maxcount, maxsize, tmp_path
    )


def test_nshards_and_limits():
    assert group_samples([1] * 10, nshards=3) == [(0, 4), (4, 7), (7, 10)]
    assert group_samples([1] * 2, nshards=5) == [(0, 1), (1, 2)]
    assert group_samples([], maxcount=3) == []
    with pytest.raises(ConfigError, match="maxcount, maxsize or nshards"):
        group_samples([1])
    with pytest.raises(ConfigError, match="not both"):
        group_samples([1], nshards=2, maxcount=1)
    with pytest.raises(ConfigError, match="maxcount must be"):
        group_samples([1], maxcount=0)


def test_shuffle_is_a_seeded_permutation_across_shards():
    urls = [f"s{i}.tar" for i in range(5)]
    spans = [[(j * 1024, (j + 1) * 1024) for j in range(200)] for _ in urls]

    def plan(seed):
        p = plan_spans(urls, spans, "o-%d.tar", seed=seed, maxcount=100, maxsize=None, nshards=None)
        return [span for task in p for span in task.source.spans]

    def samples(spans):  # merged spans back into one (url, start) per sample
        return sorted((u, x) for u, start, end in spans for x in range(start, end, 1024))

    a, b, c, unshuffled = plan(1), plan(1), plan(2), plan(None)
    assert a == b and a != c and a != unshuffled
    expected = sorted((u, j * 1024) for u in urls for j in range(200))
    assert samples(a) == samples(unshuffled) == expected
    assert len({u for u, _, _ in a[:100]}) == 5  # the first output shard draws from every input
    assert len(unshuffled) == 10  # in order: one merged span (one read) per output shard


def test_compressed_inputs_are_refused_for_ranged_reads(tmp_path):
    path = tmp_path / "x.tar.gz"
    path.write_bytes(b"")
    with pytest.raises(ConfigError, match="compressed"):
        sample_spans(str(path), None)
