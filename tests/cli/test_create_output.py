"""``create -o``: a ``%`` pattern is the shard names; a failed or empty run leaves nothing."""

from __future__ import annotations

import json
from pathlib import Path

import webdataset

import wds_cloud as wds

from .conftest import Backend, Runner, clean_env


def _photos(root: Path, n: int = 5) -> Path:
    src = root / "photos"
    src.mkdir()
    for i in range(n):
        (src / f"{i:03d}.jpg").write_bytes(b"J" * (i + 1))
        (src / f"{i:03d}.cls").write_text(str(i % 2))
    return src


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_percent_pattern_in_output_names_the_shards(wds_cli: Runner, tmp_path: Path) -> None:
    src = _photos(tmp_path)
    out = wds_cli(
        "create", str(src), "-o", str(tmp_path / "out" / "shard-%06d.tar"), "--maxcount", "2",
        "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    names = [f"shard-{i:06d}.tar" for i in range(3)]
    assert json.loads(out.stdout) == {
        "samples": 5,
        "shards": [str(tmp_path / "out" / n) for n in names],
    }
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == names  # no '%' folder
    pattern = str(tmp_path / "out" / "shard-{000000..000002}.tar")
    for reader in (wds.WebDataset, webdataset.WebDataset):
        samples = list(reader(pattern, shardshuffle=False))
        assert [s["__key__"] for s in samples] == [f"{i:03d}" for i in range(5)]
        assert [s["jpg"] for s in samples] == [b"J" * (i + 1) for i in range(5)]


def test_percent_pattern_on_every_backend(
    wds_cli: Runner, backend: Backend, tmp_path: Path
) -> None:
    src = _photos(tmp_path)
    target = backend.url("train/part-%03d.tar")
    out = wds_cli("create", str(src), "-o", target, "--maxcount", "3", env=backend.env)
    assert out.returncode == 0, out.stderr
    assert "wrote 5 samples into 2 shards" in out.stdout.decode()
    assert backend.names() == ["train/part-000.tar", "train/part-001.tar"]


def test_directory_output_still_works(wds_cli: Runner, backend: Backend, tmp_path: Path) -> None:
    src = _photos(tmp_path)
    out = wds_cli("create", str(src), "-o", backend.url("d"), "--pattern", "p-%02d.tar",
                  env=backend.env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert backend.names() == ["d/p-00.tar"]


def test_bad_patterns_are_refused_before_anything_is_written(
    wds_cli: Runner, tmp_path: Path
) -> None:
    src = _photos(tmp_path)
    before = _tree(tmp_path)
    cases = [
        (["-o", str(tmp_path / "a" / "s-%d-%d.tar")], "exactly one integer format"),
        (["-o", str(tmp_path / "b" / "s-%d.tar"), "--pattern", "x-%d.tar"], "leave out --pattern"),
        (["-o", str(tmp_path / "c"), "--pattern", "same.tar"], "needs a %d-style"),
    ]
    for args, message in cases:
        out = wds_cli("create", str(src), *args)
        assert out.returncode == 1, args
        err = out.stderr.decode()
        assert message in err and len(err.strip().splitlines()) == 1, err
        assert _tree(tmp_path) == before, "nothing was created"


def test_empty_input_is_an_error_naming_it(wds_cli: Runner, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    recipe = tmp_path / "recipe.txt"
    recipe.write_text("# nothing yet\n\n")
    before = _tree(tmp_path)
    for source in ([str(empty)], ["--recipe", str(recipe)]):
        out = wds_cli("create", *source, "-o", str(tmp_path / "out" / "s-%04d.tar"))
        assert out.returncode == 1 and out.stdout == b"", source
        err = out.stderr.decode()
        assert "nothing to write" in err and repr(source[-1]) in err, err
        assert _tree(tmp_path) == before, "no output folder was made"


def test_failure_midway_removes_what_it_wrote(
    wds_cli: Runner, backend: Backend, tmp_path: Path
) -> None:
    recipe = tmp_path / "recipe.txt"
    recipe.write_text("a.txt text:one\nb.txt text:two\nc.txt pipe:echo broken >&2; exit 3\n")
    backend.put("keep/other.tar", b"not ours")
    out = wds_cli(
        "create", "--recipe", str(recipe), "-o", backend.url("new/deeper/s-%02d.tar"),
        "--maxcount", "1", env=backend.env,
    )  # fmt: skip
    assert out.returncode == 1
    err = out.stderr.decode()
    assert f"{recipe}:3" in err and "exited with 3: broken" in err, err
    # shards s-00 and s-01 were committed before the failure, then removed
    assert backend.names() == ["keep/other.tar"]
    if backend.name == "local":
        assert not (Path(backend.root) / "new").exists(), "the folders it made are gone"


def test_failure_keeps_a_folder_that_existed(wds_cli: Runner, tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.txt"
    recipe.write_text("a.txt text:one\nb.txt pipe:exit 4\n")
    (tmp_path / "out").mkdir()
    out = wds_cli("create", "--recipe", str(recipe), "-o", str(tmp_path / "out"),
                  "--maxcount", "1", env=clean_env())  # fmt: skip
    assert out.returncode == 1 and b"exited with 4" in out.stderr
    assert (tmp_path / "out").is_dir() and not list((tmp_path / "out").iterdir())
