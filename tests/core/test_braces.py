"""Brace patterns: counted without expanding (checked against ``braceexpand``), lazy, limited."""

from __future__ import annotations

import itertools
import random
import re
import tracemalloc

import braceexpand
import pytest

from wds_cloud.aistore.dsort import expand_template
from wds_cloud.braces import DEFAULT_MAX_URLS, max_urls, parse_braces
from wds_cloud.errors import ConfigError, DsortSpecError
from wds_cloud.urls import expand_urls, iter_urls

CAP = 5000

EXAMPLES = [
    "item{1..3}",
    "{a..c}",
    "index.html{,.backup}",
    "python{2.{5..7},3.{2,3}}",
    "{07..10}",
    "{a..g..2}",
    "{4..1}",
    "{2..-1}",
    "{-01..3}",
    "{0..10..0}",
    "{0..10..3}",
    "{10..0..3}",
    "{-05..5..-2}",
    "{Z..a}",
    "{a..Z}",
    "{z..A}",
    "{A..A}",
    "{z..a..5}",
    "{1..1}",
    r"{1\{2,3}",
    r"\{1,2}",
    r"a\\{1,2}",
    "{}",
    "{,}",
    "a{,}b",
    "}{",
    "}{{a,b}",
    "{a}",
    "{{a,b}}",
    "{a,{b,{c,d}}}x{1..2}",
    "{a{1..2},b}{,c}",
    "{1..3\n}",
    "x\\",
    "{a,b}\\",
    "shard-{000000..000009}.tar",
    "s3://b/{train,val}/shard-{00..02}.tar",
]

TOKENS = [
    "{", "{", "{", "}", "}", "}", ",", ",", "..", "..", "a", "c", "Z", "0", "1", "3", "9", "-",
    "0", "07", "\\", "x", "..2", "{1..3}", "{a,b}", "{a..c}", "{,}", "\n", "%",
]  # fmt: skip


def _reference(pattern: str) -> tuple[list[str] | None, bool]:
    """braceexpand's first CAP + 1 names, and whether it raised for unbalanced braces."""
    try:
        return list(itertools.islice(braceexpand.braceexpand(pattern), CAP + 1)), False
    except braceexpand.UnbalancedBracesError:
        return None, True


def _compare(pattern: str) -> None:
    expected, unbalanced = _reference(pattern)
    if unbalanced:
        with pytest.raises(ConfigError, match="unbalanced braces"):
            parse_braces(pattern)
        return
    assert expected is not None
    parsed = parse_braces(pattern)
    got = list(itertools.islice(parsed, CAP + 1))
    assert got == expected, pattern
    if len(expected) <= CAP:
        assert parsed.count == len(expected), pattern
    else:
        assert parsed.count > CAP, pattern


@pytest.mark.parametrize("pattern", EXAMPLES)
def test_examples_match_braceexpand(pattern: str) -> None:
    _compare(pattern)


def test_generated_patterns_match_braceexpand() -> None:
    rng = random.Random(20240611)
    unbalanced = 0
    for _ in range(6000):
        pattern = "".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 14)))
        _compare(pattern)
        unbalanced += _reference(pattern)[1]
    assert 500 < unbalanced < 5500  # both kinds of pattern were exercised


def test_count_without_expanding() -> None:
    assert parse_braces("x-{0..999}{0..999}{0..999}.tar").count == 10**9
    assert parse_braces("x-{0..99999999}.tar").count == 10**8
    assert parse_braces("{a,b{0..9..2},{1..3}{x,y,z}}").count == 1 + 5 + 9
    huge = parse_braces("{0..9}" * 400)
    assert huge.count == 10**400


def test_limit_refuses_with_the_count() -> None:
    with pytest.raises(ConfigError, match=r"expands to 1,000,000,000 URLs.*limit of 1,000,000"):
        expand_urls("x-{0..999}{0..999}{0..999}.tar")
    with pytest.raises(ConfigError, match=r"about 10\^399"):
        iter_urls("{0..9}" * 400)
    with pytest.raises(ConfigError, match=re.escape("x-{0..99999999}.tar")):
        iter_urls("x-{0..99999999}.tar")
    # patterns count together; plain URLs are not counted
    assert len(expand_urls("a{0..5}::b{0..3}", max_urls=10)) == 10
    with pytest.raises(ConfigError, match="more than 10 URLs"):
        expand_urls("a{0..5}::b{0..4}", max_urls=10)
    assert len(expand_urls([f"u{i}" for i in range(30)], max_urls=10)) == 30


def test_limit_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert max_urls() == DEFAULT_MAX_URLS
    monkeypatch.setenv("WDS_CLOUD_MAX_URLS", "5")
    assert max_urls() == 5 and max_urls(7) == 7
    with pytest.raises(ConfigError, match="limit of 5"):
        expand_urls("s{0..5}.tar")
    assert len(expand_urls("s{0..5}.tar", max_urls=6)) == 6
    monkeypatch.setenv("WDS_CLOUD_MAX_URLS", "many")
    with pytest.raises(ConfigError, match="WDS_CLOUD_MAX_URLS='many'"):
        expand_urls("s{0..5}.tar")
    with pytest.raises(ConfigError, match="positive"):
        max_urls(0)


def test_unbalanced_has_a_reason() -> None:
    with pytest.raises(ConfigError) as err:
        expand_urls("x-{0..9.tar")
    assert str(err.value).endswith(")") and "unbalanced braces" in str(err.value)


def test_iteration_is_lazy() -> None:
    tracemalloc.start()
    try:
        urls = iter_urls(
            "shard-{0000000..0999999}.tar::more-{0..999}{0..999}.tar", max_urls=2_000_000
        )
        first = list(itertools.islice(urls, 3))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert first == ["shard-0000000.tar", "shard-0000001.tar", "shard-0000002.tar"]
    assert peak < 1 << 20  # a million names would take ~70 MB


def test_escapes_are_removed_after_expansion() -> None:
    assert expand_urls(r"a\{{1,2}\}") == ["a{1}", "a{2}"]


def test_secret_in_pattern_is_redacted_in_errors() -> None:
    with pytest.raises(ConfigError) as err:
        expand_urls("http://u:TOPSECRET@h/x-{0..99999999}.tar")
    assert "TOPSECRET" not in str(err.value) and "u:***@h" in str(err.value)
    with pytest.raises(ConfigError) as err:
        expand_urls("http://u:TOPSECRET@h/x-{0..9.tar")
    assert "TOPSECRET" not in str(err.value)


def test_dsort_template_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(expand_template("out-{000..999}.tar")) == 1000
    monkeypatch.setenv("WDS_CLOUD_MAX_URLS", "100")
    with pytest.raises(DsortSpecError, match="1,000 names"):
        expand_template("out-{000..999}.tar")
