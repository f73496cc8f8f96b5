"""Every field of every backend config resolves one way (``wds_cloud.settings.ConfigTable``):
argument > ``WDS_CLOUD_<BACKEND>_<FIELD>`` > the backend's own variables > default, with one
boolean, one duration and one byte-size syntax, and a bad value's error naming the variable (or
``Owner.field`` for an argument) and the value.

:data:`CASES` holds one :class:`Case` per field of every table; a field added to a config
without a table entry, or to a table without a case here, fails
:func:`test_every_field_has_a_table_entry_and_a_case`. Every environment is passed as
``environ=`` (nothing is read from or written to ``os.environ``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from wds_cloud.errors import ConfigError
from wds_cloud.openers.ais.config import AIS_SETTINGS, AisConfig
from wds_cloud.openers.azure.config import AZURE_SETTINGS, AzureConfig
from wds_cloud.openers.cache.shardcache import CACHE_SETTINGS, ShardCache
from wds_cloud.openers.gcs.config import GCS_SETTINGS, GcsConfig
from wds_cloud.openers.hf.config import HF_SETTINGS, HfConfig
from wds_cloud.openers.http.config import HTTP_SETTINGS, HttpConfig
from wds_cloud.openers.pipe import PIPE_SETTINGS, PipeConfig
from wds_cloud.openers.s3.config import S3_SETTINGS, S3Config
from wds_cloud.openers.streams.backoff import RetryPolicy
from wds_cloud.openers.streams.readahead import READAHEAD_SETTINGS, readahead_bytes
from wds_cloud.settings import BOOL, SECONDS, ConfigTable

ROOT = Path(__file__).resolve().parents[2]

TABLES: dict[str, ConfigTable] = {
    "S3": S3_SETTINGS,
    "GCS": GCS_SETTINGS,
    "AZURE": AZURE_SETTINGS,
    "HTTP": HTTP_SETTINGS,
    "AIS": AIS_SETTINGS,
    "PIPE": PIPE_SETTINGS,
    "CACHE": CACHE_SETTINGS,
    "READAHEAD": READAHEAD_SETTINGS,
    "HF": HF_SETTINGS,
}
CONFIGS: dict[str, type] = {
    "S3": S3Config,
    "GCS": GcsConfig,
    "AZURE": AzureConfig,
    "HTTP": HttpConfig,
    "AIS": AisConfig,
    "PIPE": PipeConfig,
    "HF": HfConfig,
}
DOCS = {
    "S3": "docs/s3.md",
    "GCS": "docs/gcs.md",
    "AZURE": "docs/azure.md",
    "AIS": "docs/aistore.md",
    "HTTP": "docs/openers.md",
    "PIPE": "docs/openers.md",
    "CACHE": "docs/openers.md",
    "READAHEAD": "docs/openers.md",
    "HF": "docs/hf.md",
}
_CACHE_ATTRS = {"dir": "cache_dir", "size": "max_bytes"}
_SOME_DIR = "/tmp/wds-config-test-cache"  # never created: ShardCache makes no directory


def resolve(
    backend: str, name: str, argument: Any = None, environ: Mapping[str, str] | None = None
) -> Any:
    """Field ``name`` of ``backend`` as its owner resolves it: a config built with
    ``argument`` (None: not given) and resolved under ``environ`` (default: empty)."""
    env = dict(environ or {})
    if backend == "READAHEAD":
        return readahead_bytes(argument, env)
    if backend == "CACHE":
        kwargs: dict[str, Any] = {"cache_dir": _SOME_DIR} if name != "dir" else {}
        if argument is not None:
            kwargs[_CACHE_ATTRS.get(name, name)] = argument
        try:
            cache = ShardCache(**kwargs, environ=env)
        except ConfigError as exc:
            if "needs cache_dir=" in str(exc):
                return None  # no directory: the one setting without a default
            raise
        return getattr(cache, _CACHE_ATTRS.get(name, name))
    args = {} if argument is None else {name: argument}
    return getattr(CONFIGS[backend](**args).resolve(environ=env), name)


@dataclass(frozen=True)
class Case:
    """Test data of one field.

    Attributes:
        text: a value of ``WDS_CLOUD_<BACKEND>_<FIELD>``; ``value``: what it resolves to
            (not the default).
        argument: a typed constructor argument; ``from_argument``: what it resolves to
            (default: ``argument`` itself).
        own: each of the backend's own variables -> (a text, its value, not the default).
        versus: a text of our variable beating ``own`` in the precedence check, and its value
            (default ``text``/``value``; booleans need another one).
        bad: texts that are refused (none where any text is accepted).
    """

    text: str
    value: Any
    argument: Any
    from_argument: Any = None
    own: Mapping[str, tuple[str, Any]] = field(default_factory=dict)
    versus: tuple[str, Any] | None = None
    bad: tuple[str, ...] = ()


_RETRIES = Case("9", 9, 1, bad=("many", "-1", "2.5"))
_BACKOFF = Case("250ms", 0.25, 2, 2.0, bad=("soon", "-1"))
_STALL = Case("2m", 120.0, 5, 5.0, bad=("0", "never", "-3s"))
_PREFETCH = Case("6", 6, 2, bad=("many", "-1"))
_PREFETCH_CHUNK = Case("1M", 1 << 20, 4096, bad=("lots", "0", "1.5M"))

CASES: dict[tuple[str, str], Case] = {
    ("S3", "endpoint_url"): Case(
        "http://wds:3",
        "http://wds:3",
        "http://arg:4",
        own={
            "AWS_ENDPOINT_URL_S3": ("http://s3only:2", "http://s3only:2"),
            "AWS_ENDPOINT_URL": ("http://generic:1", "http://generic:1"),
        },
    ),
    ("S3", "region"): Case(
        "eu-north-1",
        "eu-north-1",
        "us-east-2",
        own={
            "AWS_REGION": ("eu-central-1", "eu-central-1"),
            "AWS_DEFAULT_REGION": ("eu-west-1", "eu-west-1"),
        },
    ),
    ("S3", "profile"): Case("wds", "wds", "arg", own={"AWS_PROFILE": ("aws", "aws")}),
    ("S3", "addressing_style"): Case("VIRTUAL", "virtual", "path", bad=("sideways",)),
    ("S3", "requester_pays"): Case("on", True, False, bad=("maybe", "1.0")),
    ("S3", "max_attempts"): Case("7", 7, 2, bad=("many", "0")),
    ("S3", "retries"): _RETRIES,
    ("S3", "backoff"): _BACKOFF,
    ("S3", "multipart_chunksize"): Case("32M", 32 << 20, 8 << 20, bad=("lots", "1000", "1.5G")),
    ("S3", "prefetch"): _PREFETCH,
    ("S3", "prefetch_chunk"): _PREFETCH_CHUNK,
    ("S3", "connect_timeout"): Case("3s", 3.0, 1.5, bad=("soon",)),
    ("S3", "read_timeout"): Case("1.5m", 90.0, 2.5, bad=("soon", "-1")),
    ("S3", "stall_timeout"): _STALL,
    ("S3", "list_page_size"): Case("50", 50, 10, bad=("0", "x")),
    ("S3", "access_key_id"): Case("AKIA-WDS", "AKIA-WDS", "AKIA-ARG"),
    ("S3", "secret_access_key"): Case("s3cr3t", "s3cr3t", "arg-secret"),
    ("S3", "session_token"): Case("tok", "tok", "arg-tok"),
    ("GCS", "project"): Case(
        "p-wds", "p-wds", "p-arg", own={"GOOGLE_CLOUD_PROJECT": ("p-sdk", "p-sdk")}
    ),
    ("GCS", "credentials"): Case(
        "/wds.json",
        "/wds.json",
        "/arg.json",
        own={"GOOGLE_APPLICATION_CREDENTIALS": ("/sdk.json", "/sdk.json")},
    ),
    ("GCS", "endpoint"): Case(
        "localhost:4443/",
        "http://localhost:4443",
        "https://arg:3",
        own={"STORAGE_EMULATOR_HOST": ("sdk:1", "http://sdk:1")},
    ),
    ("GCS", "anonymous"): Case("yes", True, False, bad=("maybe",)),
    ("GCS", "retries"): _RETRIES,
    ("GCS", "backoff"): _BACKOFF,
    ("GCS", "chunk_size"): Case("512K", 512 << 10, 256 << 10, bad=("1000", "lots", "0")),
    ("GCS", "connect_timeout"): Case("3s", 3.0, 1.5, bad=("soon",)),
    ("GCS", "read_timeout"): Case("1.5m", 90.0, 2.5, bad=("soon",)),
    ("GCS", "stall_timeout"): _STALL,
    ("GCS", "page_size"): Case("7", 7, 3, bad=("0", "x")),
    ("GCS", "prefetch"): _PREFETCH,
    ("GCS", "prefetch_chunk"): _PREFETCH_CHUNK,
    ("AZURE", "connection_string"): Case(
        "AccountName=w",
        "AccountName=w",
        "AccountName=a",
        own={"AZURE_STORAGE_CONNECTION_STRING": ("AccountName=s", "AccountName=s")},
    ),
    ("AZURE", "account_name"): Case(
        "wds",
        "wds",
        "arg",
        own={
            "AZURE_STORAGE_ACCOUNT_NAME": ("sdk", "sdk"),
            "AZURE_STORAGE_ACCOUNT": ("cli", "cli"),
            "AZURE_ACCOUNT_NAME": ("mosaic", "mosaic"),
        },
    ),
    ("AZURE", "account_key"): Case(
        "a2V5",
        "a2V5",
        "YXJn",
        own={
            "AZURE_STORAGE_ACCOUNT_KEY": ("c2Rr", "c2Rr"),
            "AZURE_STORAGE_KEY": ("Y2xp", "Y2xp"),
            "AZURE_ACCOUNT_ACCESS_KEY": ("bW9z", "bW9z"),
        },
    ),
    ("AZURE", "sas_token"): Case(
        "sv=1&sig=w", "sv=1&sig=w", "sv=1&sig=a", own={"AZURE_STORAGE_SAS_TOKEN": ("sv=2", "sv=2")}
    ),
    ("AZURE", "endpoint"): Case(
        "localhost:10000/acct/", "http://localhost:10000/acct", "https://arg:3"
    ),
    ("AZURE", "anonymous"): Case("yes", True, False, bad=("maybe",)),
    ("AZURE", "retries"): _RETRIES,
    ("AZURE", "backoff"): _BACKOFF,
    ("AZURE", "stall_timeout"): _STALL,
    ("AZURE", "block_size"): Case("4M", 4 << 20, 1 << 20, bad=("lots", "0")),
    ("AZURE", "connect_timeout"): Case("3s", 3.0, 1.5, bad=("soon",)),
    ("AZURE", "read_timeout"): Case("1.5m", 90.0, 2.5, bad=("soon",)),
    ("AZURE", "page_size"): Case("7", 7, 3, bad=("0", "x")),
    ("AZURE", "prefetch"): _PREFETCH,
    ("AZURE", "prefetch_chunk"): _PREFETCH_CHUNK,
    ("HTTP", "timeout"): Case("45s", 45.0, 3, 3.0, bad=("soon", "-1")),
    ("HTTP", "retries"): _RETRIES,
    ("HTTP", "backoff"): _BACKOFF,
    ("HTTP", "stall_timeout"): _STALL,
    ("HTTP", "headers"): Case(
        '{"X-A": "1"}', {"X-A": "1"}, {"X-B": "2"}, bad=("Bearer abc", '["a"]', '{"a": 1}')
    ),
    ("HTTP", "max_redirects"): Case("3", 3, 0, bad=("-1", "x")),
    ("HTTP", "allow_downgrade"): Case("yes", True, False, bad=("maybe",)),
    ("HTTP", "prefetch"): _PREFETCH,
    ("HTTP", "prefetch_chunk"): _PREFETCH_CHUNK,
    ("AIS", "endpoint"): Case(
        "http://wds:1/",
        "http://wds:1",
        "https://arg:3",
        own={"AIS_ENDPOINT": ("http://ais:2", "http://ais:2")},
        bad=("ais.example:8080",),
    ),
    ("AIS", "token"): Case(
        "tok-wds", "tok-wds", "tok-arg", own={"AIS_AUTHN_TOKEN": ("tok-sdk", "tok-sdk")}
    ),
    ("AIS", "timeout"): Case(
        "4s,1m",
        (4.0, 60.0),
        (5.0, 90.0),
        own={"AIS_CONNECT_TIMEOUT": ("5", (5.0, 20.0)), "AIS_READ_TIMEOUT": ("2m", (3.0, 120.0))},
        bad=("soon", "1,2,3", "-1"),
    ),
    ("AIS", "retries"): _RETRIES,
    ("AIS", "backoff"): _BACKOFF,
    ("AIS", "stall_timeout"): _STALL,
    ("AIS", "etl"): Case("upper", "upper", "lower"),
    ("AIS", "etl_args"): Case('{"k":"v"}', '{"k":"v"}', {"a": 1}, '{"a":1}'),
    ("AIS", "provider"): Case("GS", "gcp", "aws", bad=("ftp",)),
    ("AIS", "page_size"): Case("100", 100, 5, bad=("-1", "x")),
    ("AIS", "part_size"): Case("8M", 8 << 20, 1 << 20, bad=("0", "lots")),
    ("AIS", "prefetch"): _PREFETCH,
    ("AIS", "prefetch_chunk"): _PREFETCH_CHUNK,
    ("AIS", "batch_entries"): Case("200", 200, 7, bad=("0", "-1", "many")),
    ("AIS", "batch_bytes"): Case("8M", 8 << 20, 1 << 20, bad=("0", "lots")),
    ("PIPE", "allow"): Case(
        "off", False, True, own={"WDS_CLOUD_ALLOW_PIPE": ("yes", True)}, bad=("sometimes",)
    ),
    ("PIPE", "grace"): Case("500ms", 0.5, 1, 1.0, bad=("soon",)),
    ("PIPE", "stderr_tail"): Case("4K", 4096, 16, bad=("-1", "lots")),
    ("PIPE", "exit_timeout"): Case("5m", 300.0, 30, 30.0, bad=("later",)),
    ("CACHE", "dir"): Case(
        "~/wds-cache",
        os.path.expanduser("~/wds-cache"),
        "/tmp/arg-cache",
        own={"WDS_CACHE": ("/tmp/wds-cache", "/tmp/wds-cache")},
    ),
    ("CACHE", "size"): Case(
        "100G", 100 << 30, 5000, own={"WDS_CACHE_SIZE": ("1e11", 10**11)}, bad=("lots", "1 6M")
    ),
    ("CACHE", "verbose"): Case(
        "yes",
        True,
        False,
        own={"WDS_VERBOSE_CACHE": ("1", True)},
        versus=("off", False),
        bad=("loud",),
    ),
    ("CACHE", "drain_bytes"): Case("64K", 64 << 10, 0, bad=("-1", "lots")),
    ("HF", "endpoint"): Case(
        "http://wds:1",
        "http://wds:1",
        "https://arg:3",
        own={"HF_ENDPOINT": ("http://hf:2", "http://hf:2")},
        bad=("huggingface.co",),
    ),
    ("HF", "token"): Case(
        "tok-wds",
        "tok-wds",
        "tok-arg",
        own={"HF_TOKEN": ("tok-hf", "tok-hf"), "HUGGING_FACE_HUB_TOKEN": ("tok-old", "tok-old")},
    ),
    ("READAHEAD", "readahead"): Case("32M", 32 << 20, 4096, bad=("lots", "-1", "1.5M")),
}

FIELDS = sorted(CASES)


def _case(key: tuple[str, str]) -> Case:
    return CASES[key]


def _argument(case: Case) -> Any:
    return case.argument if case.from_argument is None else case.from_argument


def _fields(pick: Any) -> list[tuple[str, str]]:
    return [key for key in FIELDS if pick(TABLES[key[0]].field(key[1]))]


def test_every_field_has_a_table_entry_and_a_case() -> None:
    for backend, table in TABLES.items():
        names = [f.name for f in table.fields]
        assert len(names) == len(set(names)), backend
        if backend in CONFIGS:
            assert set(names) == {f.name for f in dataclasses.fields(CONFIGS[backend])}, backend
        assert set(names) == {n for b, n in CASES if b == backend}, backend
        for f in table.fields:
            assert set(CASES[backend, f.name].own) == set(f.env), (backend, f.name)


def test_every_variable_is_in_the_docs() -> None:
    for backend, table in TABLES.items():
        text = (ROOT / DOCS[backend]).read_text()
        for f in table.fields:
            for variable in table.variables(f.name):
                assert f"`{variable}" in text, (DOCS[backend], variable)


@pytest.mark.parametrize("key", FIELDS, ids="-".join)
def test_our_variable_sets_the_field(key: tuple[str, str]) -> None:
    backend, name = key
    case = _case(key)
    variable = TABLES[backend].variable(name)
    assert variable == "_".join(
        p for p in ("WDS_CLOUD", TABLES[backend].section, name.upper()) if p
    )
    assert resolve(backend, name, environ={}) != case.value  # the check below can fail
    assert resolve(backend, name, environ={variable: case.text}) == case.value
    assert resolve(backend, name, environ={variable: f"  {case.text} "}) == case.value
    assert resolve(backend, name, environ={variable: "   "}) == resolve(backend, name)
    assert resolve(backend, name, case.text) == case.value  # a string argument reads the same


@pytest.mark.parametrize("key", FIELDS, ids="-".join)
def test_the_argument_beats_every_variable(key: tuple[str, str]) -> None:
    backend, name = key
    case = _case(key)
    table = TABLES[backend]
    environ = {table.variable(name): case.text} | {v: t for v, (t, _) in case.own.items()}
    expected = _argument(case)
    assert expected != case.value  # what wins without the argument
    assert resolve(backend, name, case.argument, environ) == expected


_WITH_OWN = [key for key in FIELDS if CASES[key].own]


@pytest.mark.parametrize("key", _WITH_OWN, ids="-".join)
def test_the_backend_variable_comes_after_ours(key: tuple[str, str]) -> None:
    backend, name = key
    case = _case(key)
    ours = TABLES[backend].variable(name)
    text, value = case.versus or (case.text, case.value)
    default = resolve(backend, name, environ={})
    for variable, (own_text, own_value) in case.own.items():
        assert own_value != default and own_value != value
        assert resolve(backend, name, environ={variable: own_text}) == own_value
        assert resolve(backend, name, environ={variable: own_text, ours: text}) == value


def test_the_first_backend_variable_wins() -> None:
    several = [k for k in _WITH_OWN if len(CASES[k].own) > 1 and k != ("AIS", "timeout")]
    assert several
    for backend, name in several:
        own = list(CASES[backend, name].own.items())
        environ = {variable: text for variable, (text, _) in own}
        assert resolve(backend, name, environ=environ) == own[0][1][1]


def test_the_ais_sdk_timeouts_combine() -> None:
    both = {"AIS_CONNECT_TIMEOUT": "5", "AIS_READ_TIMEOUT": "0"}
    assert resolve("AIS", "timeout", environ=both) == (5.0, 0.0)  # 0: no limit, as the SDK
    assert resolve("AIS", "timeout", environ={}) == (3.0, 20.0)  # the SDK's default


_BAD = [(key, bad) for key in FIELDS for bad in CASES[key].bad]


@pytest.mark.parametrize(
    ("key", "bad"), _BAD, ids=lambda x: "-".join(x) if isinstance(x, tuple) else x
)
def test_a_bad_value_names_its_variable(key: tuple[str, str], bad: str) -> None:
    backend, name = key
    table = TABLES[backend]
    f = table.field(name)
    shown = "<hidden>" if f.secret else f"{bad!r}"
    for variable in table.variables(name):
        with pytest.raises(ConfigError) as info:
            resolve(backend, name, environ={variable: bad})
        message = str(info.value)
        assert f"{variable}={shown}" in message
        if f.secret:
            assert bad not in message
    with pytest.raises(ConfigError) as info:
        resolve(backend, name, bad)
    assert f"{table.owner}.{f.argument or name}={shown}" in str(info.value)


def test_every_field_whose_kind_can_refuse_has_bad_values() -> None:
    for key in FIELDS:
        kind = TABLES[key[0]].field(key[1]).kind
        try:
            kind.parse("?! not a value", "X")
        except ConfigError:
            refuses = True
        else:
            refuses = False
        assert bool(CASES[key].bad) == refuses, key


@pytest.mark.parametrize("key", FIELDS, ids="-".join)
def test_a_wrong_type_of_argument_is_refused(key: tuple[str, str]) -> None:
    backend, name = key
    table = TABLES[backend]
    shown = "<hidden>" if table.field(name).secret else r"\[1\]"
    with pytest.raises(ConfigError, match=rf"^{table.owner}\.\w+={shown} is not "):
        resolve(backend, name, [1])


# -- one syntax per type, on every field of that type -------------------------------------------

TRUE = ["1", "true", "TRUE", "yes", "Yes", "on", "ON", "2", "-1"]
FALSE = ["0", "false", "False", "no", "NO", "off", "00"]
DURATIONS = [
    ("30", 30.0),
    ("2.5", 2.5),
    ("30s", 30.0),
    (" 30 S ", 30.0),
    ("1.5m", 90.0),
    ("500ms", 0.5),
    ("2h", 7200.0),
    ("1e3", 1000.0),
    ("1_000ms", 1.0),
    ("inf", float("inf")),
]
BAD_DURATIONS = ["soon", "-1", "nan", "5 parsecs", "1.5.2s", "s", "30 sec", "1h30m"]
BYTE_SIZES = [
    ("8388608", 8 << 20),
    ("8_388_608", 8 << 20),
    ("8M", 8 << 20),
    ("8MiB", 8 << 20),
    ("8 mb", 8 << 20),
    ("8192K", 8 << 20),
    ("1G", 1 << 30),
]
BAD_BYTES = ["lots", "8X", "M", "1 6M", "0x10"]


@pytest.mark.parametrize("key", _fields(lambda f: f.kind is BOOL), ids="-".join)
def test_one_boolean_syntax(key: tuple[str, str]) -> None:
    backend, name = key
    variable = TABLES[backend].variable(name)
    for spellings, value in ((TRUE, True), (FALSE, False)):
        for text in spellings:
            assert resolve(backend, name, environ={variable: text}) is value, text
            assert resolve(backend, name, text) is value, text
    assert resolve(backend, name, 1) is True  # an integer argument is a boolean too


_NON_NEGATIVE_DURATIONS = _fields(lambda f: f.kind is SECONDS and not f.checks)


@pytest.mark.parametrize("key", _fields(lambda f: f.kind is SECONDS), ids="-".join)
def test_one_duration_syntax(key: tuple[str, str]) -> None:
    backend, name = key
    variable = TABLES[backend].variable(name)
    for text, seconds in DURATIONS:
        assert resolve(backend, name, environ={variable: text}) == seconds, text
        assert resolve(backend, name, text) == seconds, text
    for text in BAD_DURATIONS:
        with pytest.raises(ConfigError, match="is not a number of seconds"):
            resolve(backend, name, environ={variable: text})
    assert resolve(backend, name, 7) == 7.0 and resolve(backend, name, 0.25) == 0.25
    if key in _NON_NEGATIVE_DURATIONS:
        assert resolve(backend, name, environ={variable: "0"}) == 0.0


@pytest.mark.parametrize("key", _fields(lambda f: f.kind.what == "a byte count"), ids="-".join)
def test_one_byte_size_syntax(key: tuple[str, str]) -> None:
    backend, name = key
    variable = TABLES[backend].variable(name)
    for text, size in BYTE_SIZES:
        assert resolve(backend, name, environ={variable: text}) == size, text
        assert resolve(backend, name, text) == size, text
    for text in BAD_BYTES:
        with pytest.raises(ConfigError, match=f"{variable}={text!r} is not a byte count"):
            resolve(backend, name, environ={variable: text})


def test_every_syntax_is_used() -> None:
    assert len(_fields(lambda f: f.kind is BOOL)) >= 4
    assert len(_fields(lambda f: f.kind is SECONDS)) >= 15
    assert len(_fields(lambda f: f.kind.what == "a byte count")) >= 10


# -- the retry policy of every backend comes from its config ----------------------------------


@pytest.mark.parametrize(
    ("backend", "max_backoff"), [("S3", 5.0), ("GCS", 5.0), ("HTTP", 10.0), ("AIS", 10.0)]
)
def test_the_retry_policy_comes_from_the_config(backend: str, max_backoff: float) -> None:
    table = TABLES[backend]
    environ = {
        table.variable("retries"): "4",
        table.variable("backoff"): "300ms",
        table.variable("stall_timeout"): "1.5m",
    }
    policy = RetryPolicy.from_config(CONFIGS[backend]().resolve(environ=environ))
    assert policy == RetryPolicy(
        retries=4, backoff=0.3, max_backoff=max_backoff, stall_timeout=90.0
    )
    with pytest.raises(ConfigError, match="resolve the config"):
        RetryPolicy.from_config(CONFIGS[backend]())
