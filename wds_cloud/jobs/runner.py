"""Run a planned job on an engine: skip committed tasks, record each commit, sum it up."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from wds_cloud.errors import ConfigError, WdsCloudError
from wds_cloud.jobs.engines import Engine, make_engine
from wds_cloud.jobs.manifest import fingerprint, load_manifest, save_manifest
from wds_cloud.jobs.summary import JobSummary, Progress, TaskResult
from wds_cloud.jobs.task import Ops, Task, run_task
from wds_cloud.openers.registry import url_scheme
from wds_cloud.redact import redact_url

_INT_FORMAT = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?[diouxX]")
_SAVE_EVERY = 0.5  # seconds between manifest rewrites while tasks finish


def _name(fn: Callable[..., Any] | None) -> str | None:
    if fn is None:
        return None
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def default_manifest(pattern: str) -> str:
    """The manifest beside the output shards, named for their pattern:
    ``out/shard-%06d.tar`` -> ``out/shard-N.tar.manifest.json`` (two jobs writing different
    names into one folder keep separate manifests)."""
    cut = pattern.rfind("/") + 1
    base = _INT_FORMAT.sub("N", pattern[cut:]).replace("%%", "%")
    return pattern[:cut].replace("%%", "%") + base + ".manifest.json"


def check_pattern(pattern: str) -> None:
    """Refuse an output pattern that does not give every task its own shard name."""
    try:
        first, second = pattern % 0, pattern % 1
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"output {redact_url(pattern)!r} must hold one integer format such as %06d: {exc}"
        ) from exc
    if first == second:
        raise ConfigError(f"output {redact_url(pattern)!r} gives every shard the same name")


def _make_dirs(pattern: str, count: int) -> None:
    from wds_cloud.openers.local import url_to_path

    for d in sorted({os.path.dirname(url_to_path(pattern % i)) for i in range(count)}):
        if d:
            os.makedirs(d, exist_ok=True)


class _Pick(Sequence[Task]):
    """The tasks at ``indices`` of a plan, each made when asked for (plans may be lazy)."""

    def __init__(self, tasks: Sequence[Task], indices: list[int]) -> None:
        self.tasks = tasks
        self.indices = indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.tasks[self.indices[i]]


def _describe(tasks: Sequence[Task]) -> Any:
    describe = getattr(tasks, "describe", None)
    if callable(describe):
        return describe()
    return [[t.index, t.source.describe(), t.output] for t in tasks]


def run_job(
    kind: str,
    tasks: Sequence[Task],
    ops: Ops,
    *,
    engine: str | Engine = "local",
    address: str | None = None,
    manifest: str | bool | None = None,
    progress: bool = False,
    description: Any = None,
    started: float | None = None,
) -> JobSummary:
    """Run the tasks of a shard-writing job (convert, reshard, map).

    Args:
        kind: the job's name.
        tasks: the plan; task ``i`` writes ``ops.pattern % i``.
        ops: what each task applies.
        engine: ``"local"``, ``"ray"`` or an engine object.
        address: Ray cluster address (the ray engine).
        manifest: where the manifest of committed outputs is kept (None: beside the shards;
            False: none, the job is not resumable).
        progress: print progress on stderr.
        description: the job's inputs and parameters (for the fingerprint) besides the plan.
        started: ``time.monotonic()`` when planning began (the summary's time counts from it).

    Raises:
        WdsCloudError: some tasks failed (the committed ones are recorded; rerun to resume).
    """
    assert ops.pattern is not None
    runner = make_engine(engine, address=address)
    started = time.monotonic() if started is None else started
    job = fingerprint(
        {
            "kind": kind,
            "pattern": ops.pattern,
            "map": _name(ops.map),
            "select": _name(ops.select),
            "writer": ops.writer_kw,
            "plan": _describe(tasks),
            "more": description,
        }
    )
    manifest_url = None if manifest is False else (manifest or default_manifest(ops.pattern))
    assert manifest_url is None or isinstance(manifest_url, str)
    if url_scheme(ops.pattern) == "file":
        _make_dirs(ops.pattern, len(tasks))
    done = load_manifest(manifest_url, job, ops.registry) if manifest_url else {}
    todo = _Pick(tasks, [i for i in range(len(tasks)) if i not in done])
    summary = JobSummary(kind, manifest=manifest_url, resumed=len(done))
    bar = Progress(kind, len(todo), enabled=progress)
    failures: list[tuple[Task, BaseException]] = []
    last_save = time.monotonic()
    try:
        for position, outcome in runner.run(run_task, todo, ops):
            task = todo[position]
            if isinstance(outcome, BaseException):
                failures.append((task, outcome))
                continue
            assert isinstance(outcome, TaskResult)
            done[task.index] = outcome
            bar.update(outcome)
            # rewritten at most twice a second, less often as it grows (1 s per 10,000 tasks)
            every = max(_SAVE_EVERY, len(done) / 10000)
            if manifest_url and time.monotonic() - last_save >= every:
                save_manifest(manifest_url, job, kind, done, ops.registry)
                last_save = time.monotonic()
    finally:
        bar.close()
        if manifest_url:
            complete = not failures and len(done) == len(tasks)
            save_manifest(manifest_url, job, kind, done, ops.registry, complete=complete)
    summary.tasks = [done[i] for i in sorted(done)]
    summary.seconds = time.monotonic() - started
    if failures:
        raise_failures(kind, failures)
    return summary


def raise_failures(kind: str, failures: list[tuple[Task, BaseException]]) -> None:
    """One error naming the failed tasks (the first five) and their errors."""
    failures.sort(key=lambda f: f[0].index)
    shown = "; ".join(
        f"task {t.index} ({redact_url(t.output or '')}): {type(e).__name__}: {e}"
        for t, e in failures[:5]
    )
    more = f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""
    raise WdsCloudError(
        f"{kind}: {len(failures)} task(s) failed: {shown}{more}; the committed ones are "
        "recorded, run the same job again to finish"
    ) from failures[0][1]


__all__ = ["check_pattern", "default_manifest", "raise_failures", "run_job"]
