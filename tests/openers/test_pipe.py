"""PipeOpener: exit status checks, stderr tails, child reaping, configuration, writing."""

from __future__ import annotations

import gc
import os
import subprocess
import time
from pathlib import Path

import pytest

from wds_cloud.errors import ConfigError, ShardOpenError, UploadError, WdsCloudError
from wds_cloud.openers.pipe import PipeCommandError, PipeOpener
from wds_cloud.openers.registry import OpenerRegistry


def _gone(pid: int) -> bool:
    """True when no process with ``pid`` exists (zombies count as existing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _live_group_members(pgid: int) -> list[int]:
    """Processes in group ``pgid`` that are not zombies (read from /proc)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if pgrp == pgid and state not in ("Z", "X"):
            members.append(int(entry))
    return members


def _wait_group_empty(pgid: int) -> list[int]:
    """Live members of ``pgid`` once none are left, or after 10 s (SIGKILL lands async)."""
    deadline = time.monotonic() + 10
    while (members := _live_group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return members


def test_reads_stdout(tmp_path: Path) -> None:
    data = os.urandom(500_000)
    (tmp_path / "x.tar").write_bytes(data)
    with PipeOpener(allow=True).open(f"pipe:cat {tmp_path / 'x.tar'}") as stream:
        assert stream.read() == data


def test_failure_carries_exit_code_and_stderr_tail() -> None:
    url = "pipe:printf partial; echo 'first line' >&2; echo 'access denied' >&2; exit 7"
    stream = PipeOpener(allow=True).open(url)
    assert stream.read(7) == b"partial"
    with pytest.raises(PipeCommandError) as info:
        stream.read(100)
    stream.close()
    error = info.value
    assert isinstance(error, ShardOpenError) and isinstance(error, WdsCloudError)
    assert error.returncode == 7
    assert error.stderr_tail == "first line\naccess denied"
    assert "exit status 7" in str(error) and "access denied" in str(error)
    assert error.url == url and error.offset == 7


def test_large_stderr_does_not_deadlock_and_only_the_tail_is_kept() -> None:
    # 4 MB on stderr, far beyond a pipe buffer, then output, then a failure
    url = (
        "pipe:head -c 4000000 /dev/zero | tr '\\0' 'e' >&2; echo TAIL-MARKER >&2; "
        "head -c 100000 /dev/zero; exit 3"
    )
    stream = PipeOpener(allow=True).open(url)
    received = 0
    with pytest.raises(PipeCommandError) as info:
        while chunk := stream.read(65536):
            received += len(chunk)
    stream.close()
    assert received == 100_000
    assert info.value.returncode == 3
    assert info.value.stderr_tail.endswith("TAIL-MARKER")
    assert 1000 < len(info.value.stderr_tail) <= 2048


def test_missing_command_is_reported() -> None:
    stream = PipeOpener(allow=True).open("pipe:no-such-command-wds-cloud")
    with pytest.raises(PipeCommandError, match="not found") as info:
        stream.read()
    assert info.value.returncode == 127


def test_sigpipe_status_is_not_an_error() -> None:
    # the shell reports 141 when its last command dies of SIGPIPE; webdataset ignores it too
    with PipeOpener(allow=True).open("pipe:printf abc; kill -PIPE $$") as stream:
        assert stream.read() == b"abc"


def test_killed_by_signal_is_an_error() -> None:
    stream = PipeOpener(allow=True).open("pipe:exec sh -c 'printf ab; kill -TERM $$'")
    with pytest.raises(PipeCommandError, match="SIGTERM"):
        stream.read()


def test_early_close_reaps_the_whole_process_group() -> None:
    # a pipeline: the shell, an endless producer and a filter; all must be gone after close
    stream = PipeOpener(allow=True).open("pipe:cat /dev/zero | cat | cat")
    head = stream.read(100_000)
    assert head and head == bytes(len(head))
    pid = stream.pid
    stream.close()
    assert _gone(pid)
    assert _wait_group_empty(pid) == []


def test_early_close_kills_a_command_that_ignores_sigterm() -> None:
    stream = PipeOpener(allow=True, grace=0.2).open(
        "pipe:trap '' TERM PIPE; while true; do printf x; done"
    )
    head = stream.read(10)
    assert head and head == b"x" * len(head)
    stream.close()
    assert _gone(stream.pid)


def test_early_close_kills_children_that_ignore_sigterm() -> None:
    # the shell dies of SIGTERM at once; its child ignores SIGTERM and SIGPIPE
    stream = PipeOpener(allow=True, grace=0.2).open(
        "pipe:sh -c \"trap '' TERM PIPE; while true; do printf x; done\" | cat"
    )
    assert stream.read(1) == b"x"
    pid = stream.pid
    assert len(_live_group_members(pid)) >= 2
    stream.close()
    assert _wait_group_empty(pid) == []


def test_close_without_reading_and_garbage_collection_reap() -> None:
    opener = PipeOpener(allow=True)
    stream = opener.open("pipe:sleep 30")
    pid = stream.pid
    stream.close()
    assert _gone(pid)
    stream = opener.open("pipe:sleep 30")
    pid = stream.pid
    del stream  # IOBase.__del__ closes it
    assert _gone(pid)


def test_disabled_by_argument() -> None:
    with pytest.raises(ConfigError, match="disabled") as info:
        PipeOpener(allow=False).open("pipe:cat /etc/hostname")
    assert "WDS_CLOUD_ALLOW_PIPE=1" in str(info.value)


@pytest.mark.parametrize(
    ("env", "allowed"),
    [
        ({"WDS_CLOUD_ALLOW_PIPE": "0"}, False),
        ({"WDS_CLOUD_ALLOW_PIPE": "false"}, False),
        ({"WDS_CLOUD_ALLOW_PIPE": "1"}, True),
        ({"WDS_SECURE": "1"}, False),
        ({"WDS_SECURE": "1", "WDS_CLOUD_ALLOW_PIPE": "1"}, True),
        ({}, True),
    ],
)
def test_disabled_by_environment(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], allowed: bool
) -> None:
    monkeypatch.delenv("WDS_CLOUD_ALLOW_PIPE", raising=False)
    monkeypatch.delenv("WDS_SECURE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    opener = OpenerRegistry().get("pipe")  # lazy entry: constructed with no arguments
    if allowed:
        with opener.open("pipe:printf ok") as stream:
            assert stream.read() == b"ok"
    else:
        with pytest.raises(ConfigError, match="pipe: URLs are disabled"):
            opener.open("pipe:printf ok")


def test_explicit_allow_beats_wds_secure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WDS_SECURE", "1")
    with PipeOpener(allow=True).open("pipe:printf ok") as stream:
        assert stream.read() == b"ok"


def test_create_streams_into_stdin(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    payload = os.urandom(1_000_000)
    writer = PipeOpener(allow=True).create(f"pipe:cat > {target}")
    for i in range(0, len(payload), 65536):
        writer.write(payload[i : i + 65536])
    writer.close()
    assert target.read_bytes() == payload


def test_create_failure_is_an_upload_error_with_stderr(tmp_path: Path) -> None:
    writer = PipeOpener(allow=True).create(
        "pipe:cat > /dev/null; echo 'quota exceeded' >&2; exit 4"
    )
    writer.write(b"data")
    with pytest.raises(UploadError, match="quota exceeded") as info:
        writer.close()
    assert "exit status 4" in str(info.value)


def test_create_command_that_stops_reading(tmp_path: Path) -> None:
    writer = PipeOpener(allow=True).create("pipe:echo 'no thanks' >&2; exit 2")
    time.sleep(0)  # the command may or may not have exited before the first write
    with pytest.raises(UploadError, match="no thanks"):
        for _ in range(100):
            writer.write(b"x" * 65536)
        writer.close()


def test_create_abort_kills_the_command() -> None:
    writer = PipeOpener(allow=True).create("pipe:sleep 30")
    pid = writer.pid
    writer.abort()
    assert _gone(pid)


def test_garbage_collected_writer_kills_the_command_and_warns(tmp_path: Path) -> None:
    marker = tmp_path / "committed"
    writer = PipeOpener(allow=True).create(f"pipe:cat > /dev/null && touch {marker}")
    writer.write(b"partial")
    pid = writer.pid
    with pytest.warns(ResourceWarning, match="PipeWriter for 'pipe:cat > /dev/null"):
        del writer
        gc.collect()
    assert _gone(pid)
    assert not marker.exists(), "the command saw a clean end of input: a commit"


def test_registry_runs_pipe_urls(tmp_path: Path) -> None:
    subprocess.run(["true"], check=True)
    with OpenerRegistry().open("pipe:printf 'a b c'") as stream:
        assert stream.read() == b"a b c"


def test_sigterm_comes_first(tmp_path: Path) -> None:
    marker = tmp_path / "term"
    stream = PipeOpener(allow=True, grace=10.0).open(
        f"pipe:trap 'echo got-term > {marker}; exit 0' TERM; trap '' PIPE; "
        "while true; do printf x; sleep 0.01; done"
    )
    assert stream.read(1) == b"x"
    stream.close()
    assert _gone(stream.pid)
    assert marker.read_text() == "got-term\n"
