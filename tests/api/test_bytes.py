"""The one byte-size parser (``settings.parse_bytes``) against direct computation and against
the three parsers it replaced (dSort sizes, the cache size, the read-ahead setting), on every
(number, unit spelling) combination each caller accepts plus generated malformed text."""

from __future__ import annotations

import random
import re

import pytest

from wds_cloud.aistore.dsort.templates import parse_size
from wds_cloud.errors import ConfigError, DsortSpecError
from wds_cloud.openers.cache.shardcache import env_cache_size
from wds_cloud.openers.streams.readahead import readahead_bytes
from wds_cloud.settings import env_bytes, parse_bytes

SCALES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# every spelling of each unit, in the cases people write
SPELLINGS = {
    prefix: [
        f"{p}{s}"
        for p in dict.fromkeys((prefix, prefix.lower()))
        for s in ("", "B", "b", "iB", "ib", "IB", "i", "I")
    ]
    for prefix in "KMGT"
}
SPELLINGS[""] = ["", "B", "b"]


# -- the parsers this one replaced (as they were), the references ------------------------------

_OLD_DSORT_UNITS = {"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}
_OLD_DSORT_UNITS |= {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
_OLD_DSORT_UNITS |= {"KI": 1 << 10, "MI": 1 << 20, "GI": 1 << 30, "TI": 1 << 40}
_OLD_DSORT_UNITS |= {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "B": 1, "": 1}
_OLD_DSORT_RE = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Z]*)$")


def old_dsort(value: str) -> int | None:
    text = value.strip().upper()
    if text.startswith("-"):
        return None
    match = _OLD_DSORT_RE.match(text)
    if text and (match is None or match.group(2) not in _OLD_DSORT_UNITS):
        return None
    return int(float(match.group(1)) * _OLD_DSORT_UNITS[match.group(2)]) if match else 0


def old_cache(raw: str) -> int | None:
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return int(float(raw))
    except (ValueError, OverflowError):
        return None


def old_readahead(value: str) -> int | None:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = value.strip().upper().removesuffix("IB").removesuffix("B")
    unit = text[-1:] if text[-1:] in units else ""
    digits = text[: len(text) - len(unit)].strip()
    if not digits.isdigit():
        return None
    return int(digits) * units[unit]


# -- generated inputs ----------------------------------------------------------------------------


def _numbers(rng: random.Random, fractions: bool) -> list[tuple[str, float | int]]:
    out: list[tuple[str, float | int]] = [("0", 0), ("1", 1), ("007", 7), ("1023", 1023)]
    out += [(str(n), n) for n in (rng.randrange(10**k) for k in range(1, 13) for _ in range(3))]
    if fractions:
        for _ in range(30):
            whole, frac = rng.randrange(10**4), rng.randrange(10**3)
            text = rng.choice([f"{whole}.{frac}", f".{frac}", f"{whole}."])
            out.append((text, float(text)))
    return out


def _direct(number: float | int, scale: int) -> int:
    return number * scale if isinstance(number, int) else int(number * scale)


def _cases(fractions: bool, prefixes: str) -> list[tuple[str, int]]:
    rng = random.Random(7)
    cases = []
    for text, number in _numbers(rng, fractions):
        for prefix in ("", *prefixes):
            for unit in SPELLINGS[prefix]:
                space = rng.choice(["", " ", "  "])
                pad = rng.choice(["", " ", "\t"])
                cases.append((f"{pad}{text}{space}{unit}{pad}", _direct(number, SCALES[prefix])))
    return cases


DSORT_CASES = _cases(fractions=True, prefixes="KMGT")
READAHEAD_CASES = [
    (t, v) for t, v in _cases(fractions=False, prefixes="KMG") if t.strip().upper()[-1:] != "I"
]
MALFORMED = [
    "",
    "M",
    "KB",
    "1.2.3MB",
    "10 parsecs",
    "10XB",
    "5KIBB",
    "1 6M",
    "0x10",
    "inf",
    "nan",
    "1e",
    "e3",
    "--1",
    "1M B",
    "1 iB",
    "١٢",  # Arabic-Indic digits: not ASCII
    "²",
]


