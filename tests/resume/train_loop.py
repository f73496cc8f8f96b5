"""A training loop for the SIGKILL tests: ``python train_loop.py URLS_JSON CKPT LOG [EXECUTOR]``.

Iterates ``make_loader`` (2 workers, shuffle buffers in the workers and in the main process),
appends each delivered key to LOG (flushed), and every 4 steps saves ``{"step", "lines",
"loader"}`` to CKPT atomically. On start it resumes from CKPT when it exists, cutting LOG back
to the lines of that checkpoint (what was delivered after it is lost, as in training).
EXECUTOR is make_loader's (default ``processes``); a loader with a child process prints
``child PID`` before its first step.
"""

from __future__ import annotations

import json
import os
import sys

import wds_cloud as wds


def main() -> None:
    urls = json.loads(sys.argv[1])
    ckpt, log = sys.argv[2], sys.argv[3]
    loader = wds.make_loader(
        urls,
        batch_size=6,
        num_workers=2,
        shuffle_buffer=15,
        seed=17,
        to_tuple=("txt",),
        collate=list,
        executor=sys.argv[4] if len(sys.argv) > 4 else "processes",
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
            if step == 1 and getattr(loader, "pid", None):
                print(f"child {loader.pid}", flush=True)
            for (txt,) in batch:
                out.write(txt.decode() + "\n")
                lines += 1
            out.flush()
            if step % 4 == 0:
                tmp = ckpt + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({"step": step, "lines": lines, "loader": loader.state_dict()}, f)
                os.replace(tmp, ckpt)
            print(f"step {step}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
