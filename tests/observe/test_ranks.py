"""``profile_report()`` and ``export_trace()`` under ``torch.distributed``: two real gloo ranks
(processes), each with a DataLoader worker, gathered into one report and one trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.observe.helpers import ROOT
from tests.observe.test_trace import check_trace

SCRIPT = Path(__file__).with_name("dist_rank.py")


def test_report_and_trace_gather_every_rank(local_urls: list[str], tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = str(ROOT)
    init = f"file://{tmp_path / 'rendezvous'}"
    outs = [tmp_path / f"rank-{rank}.json" for rank in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), str(rank), "2", init, str(out), *local_urls],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank, out in enumerate(outs)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
    got = [json.loads(out.read_text()) for out in outs]
    expected = [[0, "main"], [0, "worker 0"], [1, "main"], [1, "worker 0"]]
    for rank, doc in enumerate(got):
        assert doc["samples"] == 80  # 2 of the 4 shards of 40 samples per rank
        assert doc["ranks"] == [0, 1]
        assert doc["processes"] == expected
        assert len(set(doc["pids"])) == 4
        assert doc["items"] == 20  # batches of 8 received by the two training loops
        assert doc["per_rank_items"] == {"0": 10, "1": 10}
        assert doc["table"].startswith("profile on 2 ranks:")
        assert doc["local_ranks"] == [rank]
        assert doc["local_processes"] == [[rank, "main"], [rank, "worker 0"]]
    trace = json.loads(Path(str(outs[0]) + ".trace.json").read_text())
    check_trace(trace)
    names = {
        e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    assert names == {"main (rank 0)", "worker 0 (rank 0)", "main (rank 1)", "worker 0 (rank 1)"}
    assert not Path(str(outs[1]) + ".trace.json").exists()  # rank 0 alone writes it
