"""DsortSpec builder, validate(), templates and IEC sizes (no server needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.emulators.ais import dsort as emu_dsort
from wds_cloud.aistore.dsort import (
    DsortSizeWarning,
    DsortSpec,
    expand_template,
    load_spec,
    parse_size,
    parse_template,
    validate,
)
from wds_cloud.errors import DsortSpecError


def base(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "input_bck": {"name": "src", "provider": "ais"},
        "input_format": {"template": "samples-{00..18}.tar"},
        "input_extension": ".tar",
        "output_bck": {"name": "dst", "provider": "ais"},
        "output_format": "out-{000..999}.tar",
        "output_extension": ".tar",
        "output_shard_size": "1MiB",
        "algorithm": {"kind": "shuffle", "decreasing": False, "seed": "7"},
        "description": "",
    }
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


def test_builder_matches_sdk_framework_to_spec() -> None:
    from aistore.sdk.dsort.framework import DsortAlgorithm, DsortFramework, DsortShardsGroup
    from aistore.sdk.multiobj import ObjectRange
    from aistore.sdk.types import BucketModel

    cases: list[tuple[Any, dict[str, Any]]] = [
        (DsortAlgorithm(kind="shuffle", seed="42"), {"algorithm": "shuffle", "seed": 42}),
        (DsortAlgorithm(kind="alphanumeric", decreasing=True), {"decreasing": True}),
        (
            DsortAlgorithm(kind="content", extension=".cls", content_key_type="int"),
            {"algorithm": "content", "content_extension": ".cls", "content_key_type": "int"},
        ),
    ]
    for alg, ours in cases:
        framework = DsortFramework(
            input_shards=DsortShardsGroup(
                BucketModel(name="src", provider="ais"),
                "input",
                ObjectRange(
                    prefix="samples-", min_index=0, max_index=18, pad_width=2, suffix=".tar"
                ),
                ".tar",
            ),
            output_shards=DsortShardsGroup(
                BucketModel(name="dst", provider="ais"),
                "output",
                ObjectRange(prefix="out-", min_index=0, max_index=99, pad_width=3),
                ".tar",
            ),
            algorithm=alg,
            description="d",
            output_shard_size="10MiB",
        )
        sdk = framework.to_spec()
        spec = DsortSpec(
            input_bck="src",
            input_template=sdk["input_format"]["template"],
            output_bck="dst",
            output_format=sdk["output_format"],
            output_shard_size="10MiB",
            description="d",
            **ours,
        ).to_dict()
        assert spec == sdk
        assert list(spec) == list(sdk)


def test_builder_emits_every_real_key_name() -> None:
    spec = DsortSpec(
        input_bck="src",
        input_objnames=["a.tar", "b.tar"],
        output_format="o-%04d.tar",
        output_shard_size=1 << 20,
        algorithm="content",
        content_extension=".cls",
        content_key_type="float",
        decreasing=True,
        max_mem_usage="60%",
        dry_run=True,
        extract_concurrency_max_limit=2,
        create_concurrency_max_limit=3,
        ekm_file="http://127.0.0.1:1/ekm.json",
        ekm_file_sep="\t",
        config={"missing_shards": "warn"},
        description="all",
    ).to_dict()
    assert set(spec) == {
        "input_bck",
        "input_format",
        "input_extension",
        "output_bck",
        "output_format",
        "output_extension",
        "output_shard_size",
        "algorithm",
        "description",
        "max_mem_usage",
        "dry_run",
        "extract_concurrency_max_limit",
        "create_concurrency_max_limit",
        "ekm_file",
        "ekm_file_sep",
        "Config",
    }
    assert spec["input_format"] == {"objnames": ["a.tar", "b.tar"]}
    assert spec["output_shard_size"] == "1048576"
    assert spec["algorithm"] == {
        "kind": "content",
        "decreasing": True,
        "seed": "",
        "extension": ".cls",
        "content_key_type": "float",
    }
    assert spec["output_bck"] == {"name": "src", "provider": "ais"}


def test_from_dict_round_trip() -> None:
    spec = base(dry_run=True, max_mem_usage="8GiB")
    assert DsortSpec.from_dict(spec).to_dict() == spec


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
def test_write_load_round_trip(tmp_path: Path, suffix: str) -> None:
    spec = DsortSpec.from_dict(base())
    path = spec.write(tmp_path / f"spec{suffix}")
    assert DsortSpec.load(path) == spec
    assert load_spec(path) == spec.to_dict()


def test_yaml_quotes_the_seed_and_rejects_an_unquoted_one(tmp_path: Path) -> None:
    text = DsortSpec.from_dict(base()).to_yaml()
    assert "seed: '7'" in text
    assert yaml.safe_load(text)["algorithm"]["seed"] == "7"
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("seed: '7'", "seed: 7"))
    with pytest.raises(DsortSpecError, match=r"quoted") as err:
        load_spec(bad)
    assert err.value.field == "algorithm.seed"
    assert "bad.yaml" in str(err.value)


def test_write_rejects_unknown_suffix(tmp_path: Path) -> None:
    with pytest.raises(DsortSpecError, match=r"\.json, \.yaml or \.yml"):
        DsortSpec.from_dict(base()).write(tmp_path / "spec.txt")
    (tmp_path / "x.toml").write_text("")
    with pytest.raises(DsortSpecError, match=r"must end in"):
        load_spec(tmp_path / "x.toml")


def test_load_reports_unparsable_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(DsortSpecError, match=r"broken\.json: cannot read the spec"):
        load_spec(path)


BAD_SPECS = [
    ("input_bck", base(input_bck=None), "missing source bucket"),
    ("input_bck.name", base(input_bck={"name": "a/b"}), "invalid bucket name"),
    (
        "input_bck.provider",
        base(input_bck={"name": "a", "provider": "dropbox"}),
        "unknown provider",
    ),
    ("input_format", base(input_format={"template": "a{0..1}", "objnames": ["x"]}), "exactly one"),
    ("input_format.objnames", base(input_format={"objnames": []}), "non-empty list"),
    ("input_format.template", base(input_format={"template": "s-{a,b}.tar"}), "brace lists"),
    ("input_format.template", base(input_format={"template": "s-{5..1}.tar"}), "'start' cannot"),
    ("input_format.template", base(input_format={"template": "s-{0..9..0}.tar"}), "'step' is non"),
    ("input_format.template", base(input_format={"template": "s-{0..}.tar"}), "invalid 'bash'"),
    ("input_format.template", base(input_format={"template": "s-%06d.tar"}), "bounded range"),
    ("input_format.template", base(input_format={"template": "shards/"}), "bounded range"),
    ("input_format.template", base(input_format={"template": "s-%6d.tar"}), "invalid 'fmt'"),
    ("input_format.template", base(input_format={"template": "s-@x.tar"}), "invalid 'at'"),
    ("input_extension", base(input_extension=".tgz"), "'.tgz' vs '.tar'"),
    ("input_extension", base(input_extension=".rar"), "unsupported archive"),
    ("input_extension", base(input_extension=None, input_format={"objnames": ["a"]}), "set it"),
    ("output_format", base(output_format=None), "required"),
    ("output_format", base(output_format="out-"), "prefix-only output is not supported"),
    ("output_shard_size", base(output_format="o-%d.tar", output_shard_size=None), "unbounded"),
    ("output_shard_size", base(output_shard_size=100), "must be a string"),
    ("output_shard_size", base(output_shard_size="10 parsecs"), "malformed size"),
    ("output_shard_size", base(output_shard_size="-5MiB"), ">= 0"),
    ("output_extension", base(output_extension=".tgz"), "'.tgz' vs '.tar' in output_format"),
    ("algorithm.kind", base(algorithm={"kind": "random"}), "invalid sorting algorithm"),
    ("algorithm.seed", base(algorithm={"kind": "shuffle", "seed": 42}), "must be a string"),
    ("algorithm.seed", base(algorithm={"kind": "shuffle", "seed": "-1"}), "invalid seed"),
    ("algorithm.seed", base(algorithm={"kind": "shuffle", "seed": "abc"}), "invalid seed"),
    ("algorithm.decreasing", base(algorithm={"decreasing": "yes"}), "true or false"),
    (
        "algorithm.extension",
        base(algorithm={"kind": "content", "content_key_type": "int"}),
        "'.cls'",
    ),
    (
        "algorithm.extension",
        base(algorithm={"kind": "content", "extension": "cls", "content_key_type": "int"}),
        "starting with '.'",
    ),
    (
        "algorithm.content_key_type",
        base(algorithm={"kind": "content", "extension": ".cls"}),
        "one of",
    ),
    (
        "algorithm",
        base(algorithm={"kind": "shuffle", "extension": ".cls"}),
        "only to kind 'content'",
    ),
    ("algorithm.order", base(algorithm={"order": "x"}), "unknown key"),
    ("extension", base(extension=".tar"), "old name of 'input_extension'"),
    ("output_fromat", base(output_fromat="x"), "did you mean 'output_format'"),
    ("ekm_file", base(ekm_file="not a url"), "is not a URL"),
    ("output_shard_size", base(ekm_file="http://h/ekm", output_shard_size=None), "must be set"),
    ("max_mem_usage", base(max_mem_usage="180%"), "1..100"),
    ("max_mem_usage", base(max_mem_usage=80), "must be a string"),
    ("extract_concurrency_max_limit", base(extract_concurrency_max_limit=-1), ">= 0"),
    ("create_concurrency_max_limit", base(create_concurrency_max_limit="2"), ">= 0"),
    ("dry_run", base(dry_run="true"), "true or false"),
    ("Config.missing_shards", base(Config={"missing_shards": "panic"}), "one of"),
]


@pytest.mark.parametrize(("field", "spec", "message"), BAD_SPECS, ids=[b[2] for b in BAD_SPECS])
def test_validate_rejects(field: str, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(DsortSpecError, match=message) as err:
        validate(spec)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ")


def test_validate_rejects_non_mapping() -> None:
    with pytest.raises(DsortSpecError, match="must be a mapping"):
        validate(["input_bck"])  # type: ignore[arg-type]


def test_builder_needs_exactly_one_input() -> None:
    with pytest.raises(DsortSpecError, match="exactly one") as err:
        DsortSpec(input_bck="a", output_format="o-{0..9}").to_dict()
    assert err.value.field == "input_format"


def test_validate_accepts_variants() -> None:
    assert validate(base(input_extension=None))["input_format"]  # inferred from the template
    validate(base(output_shard_size=None))  # bounded output: size is auto on the server
    validate(base(algorithm={"kind": ""}, output_bck=None))
    validate(base(input_format={"template": "s-@0018.tar"}, max_mem_usage="80%"))
    validate(base(ekm_file="http://127.0.0.1/ekm.json", output_format=None))
    validate(base(input_bck={"name": "b", "provider": "gcp"}, input_extension="tar"))


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("", 0),
        ("0", 0),
        ("4096", 4096),
        ("100B", 100),
        ("10KiB", 10240),
        ("10kb", 10240),
        ("10K", 10240),
        ("1.5MB", 1572864),
        ("64MiB", 64 << 20),
        ("100MB", 100 << 20),
        ("2Gi", 2 << 30),
        (" 1 TiB ", 1 << 40),
        (".5G", 1 << 29),
        (123, 123),
    ],
)
def test_parse_size_is_iec(text: str | int, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["MB", "1.2.3MB", "10 parsecs", "1e3", "10XB", "-1", "5KIBB"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(DsortSpecError) as err:
        parse_size(text)
    assert err.value.field == "output_shard_size"


def test_decimal_looking_size_warns_that_it_is_binary() -> None:
    with pytest.warns(DsortSizeWarning, match=r"'100MB' means 104857600 bytes.*100MiB"):
        validate(base(output_shard_size="100MB"))


TEMPLATES = [
    ("s-{0..3}.tar", ["s-0.tar", "s-1.tar", "s-2.tar", "s-3.tar"]),
    ("s-{01..100..50}", ["s-01", "s-51"]),  # width = min(len(start), len(end)) as in Go
    ("s-{000..100..50}", ["s-000", "s-050", "s-100"]),
    ("a{0..1}-b{0..2}", ["a0-b0", "a0-b1", "a0-b2", "a1-b0", "a1-b1", "a1-b2"]),
    ("x-@02.tar", ["x-00.tar", "x-01.tar", "x-02.tar"]),
    ("@1-@1", ["0-0", "0-1", "1-0", "1-1"]),
]


@pytest.mark.parametrize(("template", "names"), TEMPLATES)
def test_expand_template_follows_the_server(template: str, names: list[str]) -> None:
    assert expand_template(template) == names
    prefix, ranges = emu_dsort.parse_template(template)
    assert list(emu_dsort.template_names(prefix, ranges)) == names


def test_fmt_template_is_unbounded() -> None:
    tpl = parse_template("shard-%06d.tar")
    assert not tpl.bounded
    assert next(tpl.names()) == "shard-000000.tar"
    with pytest.raises(DsortSpecError, match="no bounded range"):
        expand_template("shard-%06d.tar")


def test_to_json_is_plain_json() -> None:
    spec = DsortSpec.from_dict(base())
    assert json.loads(spec.to_json()) == base()
