"""dSort on the real AIStore 5.0 cluster (``aisnode`` built with ``-tags dsort``): the library,
``wds-cloud dsort start/wait/abort``, the checked specs and the seed post's spec with old keys.

Every job checks that the output shards hold exactly the input's samples, each once, with every
member intact, and that each shard but the last reached the size asked for.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.servers.aistore import Cluster
from tests.support.tarbuild import tar_bytes
from wds_cloud.aistore import dsort

aistore_sdk = pytest.importorskip("aistore.sdk")

pytestmark = [pytest.mark.ais, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
SPEC_FILES = sorted((ROOT / "dsort_specs").glob("*.json"))
LEGACY_SPEC = ROOT / "tests" / "dsort" / "data" / "blog-webdataset-part1.json"

Samples = dict[str, dict[str, bytes]]


def _client(cluster: Cluster) -> Any:
    return aistore_sdk.Client(cluster.endpoint, timeout=(2, 30))


def _bucket(cluster: Cluster, stem: str) -> Any:
    return _client(cluster).bucket(f"{stem}-{uuid.uuid4().hex[:6]}").create()


def _put_samples(bucket: Any, names: list[str], per_shard: int) -> Samples:
    """One tar per name; sample ``i`` has ``.cls`` (its label), ``.txt`` and a ``.bin`` whose
    size varies, so records differ in size. Returns the samples by key."""
    samples: Samples = {}
    for s, name in enumerate(names):
        members = []
        for j in range(per_shard):
            i = s * per_shard + j
            key = f"dir/sample-{i:05d}"
            sample = {
                ".cls": str(i % 7).encode(),
                ".txt": f"sample {i}".encode(),
                ".bin": bytes([i % 251]) * (300 + (i * 37) % 500),
            }
            samples[key] = sample
            members += [(key + ext, data) for ext, data in sample.items()]
        bucket.object(name).get_writer().put_content(tar_bytes(members))
    return samples


def _read_outputs(bucket: Any, prefix: str = "") -> list[tuple[str, int, list[str], Samples]]:
    """``(name, size, keys in order, samples)`` of every output shard, by name."""
    out = []
    for entry in bucket.list_objects(prefix=prefix).entries:
        data = bucket.object(entry.name).get_reader().read_all()
        keys: list[str] = []
        samples: Samples = {}
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar:
                base = member.name.rsplit("/", 1)[-1]
                key = member.name[: len(member.name) - len(base)] + base.split(".", 1)[0]
                body = tar.extractfile(member)
                if key not in samples:
                    keys.append(key)
                samples.setdefault(key, {})[member.name[len(key) :]] = body.read() if body else b""
        out.append((entry.name, len(data), keys, samples))
    return out


def _check(outputs: list[Any], expected: Samples, shard_size: int) -> None:
    """Each sample once, intact; every shard but the last holds at least ``shard_size`` bytes
    of record content (dSort closes a shard once it reaches the size)."""
    keys = [k for _, _, ks, _ in outputs for k in ks]
    assert sorted(keys) == sorted(expected) and len(keys) == len(set(keys))
    assert {k: v for _, _, _, s in outputs for k, v in s.items()} == expected
    content = [sum(len(d) for s in samples.values() for d in s.values()) for *_, samples in outputs]
    assert all(size >= shard_size for size in content[:-1]), content
    assert content[-1] > 0, content


def test_reshard_via_dsort_on_the_cluster(ais_cluster: Cluster) -> None:
    src, dst = _bucket(ais_cluster, "rs-in"), _bucket(ais_cluster, "rs-out")
    names = [f"train-{i:04d}.tar" for i in range(6)]
    expected = _put_samples(src, names, per_shard=20)

    summary = dsort.reshard_via_dsort(
        f"ais://{src.name}/train-{{0000..0005}}.tar",
        f"ais://{dst.name}/shuffled-%04d.tar",
        maxsize="16KiB",
        seed=17,
        progress=False,
        poll_interval=0.2,
        timeout=300,
        endpoint=ais_cluster.endpoint,
    )
    outputs = _read_outputs(dst)
    assert summary.samples == 120 and summary.input_shards == 6
    assert summary.shards == [f"ais://{dst.name}/{name}" for name, *_ in outputs]
    assert [name for name, *_ in outputs] == [f"shuffled-{i:04d}.tar" for i in range(len(outputs))]
    _check(outputs, expected, 16 << 10)
    order = [k for _, _, ks, _ in outputs for k in ks]
    assert order != sorted(order)  # shuffled


def _run_cli(
    cluster: Cluster, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AIS_ENDPOINT": cluster.endpoint, "PYTHONPATH": str(ROOT)}
    env.pop("AIS_AUTHN_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "wds_cloud.cli", "dsort", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        input=stdin,
        cwd=ROOT,
    )


def _renamed(spec: dict[str, Any], src: str, dst: str, size: str) -> dict[str, Any]:
    return {
        **spec,
        "input_bck": {**spec["input_bck"], "name": src},
        "output_bck": {**spec["output_bck"], "name": dst},
        "output_shard_size": size,
    }


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_checked_spec_runs_through_the_cli(
    ais_cluster: Cluster, path: Path, tmp_path: Path
) -> None:
    """dsort_specs/*.json with their buckets renamed and a small shard size."""
    spec = json.loads(path.read_text())
    src, dst = _bucket(ais_cluster, "spec-in"), _bucket(ais_cluster, "spec-out")
    expected = _put_samples(src, [f"samples-{i:02d}.tar" for i in range(19)], per_shard=4)
    spec_file = tmp_path / path.name
    spec_file.write_text(json.dumps(_renamed(spec, src.name, dst.name, "8KiB")))

    started = _run_cli(ais_cluster, "start", str(spec_file))
    assert started.returncode == 0, started.stderr
    job = started.stdout.strip()
    waited = _run_cli(ais_cluster, "wait", job, "--timeout", "240", "--poll-interval", "0.2")
    assert waited.returncode == 0, waited.stderr
    assert f"dSort {job} finished" in waited.stdout and "(228 tar members" in waited.stdout

    outputs = _read_outputs(dst)
    _check(outputs, expected, 8 << 10)
    keys = [k for _, _, ks, _ in outputs for k in ks]
    kind = spec["algorithm"]["kind"]
    if kind == "alphanumeric":
        assert keys == sorted(keys)
    elif kind == "content":
        labels = [int(s[".cls"]) for *_, samples in outputs for s in samples.values()]
        assert labels == sorted(labels)


def test_the_seed_posts_spec_with_old_keys(ais_cluster: Cluster, tmp_path: Path) -> None:
    """The blog post's spec (``extension``, ``bck``, a bare ``input_format``), from stdin."""
    spec = json.loads(LEGACY_SPEC.read_text())
    src = _bucket(ais_cluster, "images")
    expected = _put_samples(src, [f"samples-{i:02d}.tar" for i in range(19)], per_shard=3)
    spec = {**spec, "bck": {"name": src.name}, "output_shard_size": "4KB"}

    started = _run_cli(ais_cluster, "start", "-", stdin=json.dumps(spec))
    assert started.returncode == 0, started.stderr
    assert "'extension' is an old name" in started.stderr and "'bck'" in started.stderr
    job = started.stdout.strip()
    waited = _run_cli(ais_cluster, "wait", job, "--timeout", "240", "--poll-interval", "0.2")
    assert waited.returncode == 0, waited.stderr
    # the old spec writes into its input bucket: shuffled-shard-0.tar, ...
    outputs = _read_outputs(src, prefix="shuffled-shard-")
    _check(outputs, expected, 4 << 10)


def test_abort_stops_a_running_job(ais_cluster: Cluster) -> None:
    src, dst = _bucket(ais_cluster, "ab-in"), _bucket(ais_cluster, "ab-out")
    _put_samples(src, [f"in-{i:03d}.tar" for i in range(60)], per_shard=40)
    spec = dsort.DsortSpec(
        input_bck=src.name,
        input_template="in-{000..059}.tar",
        output_bck=dst.name,
        output_format="out-{0000..9999}.tar",
        output_shard_size="4KiB",
        algorithm="shuffle",
        seed="3",
    )
    # started and aborted in this process, back to back: the job takes well under a second on
    # two targets, and a CLI process for each step could arrive after it finished (it did, under
    # load); the CLI's abort command is checked on the emulator (tests/cli/test_dsort_cli.py)
    job = dsort.start(spec, endpoint=ais_cluster.endpoint)
    dsort.abort(job, endpoint=ais_cluster.endpoint)
    waited = _run_cli(ais_cluster, "wait", job, "--timeout", "120", "--poll-interval", "0.2")
    assert waited.returncode == 1 and "aborted" in waited.stderr, waited.stdout + waited.stderr


@pytest.mark.parametrize(
    ("bucket", "message"),
    [
        ({"name": "no-such-bucket"}, 'bucket "ais://no-such-bucket" does not exist'),
        (
            {"name": "no-such-bucket", "provider": "gcp"},
            "GCP backend is missing in the cluster configuration",
        ),
    ],
    ids=["missing bucket", "backend not configured"],
)
def test_a_spec_the_cluster_rejects(
    ais_cluster: Cluster, tmp_path: Path, bucket: dict[str, str], message: str
) -> None:
    """Valid here, refused by the cluster: its own message, on one line, exit status 1."""
    spec = {
        "input_bck": bucket,
        "input_format": {"template": "in-{0..2}.tar"},
        "output_format": "out-{00..99}.tar",
        "output_shard_size": "1KiB",
        "algorithm": {"kind": "shuffle"},
    }
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    started = _run_cli(ais_cluster, "start", str(spec_file))
    assert started.returncode == 1 and started.stdout == ""
    (line,) = started.stderr.splitlines()
    assert line.startswith("wds-cloud dsort start: error: input_bck: AIStore: ") and message in line
    assert "Traceback" not in started.stderr
