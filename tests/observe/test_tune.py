"""Autotune (``wds_cloud.tools.tune``): the memory budget holds, the chosen settings are valid
``make_loader`` arguments, ``as_code()`` runs, ``autotune=True`` delivers the same samples,
and ``wds-cloud tune`` prints the table and the code or a clear error.

Every trial reads real shards through real DataLoader workers; the memory is the tree's PSS read
from ``/proc``. Nothing here checks a speed (that is ``benchmarks/bench_tune.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.observe.conftest import PER_SHARD, SHARDS
from tests.observe.helpers import run_python
from wds_cloud.errors import ConfigError
from wds_cloud.pytorch.builder import make_loader
from wds_cloud.tools.tune import Setting, Space, tune
from wds_cloud.tools.tune.memory import descendants, tree_memory
from wds_cloud.tools.tune.plan import parse_budget
from wds_cloud.tools.tune.search import axis_order
from wds_cloud.tools.tune.trial import OVER_BUDGET, SKIPPED

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/self/smaps_rollup") and not os.path.exists("/proc/self/statm"),
    reason="reads memory from /proc (Linux)",
)

BALLAST = 300 << 20
FIELDS = ("__key__", "cls")
QUICK = {"seconds": 4.0, "trial_seconds": 0.4, "cores": 2}


class Ballast:
    """A ``map`` that makes every DataLoader worker hold ``BALLAST`` bytes (touched, so they
    count), and the main process nothing: settings with workers are over a budget that
    leaves room for the main process only (module level: it pickles into workers)."""

    def __init__(self) -> None:
        self.held: bytearray | None = None

    def __call__(self, sample: Any) -> Any:
        from torch.utils.data import get_worker_info

        if self.held is None and get_worker_info() is not None:
            self.held = bytearray(os.urandom(1)) * BALLAST  # every page written
        return sample


def keys_of(loader: Any) -> list[str]:
    return [key for batch in loader for key in batch[0]]


def expected_keys() -> list[str]:
    return sorted(f"s{s:02d}-{i:04d}" for s in range(SHARDS) for i in range(PER_SHARD))


# -- memory -----------------------------------------------------------------------------------


def test_tree_memory_counts_a_child_process_and_its_pages() -> None:
    code = (
        "import sys; b = bytearray(200 << 20); b[::4096] = b'x' * len(b[::4096]); "
        "print('ready', flush=True); sys.stdin.read()"
    )
    before = tree_memory()
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert child.pid in descendants(os.getpid())
        assert tree_memory() - before >= 190 << 20
    finally:
        child.communicate("")
    assert child.pid not in descendants(os.getpid())


@pytest.mark.slow
def test_the_search_never_keeps_a_trial_over_the_budget(local_urls: list[str]) -> None:
    budget = tree_memory() + BALLAST // 3
    result = tune(
        local_urls, batch_size=8, to_tuple=FIELDS, map=Ballast(), memory_budget=budget, **QUICK
    )
    assert result.budget == budget
    refused = [t for t in result.trials if t.status in (OVER_BUDGET, SKIPPED)]
    assert refused, result.table()  # the seed (2 workers) holds 600 MiB more than it may
    for trial in result.trials:
        if trial.status == OVER_BUDGET or (trial.ok and trial.memory > budget):
            assert trial.memory > budget and not trial.ok, result.table()
            assert trial.samples_per_s is None
        if trial.ok:
            assert trial.memory <= budget
    assert result.setting.num_workers == 0  # the only kind of setting that fits
    assert result.memory <= budget
    assert "over budget" in result.table()


def test_a_budget_below_the_process_itself_is_refused_before_any_trial(
    local_urls: list[str],
) -> None:
    with pytest.raises(ConfigError, match=r"memory budget 1 MiB is not above what this process"):
        tune(local_urls, batch_size=8, memory_budget="1MiB", **QUICK)


# -- the result -------------------------------------------------------------------------------


@pytest.mark.slow
def test_tuned_kwargs_build_a_loader_that_reads_every_sample(local_urls: list[str]) -> None:
    result = tune(local_urls, batch_size=8, to_tuple=FIELDS, shuffle_buffer=16, **QUICK)
    assert result.trials[0].setting == Space.build(batch_size=8, cores=2, shards=SHARDS).seed
    assert all(t.ok for t in result.trials if t.setting == result.setting)
    kwargs = result.kwargs()
    assert set(kwargs) <= {
        "num_workers",
        "prefetch_factor",
        "inner_batch",
        "shm_batches",
        "registry",
        "prefetch",
    }
    assert "registry" not in kwargs and "prefetch" not in kwargs  # local shards
    loader = make_loader(local_urls, batch_size=8, to_tuple=FIELDS, shuffle_buffer=16, **kwargs)
    assert sorted(keys_of(loader)) == expected_keys()
    assert result.samples_per_s > 0 and result.samples_per_s == max(
        t.samples_per_s or 0 for t in result.trials if t.ok
    )


@pytest.mark.slow
def test_as_code_round_trips(local_urls: list[str]) -> None:
    result = tune(local_urls, batch_size=8, to_tuple=FIELDS, shuffle_buffer=16, **QUICK)
    code = result.as_code()
    namespace: dict[str, Any] = {}
    exec(compile(code, "<as_code>", "exec"), namespace)
    assert sorted(keys_of(namespace["loader"])) == expected_keys()
    for name, value in result.kwargs().items():
        assert f"    {name}={value!r},\n" in code
    assert "to_tuple=('__key__', 'cls')," in code and "batch_size=8," in code


@pytest.mark.slow
def test_as_code_names_the_callers_functions_it_cannot_print(local_urls: list[str]) -> None:
    result = tune(local_urls, batch_size=8, to_tuple=FIELDS, map=Ballast(), **QUICK)
    code = result.as_code()
    assert "# also pass your own: map\n" in code and "map=" not in code
    compile(code, "<as_code>", "exec")


@pytest.mark.slow
def test_explicit_arguments_are_kept_and_not_searched(local_urls: list[str]) -> None:
    result = tune(local_urls, batch_size=8, to_tuple=FIELDS, num_workers=1, **QUICK)
    assert {t.setting.num_workers for t in result.trials} == {1}
    assert "num_workers" not in result.kwargs()
    assert result.as_code().count("num_workers=1,") == 1


@pytest.mark.slow
def test_autotune_loader_delivers_the_same_samples_every_epoch(local_urls: list[str]) -> None:
    kw: dict[str, Any] = {"batch_size": 8, "to_tuple": FIELDS, "shuffle_buffer": 16}
    plain = make_loader(local_urls, **kw)
    tuned = make_loader(local_urls, autotune=dict(QUICK), **kw)
    for epoch in range(2):
        plain.set_epoch(epoch)
        tuned.set_epoch(epoch)
        a, b = keys_of(plain), keys_of(tuned)
        assert sorted(a) == sorted(b) == expected_keys()  # no sample lost or repeated


def test_autotune_refuses_global_order_and_unknown_options(local_urls: list[str]) -> None:
    with pytest.raises(ConfigError, match="streaming loaders"):
        make_loader(local_urls, batch_size=8, order="global", autotune=True)
    with pytest.raises(ConfigError, match=r"unknown autotune options \['budget'\]"):
        make_loader(local_urls, batch_size=8, autotune={"budget": "1GB"})
    with pytest.raises(ConfigError, match="autotune must be True"):
        make_loader(local_urls, batch_size=8, autotune="yes")


# -- the space and parsing --------------------------------------------------------------------


def test_space_axes_follow_cores_shards_and_remoteness() -> None:
    local = Space.build(batch_size=64, cores=2, shards=3, shm=True)
    assert local.axes["num_workers"] == (0, 1, 2, 3)  # at most one per shard
    assert local.axes["inner_batch"] == (16, 32, 64, 128, 256)
    assert local.axes["readahead"] == (None,) and local.axes["prefetch"] == (None,)
    assert local.seed == Setting(2, 2, 64, True)
    remote = Space.build(batch_size=64, cores=8, remote=True, ranged=True)
    assert remote.axes["num_workers"][-1] == 16 and remote.seed.num_workers == 8
    assert remote.seed.readahead == 16 << 20 and remote.seed.prefetch == 0
    own = Space.build(batch_size=64, cores=8, remote=True, own_registry=True)
    assert own.axes["readahead"] == (None,) and own.axes["prefetch"] == (None,)
    assert local.size() == 4 * 4 * 5 * 2
    assert not local.applies("prefetch_factor", Setting(0, 2, 64, True))
    assert Setting(0, 1, 8, False).key() == Setting(0, 8, 8, True).key()
    assert [s.num_workers for s in local.neighbours("num_workers", local.seed)] == [0, 1, 3]
    one = local.seed.with_value("num_workers", 1)
    assert [s.num_workers for s in local.neighbours("num_workers", one)] == [0, 2]
    assert [s.inner_batch for s in local.neighbours("inner_batch", local.seed)] == [32, 128]


def test_the_verdict_picks_the_first_axis() -> None:
    assert axis_order("network-bound: 64% ...")[:2] == ("prefetch", "readahead")
    assert axis_order("transfer-bound: ...")[0] == "inner_batch"
    assert axis_order("decode-bound: ...")[0] == "num_workers"
    assert axis_order(None)[0] == "num_workers"
    assert axis_order("transfer-bound: ...", remote=True)[:3] == (
        "prefetch",
        "readahead",
        "inner_batch",
    )


@pytest.mark.parametrize(
    ("text", "expected"), [("8GB", 8 << 30), ("512MiB", 512 << 20), ("1.5G", 3 << 29), (4096, 4096)]
)
def test_budgets_parse(text: Any, expected: int) -> None:
    assert parse_budget(text) == expected


@pytest.mark.parametrize("text", ["8XB", "lots", "-1G", 0, True])
def test_bad_budgets_name_the_setting(text: Any) -> None:
    with pytest.raises(ConfigError, match="memory_budget"):
        parse_budget(text)


# -- the command line -------------------------------------------------------------------------


def _tune(*args: str) -> subprocess.CompletedProcess[str]:
    return run_python("-m", "wds_cloud.cli", "tune", *args)


@pytest.mark.slow
def test_cli_prints_the_trials_and_code_that_runs(shard_dir: Path) -> None:
    spec = str(shard_dir / "shard-{00..03}.tar")
    done = _tune(
        spec,
        "--batch-size",
        "8",
        "--fields",
        "__key__ cls",
        "--seconds",
        "4",
        "--trial-seconds",
        "0.4",
        "--memory-budget",
        "8GB",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table, code = done.stdout.split("\nimport wds_cloud as wds\n")
    assert table.splitlines()[0].split() == [
        "workers",
        "pf",
        "inner",
        "shm",
        "samples/s",
        "memory",
        "status",
    ]
    assert "budget 8 GiB" in table and "trial 1: " in done.stderr
    namespace: dict[str, Any] = {}
    exec("import wds_cloud as wds\n" + code, namespace)
    assert sorted(keys_of(namespace["loader"])) == expected_keys()


@pytest.mark.slow
def test_cli_json_holds_the_trials_and_the_code(shard_dir: Path) -> None:
    spec = str(shard_dir / "shard-{00..03}.tar")
    done = _tune(
        spec,
        "--batch-size",
        "8",
        "--seconds",
        "3",
        "--trial-seconds",
        "0.4",
        "--workers",
        "1",
        "--json",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout)
    assert data["setting"]["num_workers"] == 1 and data["trials"]
    assert data["code"].startswith("import wds_cloud as wds\n") and done.stderr == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--memory-budget", "8XB"), "argument --memory-budget: --memory-budget='8XB' is not a"),
        (("--memory-budget", "0"), "argument --memory-budget: must be a positive byte size"),
        (("--seconds", "0"), "argument --seconds: must be > 0"),
        (("--seconds", "inf"), "argument --seconds: must be > 0"),
        (("--batch-size", "0"), "argument --batch-size: must be >= 1"),
    ],
)
def test_cli_bad_values_are_usage_errors(
    shard_dir: Path, args: tuple[str, ...], message: str
) -> None:
    done = _tune(str(shard_dir / "shard-00.tar"), *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_cli_budget_below_the_process_is_a_clear_error(shard_dir: Path) -> None:
    done = _tune(str(shard_dir / "shard-00.tar"), "--memory-budget", "1MiB")
    assert done.returncode == 1
    assert done.stderr.startswith("wds-cloud tune: error: tune: memory budget 1 MiB is not above")


@pytest.mark.slow
def test_remote_shards_tune_read_ahead_and_ranged_reads_and_the_code_runs(
    http_server: Any,
) -> None:
    urls = [f"http://127.0.0.1:{http_server.port}/shard-{i:02d}.tar" for i in range(SHARDS)]
    result = tune(urls, batch_size=8, to_tuple=FIELDS, shuffle_buffer=16, **QUICK)
    assert result.setting.readahead is not None and result.setting.prefetch is not None
    assert result.trials[0].setting.readahead == 16 << 20  # the registry's default
    kwargs = result.kwargs()
    assert kwargs["registry"].readahead == result.setting.readahead
    assert kwargs["prefetch"] == result.setting.prefetch
    namespace: dict[str, Any] = {}
    exec(compile(result.as_code(), "<as_code>", "exec"), namespace)
    assert sorted(keys_of(namespace["loader"])) == expected_keys()


@pytest.mark.slow
def test_cli_does_not_print_credentials_in_the_code(http_server: Any) -> None:
    spec = f"http://user:hunter2@127.0.0.1:{http_server.port}/shard-{{00..03}}.tar"
    done = _tune(spec, "--batch-size", "8", "--seconds", "2", "--trial-seconds", "0.3", "-q")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "hunter2" not in done.stdout + done.stderr
    assert f"127.0.0.1:{http_server.port}/shard-{{00..03}}.tar" in done.stdout
