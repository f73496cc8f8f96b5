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
from wds_cloud.jobs.plan import group_samples, sample_spans, shuffled, span_sources
from wds_cloud.jobs.sources import SpanSource
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


def test_span_source_merges_consecutive_samples(tmp_path):
    with ShardWriter(str(tmp_path / "s%d.tar"), maxcount=100) as w:
        for i in range(6):
            w.write({"__key__": f"k{i}", "txt": b"x" * i})
    path = tmp_path / "s0.tar"
    spans = [sample_spans(str(path), None)]
    order = [(0, 0), (0, 1), (0, 3), (0, 2)]
    (src,) = span_sources([str(path)], spans, order, [(0, 4)])
    assert len(src.spans) == 3  # 0-1 merged, then 3, then 2
    keys = [s["__key__"] for s, _ in SpanSource(src.spans).read(default_registry())]
    assert keys == ["k0", "k1", "k3", "k2"]


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


def test_shuffle_is_a_seeded_permutation():
    order = [(0, i) for i in range(1000)]
    a, b, c = shuffled(order, 1), shuffled(order, 1), shuffled(order, 2)
    assert a == b and a != c and sorted(a) == order and a != order


def test_compressed_inputs_are_refused_for_ranged_reads(tmp_path):
    path = tmp_path / "x.tar.gz"
    path.write_bytes(b"")
    with pytest.raises(ConfigError, match="compressed"):
        sample_spans(str(path), None)
