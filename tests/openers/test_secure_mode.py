"""Secure mode in the openers: local files and ``pipe:`` refused, with webdataset's messages.

The switch is the program's (``wds.utils.enforce_security``) or the environment's
(``WDS_SECURE``/``WDS_CLOUD_SECURE``); the explicit allows (``LocalOpener(allow=True)``,
``WDS_CLOUD_ALLOW_LOCAL``, ``PipeOpener(allow=True)``, ``WDS_CLOUD_ALLOW_PIPE``) win over it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import wds_cloud as wds
import wds_cloud.security as security
from wds_cloud.errors import ConfigError
from wds_cloud.openers.local import LocalOpener
from wds_cloud.openers.pipe import PipeOpener
from wds_cloud.openers.registry import OpenerRegistry

LOCAL_REFUSED = "gopen: unsafe_gopen is False, cannot open local files"
PIPE_REFUSED = "gopen_pipe: unsafe_gopen is False, cannot open pipe URLs"
SWITCHES = ("WDS_SECURE", "WDS_CLOUD_SECURE", "WDS_CLOUD_ALLOW_LOCAL", "WDS_CLOUD_ALLOW_PIPE")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    before = security.enforce_security
    yield
    security.enforce_security = before


@pytest.fixture
def secure() -> None:
    wds.utils.enforce_security = True


def _shard(tmp_path: Path) -> Path:
    path = tmp_path / "a.tar"
    with wds.TarWriter(str(path)) as writer:
        writer.write({"__key__": "k", "txt": "hello"})
    return path


def test_program_switch_is_webdataset_utils_flag() -> None:
    assert security.secure_mode() is False
    wds.utils.enforce_security = True
    assert security.enforce_security is True and security.secure_mode() is True
    assert wds.utils.enforce_security is True
    wds.utils.enforce_security = False
    assert security.secure_mode() is False


def test_program_setting_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WDS_SECURE", "1")
    assert security.secure_mode() is True
    wds.utils.enforce_security = False
    assert security.secure_mode() is False


@pytest.mark.usefixtures("secure")
@pytest.mark.parametrize("as_url", [False, True])
def test_local_read_refused_with_webdataset_message(tmp_path: Path, as_url: bool) -> None:
    wds.utils.enforce_security = False
    path = _shard(tmp_path)
    url = path.as_uri() if as_url else str(path)
    wds.utils.enforce_security = True
    with pytest.raises(ValueError, match=LOCAL_REFUSED) as info:
        LocalOpener().open(url)
    assert isinstance(info.value, ConfigError)
    text = str(info.value)
    assert url in text and "enforce_security" in text and "LocalOpener(allow=True)" in text


@pytest.mark.usefixtures("secure")
def test_local_write_and_list_refused(tmp_path: Path) -> None:
    target = tmp_path / "out.tar"
    with pytest.raises(ValueError, match=LOCAL_REFUSED):
        wds.TarWriter(str(target))
    with pytest.raises(ValueError, match=LOCAL_REFUSED):
        LocalOpener().list(str(tmp_path))
    assert os.listdir(tmp_path) == [], "a refused write leaves nothing behind"


def test_environment_switch_names_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _shard(tmp_path)
    monkeypatch.setenv("WDS_CLOUD_SECURE", "1")
    with pytest.raises(ConfigError, match=LOCAL_REFUSED) as info:
        LocalOpener().open(str(path))
    assert "WDS_CLOUD_SECURE=1" in str(info.value) and "unset WDS_CLOUD_SECURE" in str(info.value)


def test_switch_is_read_on_each_call(tmp_path: Path) -> None:
    path = _shard(tmp_path)
    registry = OpenerRegistry()
    with registry.open(str(path)) as stream:  # the registry now holds a built LocalOpener
        assert stream.read(3)
    wds.utils.enforce_security = True
    with pytest.raises(ConfigError, match=LOCAL_REFUSED):
        registry.open(str(path))


@pytest.mark.usefixtures("secure")
def test_webdataset_over_local_shards_is_refused(tmp_path: Path) -> None:
    wds.utils.enforce_security = False
    path = _shard(tmp_path)
    wds.utils.enforce_security = True
    with pytest.raises(ValueError, match=LOCAL_REFUSED):
        list(wds.WebDataset(str(path), shardshuffle=False))


@pytest.mark.usefixtures("secure")
def test_explicit_allow_wins_over_secure_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wds.utils.enforce_security = False
    path = _shard(tmp_path)
    wds.utils.enforce_security = True
    with LocalOpener(allow=True).open(str(path)) as stream:
        assert stream.read(3)
    monkeypatch.setenv("WDS_CLOUD_ALLOW_LOCAL", "1")
    registry = OpenerRegistry()  # its LocalOpener reads the variable when it is built
    samples = list(wds.WebDataset(str(path), shardshuffle=False, registry=registry))
    assert [s["__key__"] for s in samples] == ["k"]


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_local_files_can_be_disabled_without_secure_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    path = _shard(tmp_path)
    if how == "environment":
        monkeypatch.setenv("WDS_CLOUD_ALLOW_LOCAL", "off")
    opener = LocalOpener(allow=False) if how == "argument" else LocalOpener()
    with pytest.raises(ConfigError, match="local files are disabled") as info:
        opener.open(str(path))
    assert "WDS_CLOUD_ALLOW_LOCAL=1" in str(info.value)


def test_stdin_and_stdout_stay_open_in_secure_mode() -> None:
    code = (
        "import wds_cloud as wds\n"
        "from wds_cloud.openers.local import LocalOpener\n"
        "wds.utils.enforce_security = True\n"
        "data = LocalOpener().open('-').read()\n"
        "with LocalOpener().create('-') as out:\n"
        "    out.write(data.upper())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=b"shard bytes", capture_output=True, check=True
    )
    assert out.stdout == b"SHARD BYTES"


def test_pipe_refused_at_run_time_with_webdataset_message(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    opener = PipeOpener()  # built while secure mode is off
    wds.utils.enforce_security = True
    with pytest.raises(ValueError, match=PIPE_REFUSED) as info:
        opener.open(f"pipe:touch {marker}")
    text = str(info.value)
    assert "pipe: URLs are disabled" in text and "PipeOpener(allow=True)" in text
    with pytest.raises(ConfigError, match=PIPE_REFUSED):
        opener.create(f"pipe:touch {marker}")
    assert not marker.exists()
    wds.utils.enforce_security = False
    with opener.open("pipe:printf ok") as stream:
        assert stream.read() == b"ok"


@pytest.mark.usefixtures("secure")
def test_pipe_allow_wins_over_secure_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    with PipeOpener(allow=True).open("pipe:printf a") as stream:
        assert stream.read() == b"a"
    monkeypatch.setenv("WDS_CLOUD_ALLOW_PIPE", "1")
    with PipeOpener().open("pipe:printf b") as stream:
        assert stream.read() == b"b"
