"""A stand-in for SageMaker's Pipe-mode data agent, run as a separate process by the tests.

For each epoch ``e`` it creates the FIFO ``<dir>/<channel>_<e>`` (after the previous epoch is
done, as SageMaker does), blocks until a reader opens it, streams every shard file given on the
command line back to back, and closes it. Exit status: 0 when every epoch was written,
``EXIT_EPIPE`` when the reader closed its end early (the message names the epoch and offset).

    python pipe_writer.py DIR CHANNEL EPOCHS SHARD [SHARD ...]
"""

from __future__ import annotations

import os
import sys

EXIT_EPIPE = 32
CHUNK = 64 << 10


def main(argv: list[str]) -> int:
    directory, channel, epochs, *shards = argv
    for epoch in range(int(epochs)):
        path = os.path.join(directory, f"{channel}_{epoch}")
        tmp = path + ".creating"
        os.mkfifo(tmp)
        os.rename(tmp, path)  # appears atomically, already a FIFO
        fd = os.open(path, os.O_WRONLY)  # blocks until the reader opens its end
        written = 0
        try:
            for shard in shards:
                with open(shard, "rb") as f:
                    while chunk := f.read(CHUNK):
                        view = memoryview(chunk)
                        while view:
                            n = os.write(fd, view)
                            view = view[n:]
                            written += n
        except BrokenPipeError:
            print(f"EPIPE epoch={epoch} written={written}", flush=True)
            return EXIT_EPIPE
        finally:
            os.close(fd)
        print(f"done epoch={epoch} written={written}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
