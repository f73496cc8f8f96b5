"""``ls`` of a bare prefix lists what is under it on every backend; nothing there is an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.http_server import HttpFileServer

from .conftest import Backend, Runner, clean_env

OBJECTS = {
    "shuffled-shard-0.tar": b"a" * 10,
    "shuffled-shard-1.tar": b"b" * 10,
    "shuffled/deeper/x.tgz": b"c" * 10,
    "shuffled-notes.txt": b"not a shard",
    "samples-00.tar": b"d" * 10,
}


def _fill(backend: Backend) -> None:
    for name, data in OBJECTS.items():
        backend.put(name, data)


def _lines(out: bytes) -> list[str]:
    return out.decode().splitlines()


def test_bare_prefix_lists_the_shards_under_it(wds_cli: Runner, backend: Backend) -> None:
    _fill(backend)
    out = wds_cli("ls", backend.url("shuffled"), env=backend.env)
    assert out.returncode == 0, out.stderr
    if backend.name == "local":  # an existing folder is that folder, as plain ls takes it
        assert _lines(out.stdout) == [backend.url("shuffled/deeper/x.tgz")]
    else:  # a key prefix, as 'aws s3 ls' and 'ais bucket ls --prefix' take it
        assert _lines(out.stdout) == [
            backend.url(n)
            for n in ("shuffled-shard-0.tar", "shuffled-shard-1.tar", "shuffled/deeper/x.tgz")
        ]


def test_bare_name_prefix_and_exact_object(wds_cli: Runner, backend: Backend) -> None:
    _fill(backend)
    out = wds_cli("ls", backend.url("shuffled-sh"), env=backend.env)
    assert out.returncode == 0, out.stderr
    assert _lines(out.stdout) == [
        backend.url("shuffled-shard-0.tar"),
        backend.url("shuffled-shard-1.tar"),
    ]
    # an object named exactly is listed whatever its extension
    out = wds_cli("ls", backend.url("shuffled-notes.txt"), env=backend.env)
    assert out.returncode == 0, out.stderr
    assert _lines(out.stdout) == [backend.url("shuffled-notes.txt")]


def test_brace_names_are_checked_with_one_listing(wds_cli: Runner, backend: Backend) -> None:
    _fill(backend)
    out = wds_cli("ls", backend.url("shuffled-shard-{0..1}.tar"), env=backend.env)
    assert out.returncode == 0, out.stderr
    assert _lines(out.stdout) == [
        backend.url("shuffled-shard-0.tar"),
        backend.url("shuffled-shard-1.tar"),
    ]
    out = wds_cli("ls", backend.url("shuffled-shard-{0..3}.tar"), env=backend.env)
    assert out.returncode == 1 and out.stdout == b""
    err = out.stderr.decode()
    assert "shuffled-shard-2.tar" in err and "1 more of the 4 given" in err


def test_nothing_under_the_prefix_is_an_error(wds_cli: Runner, backend: Backend) -> None:
    _fill(backend)
    for name in ("nothing-here", "zzz/"):
        out = wds_cli("ls", backend.url(name), env=backend.env)
        assert out.returncode == 1 and out.stdout == b"", name
        err = out.stderr.decode()
        assert err.startswith("wds-cloud ls: error: "), err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert repr(backend.url(name).rstrip("/"))[:-1] in err, err  # names what was asked
    # a prefix holding only non-shard objects lists nothing either
    out = wds_cli("ls", backend.url("shuffled-no"), env=backend.env)
    assert out.returncode == 1 and b"no object and no shard" in out.stderr


WHY_MISSING = {
    "local": "no such",
    "s3": "S3 bucket does not exist",
    "gs": "GCS bucket 'no-such-bucket-cli' does not exist",
    "az": "Azure container 'no-such-container-cli' does not exist",
    "ais": 'bucket "ais://no-such-bucket-cli" does not exist',
}


def test_missing_bucket_or_folder_is_an_error(wds_cli: Runner, backend: Backend) -> None:
    for spec in (backend.missing_bucket + "/shuffled", backend.missing_bucket + "/"):
        out = wds_cli("ls", spec, env=backend.env)
        assert out.returncode == 1 and out.stdout == b"", spec
        err = out.stderr.decode()
        assert err.startswith("wds-cloud ls: error: ") and "Traceback" not in err
        assert WHY_MISSING[backend.name] in err and repr(spec)[:-1] in err, err


def test_trailing_slash_and_glob_still_work(wds_cli: Runner, backend: Backend) -> None:
    _fill(backend)
    out = wds_cli("ls", backend.url("shuffled/"), backend.url("*.tar"), env=backend.env)
    assert out.returncode == 0, out.stderr
    assert _lines(out.stdout) == [
        backend.url("shuffled/deeper/x.tgz"),
        backend.url("samples-00.tar"),
        backend.url("shuffled-shard-0.tar"),
        backend.url("shuffled-shard-1.tar"),
    ]


@pytest.mark.parametrize("name", ["shard-0.tar", "missing.tar"])
def test_http_urls_are_checked(wds_cli: Runner, tmp_path: Path, name: str) -> None:
    (tmp_path / "shard-0.tar").write_bytes(b"x" * 1024)
    with HttpFileServer(tmp_path) as server:
        out = wds_cli("ls", server.url(name), env=clean_env())
    if name == "missing.tar":
        assert out.returncode == 1 and out.stdout == b""
        assert out.stderr.startswith(b"wds-cloud ls: error: ") and b"404" in out.stderr
    else:
        assert out.returncode == 0 and _lines(out.stdout) == [server.url(name)]
