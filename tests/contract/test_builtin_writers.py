"""The writer contract for the local backends: plain paths, ``file://`` URLs and ``pipe:``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.contract.writer_contract import WriterCase, WriterContract
from wds_cloud.openers.local import path_to_url, url_to_path
from wds_cloud.openers.pipe import PipeOpener
from wds_cloud.openers.registry import OpenerRegistry

DATA = os.urandom(3_000_000)


def _temp_files(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if ".tmp-" in n)


class TestLocalPathWriters(WriterContract):
    @pytest.fixture
    def writer_case(self, tmp_path: Path) -> WriterCase:
        return WriterCase(
            registry=OpenerRegistry(),
            url=lambda name: str(tmp_path / name),
            exists=os.path.exists,
            read=lambda url: Path(url).read_bytes(),
            leftovers=lambda: _temp_files(tmp_path),
            data=DATA,
        )


class TestFileUrlWriters(WriterContract):
    """``file://`` URLs of a directory whose name needs percent-encoding."""

    @pytest.fixture
    def writer_case(self, tmp_path: Path) -> WriterCase:
        directory = tmp_path / "a b%20c"
        directory.mkdir()
        base = path_to_url(str(directory))
        assert base.endswith("/a%20b%2520c")
        return WriterCase(
            registry=OpenerRegistry(),
            url=lambda name: f"{base}/{name}",
            exists=lambda url: os.path.exists(url_to_path(url)),
            read=lambda url: Path(url_to_path(url)).read_bytes(),
            # a wrongly decoded name would land beside the directory, not in it
            leftovers=lambda: (
                _temp_files(directory) + [n for n in os.listdir(tmp_path) if n != directory.name]
            ),
            data=DATA,
        )


class TestPipeWriters(WriterContract):
    """``pipe:`` to a command that publishes its output only when its input ended cleanly."""

    # a killed writer closes the pipe: the command sees the same clean end of input as after
    # close() and publishes (only abort() or garbage collection can stop it)
    kill_commits_nothing = False

    @pytest.fixture
    def writer_case(self, tmp_path: Path) -> WriterCase:
        script = tmp_path / "publish.sh"
        script.write_text('cat > "$1.part" && mv "$1.part" "$1"\n')
        out = tmp_path / "out"
        out.mkdir()
        registry = OpenerRegistry()
        registry.register("pipe", PipeOpener(allow=True), override=True)

        def final(url: str) -> Path:
            return Path(url.rsplit(" ", 1)[1])

        return WriterCase(
            registry=registry,
            url=lambda name: f"pipe:sh {script} {out / name}",
            exists=lambda url: final(url).exists(),
            read=lambda url: final(url).read_bytes(),
            leftovers=list,  # a killed command's own ".part" file is the command's business
            data=DATA,
        )


def test_pipe_abort_gives_the_command_no_clean_end_of_input(tmp_path: Path) -> None:
    out = tmp_path / "out.tar"
    opener = PipeOpener(allow=True, grace=2.0)
    writer = opener.create(f"""pipe:trap '' TERM; cat > "{out}.part" && mv "{out}.part" "{out}\"""")
    writer.write(DATA[:100_000])
    writer.abort()
    assert not out.exists(), "an aborted pipe: writer published its output"