def _rejects(call: object, *args: object, error: type[Exception] = ConfigError) -> bool:
    try:
        call(*args)  # type: ignore[operator]
    except error:
        return True
    return False


def test_the_generated_cases_cover_every_unit_spelling() -> None:
    assert len(DSORT_CASES) > 3000
    assert len(READAHEAD_CASES) > 1000
    units = {re.sub(r"^[0-9. \t]*", "", t.strip()) for t, _ in DSORT_CASES}
    assert units == {u for spellings in SPELLINGS.values() for u in spellings}


@pytest.mark.parametrize(("text", "expected"), DSORT_CASES[::31])
def test_parse_bytes_is_the_direct_computation(text: str, expected: int) -> None:
    assert parse_bytes(text, "X") == expected


def test_dsort_sizes_match_direct_computation_and_the_old_parser() -> None:
    for text, expected in DSORT_CASES:
        assert parse_size(text) == expected == old_dsort(text), text


def test_readahead_matches_direct_computation_and_the_old_parser() -> None:
    for text, expected in READAHEAD_CASES:
        env = {"WDS_CLOUD_READAHEAD": text}
        if not text.strip():
            continue
        assert readahead_bytes(text) == expected == old_readahead(text), text
        assert readahead_bytes(None, env) == expected, text


def test_cache_size_matches_the_old_parser_on_plain_and_scientific_numbers() -> None:
    rng = random.Random(11)
    texts = [str(rng.randrange(-(10**15), 10**15)) for _ in range(300)]
    texts += [f"{rng.randrange(1, 999)}e{rng.randrange(0, 15)}" for _ in range(100)]
    texts += [f"{rng.uniform(0, 1e6):.3f}" for _ in range(100)]
    texts += ["1e11", "1E11", "+5", "-0", " 12 ", "1.5e3", "lots", "inf", "nan", "1e400"]
    for text in texts:
        environ = {"WDS_CLOUD_CACHE_SIZE": text}
        old = old_cache(text)
        if old is None:
            assert _rejects(env_cache_size, environ), text
        else:
            assert env_cache_size(environ) == old, text


def test_cache_size_accepts_units_now() -> None:
    assert env_cache_size({"WDS_CACHE_SIZE": "100G"}) == 100 << 30


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_text_is_rejected_by_every_caller(text: str) -> None:
    if text:  # dSort reads "" as 0, as AIStore does
        assert _rejects(parse_size, text, error=DsortSpecError)
        assert _rejects(parse_bytes, text, "X")
        assert old_dsort(text) is None
    assert _rejects(readahead_bytes, text)
    assert _rejects(env_cache_size, {"WDS_CLOUD_CACHE_SIZE": text}) or not text.strip()


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"fraction": False}, "1.5M"),
        ({"fraction": False}, ".5G"),
        ({}, "1e3"),
        ({}, "-1"),
        ({}, "+1"),
    ],
)
def test_each_syntax_switch_rejects_what_it_leaves_out(kwargs: dict[str, bool], text: str) -> None:
    with pytest.raises(ConfigError, match=r"^SOME_VAR='.*' is not a byte count$"):
        parse_bytes(text, "SOME_VAR", **kwargs)


def test_errors_name_the_field() -> None:
    with pytest.raises(DsortSpecError) as err:
        parse_size("10 parsecs", field="max_mem_usage")
    assert err.value.field == "max_mem_usage"
    with pytest.raises(ConfigError, match="WDS_CLOUD_READAHEAD"):
        readahead_bytes(None, {"WDS_CLOUD_READAHEAD": "1.5M"})
    with pytest.raises(ConfigError, match="WDS_CACHE_SIZE"):
        env_cache_size({"WDS_CACHE_SIZE": "lots"})


def test_env_bytes_reads_like_the_other_env_readers() -> None:
    assert env_bytes("N", None, environ={}) is None
    assert env_bytes("N", 5, environ={"N": "  "}) == 5
    assert env_bytes("N", 5, environ={"N": "2K"}) == 2048
    assert env_bytes("N", None, environ={"N": "1e3"}, exponent=True) == 1000
    with pytest.raises(ConfigError, match="N='x'"):
        env_bytes("N", None, environ={"N": "x"})
