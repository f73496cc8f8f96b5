"""Shared helpers of the resume tests: shards with a per-sample label, interrupted runs."""

from __future__ import annotations

import io
import json
import random
import tarfile
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def shard_bytes(index: int, samples: int, payload: int = 64) -> tuple[bytes, list[str]]:
    """A tar with ``samples`` samples (``.txt`` = its key, ``.cls``, ``.bin``) and its keys.

    Written in PAX format so every member has an extended header before it (as webdataset's
    TarWriter writes), which sample extents must include."""
    out = io.BytesIO()
    keys = []
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(samples):
            key = f"s{index:03d}/k{i:05d}"
            keys.append(key)
            for ext, data in (
                ("txt", key.encode()),
                ("cls", str(i % 7).encode()),
                ("bin", bytes([i % 256]) * payload),
            ):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                info.mtime = 1_700_000_000
                info.pax_headers = {"comment": "x" * (i % 3)}
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue(), keys


def write_shards(
    root: Path, n: int, samples: int, payload: int = 64
) -> tuple[list[str], list[str]]:
    """Write ``n`` shards under ``root``; return (urls, all keys)."""
    urls, keys = [], []
    for i in range(n):
        data, k = shard_bytes(i, samples, payload)
        path = root / f"shard-{i:03d}.tar"
        path.write_bytes(data)
        urls.append(str(path))
        keys.extend(k)
    return urls, keys


def key_of(item: Any) -> str:
    """The sample key of a dict sample or of a ``(txt, ...)`` tuple."""
    if isinstance(item, dict):
        txt = item["txt"]
    else:
        txt = item[0]
    return txt.decode() if isinstance(txt, bytes) else str(txt)


def keys_of_batch(batch: Any) -> list[str]:
    """Keys of a batch whose first field is the list of ``txt`` values."""
    return [t.decode() if isinstance(t, bytes) else str(t) for t in batch[0]]


def run_interrupted(
    make: Callable[[], Any],
    stops: Iterable[int],
    keys_of: Callable[[Any], list[str]] = lambda x: [key_of(x)],
) -> tuple[list[str], list[dict[str, Any]]]:
    """Iterate ``make()``; after ``stop`` items take the state (through JSON), drop the object
    and go on with a new one from that state. Returns the keys delivered up to each state plus
    the final run's, in order, and the states."""
    delivered: list[str] = []
    states: list[dict[str, Any]] = []
    state = None
    for stop in [*stops, None]:
        obj = make()
        if state is not None:
            obj.load_state_dict(state)
        for n, item in enumerate(obj, 1):
            delivered.extend(keys_of(item))
            if stop is not None and n == stop:
                state = json.loads(json.dumps(obj.state_dict()))
                states.append(state)
                break
    return delivered, states


def assert_exactly_once(delivered: list[str], expected: Iterable[str]) -> None:
    """Every expected key delivered once, nothing else."""
    counts = Counter(delivered)
    repeated = {k: c for k, c in counts.items() if c > 1}
    expected = set(expected)
    assert not repeated, f"{len(repeated)} repeated, e.g. {list(repeated.items())[:5]}"
    missing = expected - set(counts)
    assert not missing, f"{len(missing)} lost, e.g. {sorted(missing)[:5]}"
    assert set(counts) == expected


def random_stops(seed: int, n: int, high: int) -> list[int]:
    """``n`` random stopping points in ``1..high``."""
    rng = random.Random(seed)
    return [rng.randint(1, high) for _ in range(n)]


def counting(cls: type) -> type:
    """The backend's real opener class, noting the offset every stream starts at."""

    class Counting(cls):  # type: ignore[valid-type, misc]
        starts: list[int]

        def open(self, url: str, **options: Any) -> Any:
            self.starts.append(0)
            return super().open(url, **options)

        def open_at(self, url: str, offset: int, **options: Any) -> Any:
            self.starts.append(offset)
            return super().open_at(url, offset, **options)

    return Counting


def run_killed(script: Path, conf: Path, kill: int | None, root: Path) -> None:
    """Run ``python script conf`` (ranks in a gloo group on the loopback interface) in its own
    process group; it must exit 0, or die of SIGKILL when ``kill`` is set (rank 0 kills the
    group at that step)."""
    import os
    import signal
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = str(root)
    env["GLOO_SOCKET_IFNAME"] = "lo"  # the ranks talk over the loopback interface only
    proc = subprocess.run(
        [sys.executable, str(script), str(conf)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        start_new_session=True,  # its own process group, which rank 0 kills
    )
    want = 0 if kill is None else -signal.SIGKILL
    assert proc.returncode == want, proc.stderr[-4000:]
