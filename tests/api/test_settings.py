"""wds_cloud.settings: the typed environment readers, the override check of every backend
config, and the rejection of unknown ``open()`` options by every opener.

The opener cases need no server: an unknown option must be refused before any connection is
made, so the URLs point at a closed port (127.0.0.1:9) and ``retries=0``; an opener that let
the option through would fail with a connection error instead of :class:`ConfigError`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from wds_cloud.errors import ConfigError
from wds_cloud.settings import (
    apply_overrides,
    env_bool,
    env_choice,
    env_first,
    env_float,
    env_int,
    env_str,
    parse_bool,
    parse_bytes,
    parse_seconds,
    reject_unknown_options,
)

VAR = "WDS_CLOUD_TEST_SETTING"

TRUE_SPELLINGS = ["1", "true", "TRUE", "True", "yes", "Yes", "on", "ON", " 1 ", "2", "-1", "10"]
FALSE_SPELLINGS = ["0", "false", "FALSE", "no", "No", "off", "Off", " 0 ", "00"]
BAD_BOOLEANS = ["maybe", "y", "n", "t", "enable", "1.0", "true!", "yes please"]


# -- env readers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", TRUE_SPELLINGS)
def test_env_bool_true_spellings(text: str) -> None:
    assert env_bool(VAR, False, environ={VAR: text}) is True


@pytest.mark.parametrize("text", FALSE_SPELLINGS)
def test_env_bool_false_spellings(text: str) -> None:
    assert env_bool(VAR, True, environ={VAR: text}) is False


@pytest.mark.parametrize("text", BAD_BOOLEANS)
def test_env_bool_refuses_other_words_naming_variable_and_value(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        env_bool(VAR, False, environ={VAR: text})
    assert f"{VAR}={text!r}" in str(info.value)
    assert "not a boolean" in str(info.value)


@pytest.mark.parametrize("default", [True, False, None])
@pytest.mark.parametrize("environ", [{}, {VAR: ""}, {VAR: "   "}])
def test_unset_or_blank_gives_the_default(environ: dict[str, str], default: bool | None) -> None:
    assert env_bool(VAR, default, environ=environ) is default
    assert env_int(VAR, default, environ=environ) is default
    assert env_float(VAR, default, environ=environ) is default
    assert env_str(VAR, default, environ=environ) is default
    assert env_choice(VAR, ("a",), default, environ=environ) is default


def test_readers_use_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VAR, "on")
    assert env_bool(VAR, False) is True
    monkeypatch.setenv(VAR, "12")
    assert (env_int(VAR, 0), env_float(VAR, 0.0), env_str(VAR, None)) == (12, 12.0, "12")
    monkeypatch.delenv(VAR)
    assert env_int(VAR, 5) == 5


@pytest.mark.parametrize(("text", "value"), [("42", 42), (" 7 ", 7), ("1_000", 1000), ("-3", -3)])
def test_env_int(text: str, value: int) -> None:
    assert env_int(VAR, 0, environ={VAR: text}) == value


@pytest.mark.parametrize("text", ["4.5", "many", "1e3", "0x10"])
def test_env_int_refuses_non_integers(text: str) -> None:
    with pytest.raises(ConfigError, match=rf"{VAR}={text!r} is not an integer"):
        env_int(VAR, 0, environ={VAR: text})


@pytest.mark.parametrize(("text", "value"), [("2.5", 2.5), ("1e3", 1000.0), (" 3 ", 3.0)])
def test_env_float(text: str, value: float) -> None:
    assert env_float(VAR, 0.0, environ={VAR: text}) == value


@pytest.mark.parametrize("text", ["soon", "1,5", "2s"])
def test_env_float_refuses_non_numbers(text: str) -> None:
    with pytest.raises(ConfigError, match=rf"{VAR}={text!r} is not a number"):
        env_float(VAR, 0.0, environ={VAR: text})


def test_env_str_is_stripped() -> None:
    assert env_str(VAR, None, environ={VAR: "  http://h:1 "}) == "http://h:1"


def test_env_choice_is_case_insensitive_and_names_the_choices() -> None:
    assert env_choice(VAR, ("pil", "simplejpeg"), "x", environ={VAR: " PIL "}) == "pil"
    with pytest.raises(ConfigError) as info:
        env_choice(VAR, ("pil", "simplejpeg"), "x", environ={VAR: "turbo"})
    assert f"{VAR}='turbo'" in str(info.value) and "pil, simplejpeg" in str(info.value)


def test_env_first_skips_unset_and_blank() -> None:
    environ = {"A": " ", "B": "b-value", "C": "c-value"}
    assert env_first(("X", "A", "B", "C"), environ) == ("B", "b-value")
    assert env_first(("X", "A"), environ) is None


def test_parse_bool_names_its_source() -> None:
    with pytest.raises(ConfigError, match=r"S3Config.requester_pays='sure'"):
        parse_bool("sure", "S3Config.requester_pays")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 30.0),
        (" 2.5 ", 2.5),
        ("0", 0.0),
        ("30s", 30.0),
        ("30 S", 30.0),
        ("1.5m", 90.0),
        ("500ms", 0.5),
        ("300MS", 0.3),
        ("2h", 7200.0),
        ("1e3", 1000.0),
        ("1_000", 1000.0),
        ("inf", float("inf")),
    ],
)
def test_parse_seconds(text: str, seconds: float) -> None:
    assert parse_seconds(text, VAR) == seconds


@pytest.mark.parametrize("text", ["", "s", "soon", "-1", "-1s", "nan", "1h30m", "30 sec", "5d"])
def test_parse_seconds_refuses_other_text_naming_source_and_value(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_seconds(text, VAR)
    assert str(info.value).startswith(f"{VAR}={text!r} is not a number of seconds (")


@pytest.mark.parametrize(
    ("text", "size"), [("1_048_576", 1 << 20), ("1_024K", 1 << 20), ("1_0.5K", 10752)]
)
def test_parse_bytes_takes_digit_groups_as_int_does(text: str, size: int) -> None:
    assert parse_bytes(text, VAR) == size


@pytest.mark.parametrize("text", ["_1", "1_", "1__0", "1_.5"])
def test_parse_bytes_refuses_misplaced_underscores(text: str) -> None:
    with pytest.raises(ConfigError, match="is not a byte count"):
        parse_bytes(text, VAR)


# -- the variables converted to the one rule -------------------------------------------------------


def test_secure_mode_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    from wds_cloud.security import secure_mode

    for name in ("WDS_SECURE", "WDS_CLOUD_SECURE"):
        monkeypatch.delenv(name, raising=False)
    for text, on in [("2", True), ("yes", True), ("off", False), ("", False), ("0", False)]:
        monkeypatch.setenv("WDS_SECURE", text)
        assert secure_mode() is on, text
    monkeypatch.setenv("WDS_SECURE", "0")
    monkeypatch.setenv("WDS_CLOUD_SECURE", "true")
    assert secure_mode() is True  # either variable switches it on
    monkeypatch.setenv("WDS_CLOUD_SECURE", "enabled")
    with pytest.raises(ConfigError, match="WDS_CLOUD_SECURE='enabled'"):
        secure_mode()


@pytest.mark.parametrize(
    ("var", "make"),
    [
        ("WDS_CLOUD_ALLOW_PIPE", lambda: _opener("pipe").config.allow),
        ("WDS_CLOUD_ALLOW_LOCAL", lambda: _opener("local").allow),
    ],
)
def test_allow_switches(monkeypatch: pytest.MonkeyPatch, var: str, make: Callable[[], Any]) -> None:
    monkeypatch.delenv(var, raising=False)
    assert make() is None  # secure mode decides
    for text, allow in [("off", False), ("no", False), ("yes", True), ("2", True), (" ", None)]:
        monkeypatch.setenv(var, text)
        assert make() is allow, text
    monkeypatch.setenv(var, "sometimes")
    with pytest.raises(ConfigError, match=f"{var}='sometimes'"):
        make()


def test_verbose_cache_accepts_integers_and_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from wds_cloud.openers.cache.shardcache import ShardCache

    for text, verbose in [("0", False), ("3", True), ("on", True), ("no", False)]:
        monkeypatch.setenv("WDS_VERBOSE_CACHE", text)
        assert ShardCache(str(tmp_path)).verbose is verbose, text
    monkeypatch.setenv("WDS_VERBOSE_CACHE", "loud")
    with pytest.raises(ConfigError, match="WDS_VERBOSE_CACHE='loud'"):
        ShardCache(str(tmp_path))


def test_rank_and_world_size_are_named_when_bad(monkeypatch: pytest.MonkeyPatch) -> None:
    from wds_cloud.core.shards import node_info

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert node_info() == (1, 4)
    monkeypatch.setenv("WORLD_SIZE", "four")
    with pytest.raises(ConfigError, match="WORLD_SIZE='four' is not an integer"):
        node_info()


# -- one resolve shape: unknown overrides --------------------------------------------------------


def _configs() -> dict[str, Any]:
    from wds_cloud.openers.ais.opener import AisConfig
    from wds_cloud.openers.azure.config import AzureConfig
    from wds_cloud.openers.gcs.config import GcsConfig
    from wds_cloud.openers.http.opener import HttpConfig
    from wds_cloud.openers.pipe import PipeConfig
    from wds_cloud.openers.s3.config import S3Config

    return {
        "S3": S3Config(),
        "GCS": GcsConfig(),
        "Azure": AzureConfig(),
        "HTTP": HttpConfig(),
        "pipe:": PipeConfig(),
        "AIStore": AisConfig(endpoint="http://127.0.0.1:9"),
    }


@pytest.mark.parametrize("what", ["S3", "GCS", "Azure", "HTTP", "pipe:", "AIStore"])
def test_unknown_override_names_the_allowed_keys(what: str) -> None:
    config = _configs()[what]
    with pytest.raises(ConfigError) as info:
        config.resolve({"retires": 3})
    text = str(info.value)
    assert f"unknown {what} settings ['retires']" in text
    for name in config.__dataclass_fields__:
        assert repr(name) in text


@pytest.mark.parametrize("what", ["S3", "GCS", "Azure", "HTTP", "pipe:", "AIStore"])
def test_resolve_applies_overrides_and_fills_the_rest(what: str) -> None:
    config = _configs()[what]
    field = "grace" if what == "pipe:" else "retries"
    resolved = config.resolve({field: 2}, environ={})
    assert type(resolved) is type(config)
    assert getattr(resolved, field) == 2
    assert getattr(config, field) is None  # the original is left alone
    names = [n for n in ("backoff", "stall_timeout", "grace") if hasattr(resolved, n)]
    assert names and all(getattr(resolved, n) is not None for n in names)


@pytest.mark.parametrize("scheme", ["s3", "gcs", "azure", "http", "pipe", "ais"])
def test_unknown_opener_override_is_a_config_error(scheme: str) -> None:
    with pytest.raises(ConfigError, match=r"unknown .* settings \['retires'\]"):
        _opener(scheme, retires=1)


def test_apply_overrides_leaves_the_config_alone_without_overrides() -> None:
    from wds_cloud.openers.http.opener import HttpConfig

    config = HttpConfig(retries=1)
    assert apply_overrides(config, None, "HTTP") is config
    assert apply_overrides(config, {"retries": 4}, "HTTP").retries == 4
    assert config.retries == 1


# -- every opener rejects unknown open() options ---------------------------------------------------

_CLOSED = "127.0.0.1:9"


def _opener(scheme: str, **overrides: Any) -> Any:
    if scheme in ("local", "file"):
        from wds_cloud.openers.local import LocalOpener

        return LocalOpener(**overrides)
    if scheme == "pipe":
        from wds_cloud.openers.pipe import PipeOpener

        return PipeOpener(**overrides)
    if scheme == "http":
        from wds_cloud.openers.http.opener import HttpOpener

        return HttpOpener(**{"retries": 0, **overrides})
    if scheme == "s3":
        from wds_cloud.openers.s3.opener import S3Opener

        return S3Opener(
            **{"endpoint_url": f"http://{_CLOSED}", "region": "us-east-1", "retries": 0},
            **overrides,
        )
    if scheme == "gcs":
        from wds_cloud.openers.gcs.opener import GcsOpener

        return GcsOpener(**{"endpoint": f"http://{_CLOSED}", "retries": 0, **overrides})
    if scheme == "azure":
        from wds_cloud.openers.azure.opener import AzureOpener

        settings = {"account_name": "acct", "account_key": "a2V5", "retries": 0}
        return AzureOpener(**{"endpoint": f"http://{_CLOSED}/acct", **settings, **overrides})
    if scheme == "ais":
        from wds_cloud.openers.ais.opener import AisOpener

        return AisOpener(**{"endpoint": f"http://{_CLOSED}", "retries": 0, **overrides})
    raise AssertionError(scheme)


def _url(scheme: str, tmp_path: Path) -> str:
    shard = tmp_path / "shard.tar"
    shard.write_bytes(b"x" * 1024)
    return {
        "local": str(shard),
        "file": shard.as_uri(),
        "pipe": f"pipe:cat {shard}",
        "http": f"http://{_CLOSED}/shard.tar",
        "s3": "s3://bucket/shard.tar",
        "gcs": "gs://bucket/shard.tar",
        "azure": "az://bucket/shard.tar",
        "ais": "ais://bucket/shard.tar",
    }[scheme]


_LABEL = {"local": "local", "file": "local", "pipe": "pipe:"}
_ALLOWED = {
    ("http", "open"): ["headers", "prefetch", "prefetch_chunk"],
    ("http", "open_at"): ["headers"],
    ("http", "read_range"): ["headers"],
    ("s3", "open"): ["backoff", "prefetch", "prefetch_chunk", "retries", "stall_timeout"],
    ("s3", "open_at"): ["backoff", "prefetch", "prefetch_chunk", "retries", "stall_timeout"],
    ("s3", "read_range"): ["backoff", "retries", "stall_timeout"],
    ("gcs", "open"): ["generation", "prefetch", "prefetch_chunk"],
    ("gcs", "open_at"): ["generation"],
    ("gcs", "read_range"): ["generation"],
    ("azure", "open"): ["prefetch", "prefetch_chunk"],
    ("ais", "open"): ["etl", "etl_args", "prefetch", "prefetch_chunk"],
    ("ais", "open_at"): ["etl", "etl_args"],
}
_ALL = ("local", "file", "pipe", "http", "s3", "gcs", "azure", "ais")
_CASES = [(scheme, "open") for scheme in _ALL]
_CASES += [
    (scheme, "read_range") for scheme in ("local", "file", "http", "s3", "gcs", "azure", "ais")
]
_CASES += [(scheme, "open_at") for scheme in ("http", "s3", "gcs", "azure", "ais")]


@pytest.mark.parametrize(("scheme", "method"), _CASES)
def test_unknown_open_option_is_refused(scheme: str, method: str, tmp_path: Path) -> None:
    opener = _opener(scheme)
    url = _url(scheme, tmp_path)
    args: tuple[int, ...] = {"open": (), "open_at": (0,), "read_range": (0, 1)}[method]
    with pytest.raises(ConfigError) as info:
        result = getattr(opener, method)(url, *args, bogus_option=1)
        if hasattr(result, "close"):
            result.close()
    label = _LABEL.get(scheme, scheme)
    allowed = _ALLOWED.get((scheme, method), [])
    assert str(info.value) == (
        f"unknown options ['bogus_option'] for {label} {method}(); allowed: {allowed}"
    )


def test_the_registry_passes_the_refusal_on(tmp_path: Path) -> None:
    from wds_cloud.openers.registry import open_url

    shard = tmp_path / "s.tar"
    shard.write_bytes(b"abc")
    with pytest.raises(ConfigError, match=r"unknown options \['etl'\] for local open\(\)"):
        open_url(str(shard), etl="upper")


def test_reject_unknown_options_message() -> None:
    reject_unknown_options({"a": 1}, ("a", "b"), "x open()")
    with pytest.raises(ConfigError) as info:
        reject_unknown_options({"c": 1, "a": 2}, ("b", "a"), "x open()")
    assert str(info.value) == "unknown options ['c'] for x open(); allowed: ['a', 'b']"


def test_one_default_seed_for_every_seeded_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """``$WDS_SEED`` (then ``$WDS_CLOUD_SEED``) is the seed of the shard shuffle and of the
    global order alike, read by the one reader ``settings.default_seed``."""
    from wds_cloud.core.compat import WebDataset
    from wds_cloud.index.globalorder import GlobalBatchSampler
    from wds_cloud.settings import default_seed

    assert default_seed({}) == 0
    assert default_seed({"WDS_CLOUD_SEED": "7"}) == 7
    assert default_seed({"WDS_SEED": "3", "WDS_CLOUD_SEED": "7"}) == 3
    with pytest.raises(ConfigError, match="WDS_CLOUD_SEED"):
        default_seed({"WDS_CLOUD_SEED": "x"})
    monkeypatch.setenv("WDS_SEED", "11")
    assert WebDataset(["a.tar"]).seed == 11
    assert GlobalBatchSampler(10, 2).seed == 11
