"""dSort jobs through the real aistore SDK against the emulator: sorting, packing, errors."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.dsort.conftest import Record, make_shards, read_shards
from tests.emulators.ais import dsort as emu_dsort
from tests.emulators.ais.server import AisEmulator
from wds_cloud.aistore import dsort
from wds_cloud.errors import DsortSpecError

pytestmark = pytest.mark.ais


def spec(**changes: Any) -> dsort.DsortSpec:
    base = dsort.DsortSpec(
        input_bck="src",
        input_template="samples-{00..03}.tar",
        output_bck="dst",
        output_format="out-{000..999}.tar",
        output_shard_size="600B",
        algorithm="shuffle",
        seed="1",
    )
    return base.replace(**changes)


def run(client: Any, s: dsort.DsortSpec | dict[str, Any]) -> dsort.DsortResult:
    job = dsort.start(s, client=client)
    assert job.startswith("srt-")
    return dsort.wait(job, client=client, progress=False, poll_interval=0.02, timeout=60)


def keys(shards: list[tuple[str, list[Record]]]) -> list[str]:
    return [r.key for _, recs in shards for r in recs]


def test_shuffle_is_a_permutation_packed_by_size(
    ais_emulator: AisEmulator, ais_client: Any
) -> None:
    records = make_shards(ais_emulator.store, "src", prefix="dir.v1/")
    result = run(ais_client, spec())
    shards = read_shards(ais_emulator.store, "dst")
    assert result.success and not result.aborted and result.errors == []
    assert (result.input_shards, result.members) == (4, 3 * 24)  # 3 members a sample
    assert result.shards_created == result.shards_to_create == len(shards) > 2
    assert result.extracted_bytes == sum(r.size for r in records)
    assert [n for n, _ in shards] == [f"out-{i:03d}.tar" for i in range(len(shards))]
    # a permutation of the input records, each record's members intact and together
    assert sorted(keys(shards)) == sorted(r.key for r in records)
    assert {r.key: r.members for _, recs in shards for r in recs} == {
        r.key: r.members for r in records
    }
    assert all(k.startswith("dir.v1/sample-") for k in keys(shards))
    # a shard closes as soon as it reaches 600 bytes: all but the last are >= 600 and would
    # have been < 600 without their last record
    sizes = [[r.size for r in recs] for _, recs in shards]
    for recs in sizes[:-1]:
        assert sum(recs) >= 600 > sum(recs) - recs[-1]
    assert sum(sizes[-1]) > 0 and sum(sizes[-1]) - sizes[-1][-1] < 600
    # same seed, same order; other seed, another order (24! orders: a collision is negligible)
    again = run(ais_client, spec(output_bck="dst2"))
    assert again.success and keys(read_shards(ais_emulator.store, "dst2")) == keys(shards)
    run(ais_client, spec(output_bck="dst3", seed="2"))
    assert keys(read_shards(ais_emulator.store, "dst3")) != keys(shards)


@pytest.mark.parametrize("decreasing", [False, True])
def test_alphanumeric_order(ais_emulator: AisEmulator, ais_client: Any, decreasing: bool) -> None:
    records = make_shards(ais_emulator.store, "src")
    run(ais_client, spec(algorithm="alphanumeric", decreasing=decreasing, seed=None))
    got = keys(read_shards(ais_emulator.store, "dst"))
    assert got == sorted((r.key for r in records), reverse=decreasing)


@pytest.mark.parametrize(
    ("key_type", "ext", "convert"),
    [("int", ".cls", int), ("float", ".score", float), ("string", ".score", bytes.decode)],
)
def test_content_order(
    ais_emulator: AisEmulator, ais_client: Any, key_type: str, ext: str, convert: Any
) -> None:
    make_shards(ais_emulator.store, "src")
    s = spec(algorithm="content", content_extension=ext, content_key_type=key_type, seed=None)
    assert run(ais_client, s).success
    values = [
        convert(r.members[ext])
        for r in (r for _, recs in read_shards(ais_emulator.store, "dst") for r in recs)
    ]
    assert len(values) == 24 and values == sorted(values)
    assert len(set(values)) > 5


def test_md5_and_none_order(ais_emulator: AisEmulator, ais_client: Any) -> None:
    records = make_shards(ais_emulator.store, "src")
    run(ais_client, spec(algorithm="md5", seed=None))
    md5 = keys(read_shards(ais_emulator.store, "dst"))
    assert md5 == sorted(md5, key=lambda k: hashlib.md5(k.encode()).hexdigest())
    assert md5 != [r.key for r in records]
    run(ais_client, spec(algorithm="none", seed=None, output_bck="plain"))
    assert keys(read_shards(ais_emulator.store, "plain")) == [r.key for r in records]


def test_objnames_input_and_auto_shard_size(ais_emulator: AisEmulator, ais_client: Any) -> None:
    records = make_shards(ais_emulator.store, "src")
    s = spec(
        input_template=None,
        input_objnames=["samples-02.tar", "samples-00"],
        output_format="part-{0..3}",
        output_shard_size=None,
        algorithm="none",
        seed=None,
    )
    result = run(ais_client, s)
    shards = read_shards(ais_emulator.store, "dst")
    assert result.input_shards == 2 and shards[0][0] == "part-0.tar"
    assert keys(shards) == [r.key for r in records[12:18] + records[0:6]]
    assert len(shards) <= 4  # auto size = ceil(total / template count)


def test_dry_run_writes_nothing(ais_emulator: AisEmulator, ais_client: Any) -> None:
    make_shards(ais_emulator.store, "src")
    result = run(ais_client, spec(dry_run=True))
    assert result.success and result.members == 3 * 24 and result.shards_to_create > 2
    assert ais_emulator.store.list_objects("dst") == []


def test_abort(ais_emulator: AisEmulator, ais_client: Any) -> None:
    make_shards(ais_emulator.store, "src")
    emu_dsort.jobs(ais_emulator.store).hold()
    try:
        job = dsort.start(spec(), client=ais_client)
        dsort.abort(job, client=ais_client)
    finally:
        emu_dsort.jobs(ais_emulator.store).release()
    with pytest.raises(dsort.DsortJobError, match="aborted") as err:
        dsort.wait(job, client=ais_client, progress=False, poll_interval=0.02, timeout=60)
    assert err.value.job_id == job and err.value.result is not None
    assert err.value.result.aborted and not err.value.result.success
    assert ais_emulator.store.list_objects("dst") == []


def test_unknown_input_bucket(ais_client: Any) -> None:
    with pytest.raises(
        DsortSpecError,
        match=r'bucket \\"ais://src\\" does not exist|bucket "ais://src" does not exist',
    ) as err:
        dsort.start(spec(), client=ais_client)
    assert err.value.field == "input_bck"


def test_unknown_job(ais_emulator: AisEmulator, ais_client: Any) -> None:
    with pytest.raises(dsort.DsortJobError, match=r"\[dsort\] srt-nope does not exist"):
        dsort.wait("srt-nope", client=ais_client, progress=False)
    with pytest.raises(dsort.DsortJobError, match="dsort job srt-nope does not exist"):
        dsort.abort("srt-nope", client=ais_client)


def test_job_error_is_raised_with_the_server_message(
    ais_emulator: AisEmulator, ais_client: Any
) -> None:
    make_shards(ais_emulator.store, "src")
    s = spec(algorithm="content", content_extension=".missing", content_key_type="int", seed=None)
    with pytest.raises(dsort.DsortJobError, match=r"has no '\.missing' member") as err:
        run(ais_client, s)
    assert err.value.result is not None and err.value.result.errors


def test_too_few_output_names(ais_emulator: AisEmulator, ais_client: Any) -> None:
    make_shards(ais_emulator.store, "src")
    with pytest.raises(dsort.DsortJobError, match=r"exceeds expected number of shards \(2\)"):
        run(ais_client, spec(output_format="out-{0..1}.tar"))


def test_missing_input_shard_is_reported_when_asked(
    ais_emulator: AisEmulator, ais_client: Any
) -> None:
    make_shards(ais_emulator.store, "src", shards=3)
    result = run(ais_client, spec(config={"missing_shards": "warn"}))
    assert result.input_shards == 3
    assert result.warnings == ['shard.do: "ais://src/samples-03.tar" does not exist']
    with pytest.raises(dsort.DsortJobError, match=r"samples-03\.tar"):
        run(ais_client, spec(config={"missing_shards": "abort"}, output_bck="d2"))


def test_server_rejects_bad_specs_with_real_texts(
    ais_emulator: AisEmulator, ais_client: Any, tmp_path: Path
) -> None:
    """The emulator checks what the server checks (the client is bypassed: SDK + raw file)."""
    from aistore.sdk.errors import AISError

    ais_emulator.store.create_bucket("src")
    good = spec().to_dict()
    cases = [
        (
            {**good, "input_bck": {"name": ""}},
            '[dsort] parse-spec: "input_bck" missing source bucket',
        ),
        (
            {**good, "input_format": {"template": "s-{3..1}"}},
            "'start' cannot be greater than 'end'",
        ),
        ({**good, "output_format": "out-"}, "prefix-only output is not supported"),
        (
            {**good, "output_format": "o-%d", "output_shard_size": ""},
            "output shard size must be set",
        ),
        ({**good, "algorithm": {"kind": "shuffle", "seed": "x"}}, 'invalid seed "x"'),
        (
            {**good, "algorithm": {"kind": "content", "extension": "cls"}},
            "algorithm: invalid extension",
        ),
        ({**good, "algorithm": {"kind": "sorted"}}, "invalid sorting algorithm"),
        ({**good, "algorithm": {"seed": 5}}, "ReadString"),
        (
            {**good, "input_extension": ".rar", "input_format": {"objnames": ["a"]}},
            'unknown mime type ".rar"',
        ),
    ]
    for body, text in cases:
        path = tmp_path / "spec.json"
        path.write_text(json.dumps(body))
        with pytest.raises(AISError) as err:
            ais_client.dsort().start(str(path))
        assert err.value.status_code == 400
        assert text in json.loads(err.value.message)["message"]


def test_start_from_file_endpoint_env_and_progress(
    ais_emulator: AisEmulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_shards(ais_emulator.store, "src")
    path = spec().write(tmp_path / "spec.yaml")
    monkeypatch.setenv("AIS_ENDPOINT", ais_emulator.url)
    job = dsort.start(path)
    result = dsort.wait(job, progress=True, poll_interval=0.02, timeout=60)
    assert result.success and result.elapsed_s is not None and result.elapsed_s >= 0
    err = capsys.readouterr().err
    assert f"dSort {job}" in err and f"{result.shards_created}/{result.shards_created}" in err


def test_no_endpoint_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from wds_cloud.errors import ConfigError

    monkeypatch.delenv("AIS_ENDPOINT", raising=False)
    with pytest.raises(ConfigError, match="AIS_ENDPOINT"):
        dsort.abort("srt-x")


def test_output_as_targz(ais_emulator: AisEmulator, ais_client: Any) -> None:
    records = make_shards(ais_emulator.store, "src")
    run(ais_client, spec(output_format="out-{000..999}.tar.gz", output_extension=".tar.gz"))
    shards = read_shards(ais_emulator.store, "dst")
    assert all(n.endswith(".tar.gz") for n, _ in shards)
    assert sorted(keys(shards)) == sorted(r.key for r in records)
    assert (
        io.BytesIO(ais_emulator.store.get_object("dst", shards[0][0]).data).read(2) == b"\x1f\x8b"
    )


def test_wait_timeout_leaves_the_job_running(ais_emulator: AisEmulator, ais_client: Any) -> None:
    make_shards(ais_emulator.store, "src")
    gate = emu_dsort.jobs(ais_emulator.store)
    gate.hold()
    try:
        job = dsort.start(spec(), client=ais_client)
        with pytest.raises(dsort.DsortTimeoutError, match="still running") as err:
            dsort.wait(job, client=ais_client, progress=False, poll_interval=0.02, timeout=0.1)
        assert isinstance(err.value, TimeoutError) and err.value.job_id == job
    finally:
        gate.release()
    assert dsort.wait(job, client=ais_client, progress=False, poll_interval=0.02).success
