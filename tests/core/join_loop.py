"""A training loop over a join for the SIGKILL test: ``python join_loop.py SETS_JSON CKPT LOG``.

``make_loader(wds.join(sets, columns=["img", "txt"]))`` with 2 process workers and shuffle
buffers; each delivered sample is logged as its key, or ``MISALIGNED <key>`` when its fields
are not all of that key; every 3 steps ``{"lines", "loader"}`` is saved to CKPT atomically. On
start it resumes from CKPT when it exists, cutting LOG back to that checkpoint's lines.
"""

from __future__ import annotations

import json
import os
import sys

import wds_cloud as wds
from tests.core.joinsets import aligned


def main() -> None:
    sets = json.loads(json.loads(sys.argv[1])[0])  # run_killed passes a list: [sets JSON]
    ckpt, log = sys.argv[2], sys.argv[3]
    loader = wds.make_loader(
        wds.join(sets, columns=["img", "txt"]),
        batch_size=5,
        num_workers=2,
        shuffle_buffer=8,
        seed=11,
        collate=list,
    )
    lines = 0
    if os.path.exists(ckpt):
        with open(ckpt) as f:
            saved = json.load(f)
        loader.load_state_dict(saved["loader"])
        lines = saved["lines"]
    with open(log, "r+" if os.path.exists(log) else "w") as out:
        out.truncate(sum(len(x) for x in open(log).readlines()[:lines]) if lines else 0)
        out.seek(0, os.SEEK_END)
        for step, batch in enumerate(loader, 1):
            for sample in batch:
                ok = aligned(sample) and "npy" not in sample
                out.write(("" if ok else "MISALIGNED ") + sample["__key__"] + "\n")
                lines += 1
            out.flush()
            if step % 3 == 0:
                tmp = ckpt + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({"lines": lines, "loader": loader.state_dict()}, f)
                os.replace(tmp, ckpt)
            print(f"step {step}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
