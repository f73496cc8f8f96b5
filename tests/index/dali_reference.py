"""The reference for ``.idx`` files: DALI's ``tools/wds2idx.py`` method, re-done for the tests.

``wds2idx.py`` (NVIDIA/DALI, read for this, not copied) runs GNU tar twice on the archive:
``tar --list --block-num`` gives the block where each entry's listing starts, ``tar --verbose
--list`` its type and size. For every regular file (type ``-``) it takes the *next* entry's block
number times 512 minus the file's size, rounded down to a multiple of 512, as the data offset;
it then splits each name at the first dot of its last path component, skips names whose base is
empty or ends in ``/``, groups consecutive names with the same base into samples and writes
``v1.2 <count>`` and one line per sample of ``<ext> <offset> <size> <name>`` fields. An archive
without samples raises (``ValueError: Webdataset Tar File empty``), a name that is not ASCII
raises ``UnicodeDecodeError``: so does this reference.
"""

from __future__ import annotations

import subprocess


def _tar(*args: str) -> list[bytes]:
    done = subprocess.run(["tar", *args], capture_output=True, check=False)
    return done.stdout.split(b"\n")


def _entries(path: str) -> list[tuple[int, str, int]]:
    """(data offset, name, size) of every regular file, computed as wds2idx.py does."""
    blocks = _tar("--list", "--block-num", "--file", path)  # "block <n>: <name>"
    listing = _tar("--verbose", "--list", "--file", path)  # "<mode> <owner> <size> <date> <name>"
    out = []
    for line, next_line, verbose in zip(blocks, blocks[1:], listing, strict=False):
        if not line or not verbose:
            continue
        name = line[line.find(b":") + 2 :].decode("ascii")
        if verbose[:1] != b"-":
            continue
        next_block = int(next_line[next_line.find(b"block") + 6 : next_line.find(b":")])
        head = verbose[: -len(name)]
        head = head[: head.rfind(b"-") - 8]  # drop " yyyy-mm-dd hh:mm "
        size = int(head[head.rfind(b" ") :])
        offset = next_block * 512 - size
        out.append((offset - offset % 512, name, size))
    return out


def wds2idx(path: str) -> bytes:
    """The ``.idx`` bytes DALI's ``wds2idx.py`` writes for the tar file at ``path``.

    Raises:
        ValueError: no samples (wds2idx's "Webdataset Tar File empty").
        UnicodeDecodeError: a name that is not ASCII.
    """
    samples: list[list[tuple[str, int, int, str]]] = []
    last = None
    for offset, name, size in _entries(path):
        dot = name.find(".", name.rfind("/") + 1)
        base, ext = name[:dot], name[dot + 1 :]
        if not base or base.endswith("/"):
            continue
        if base != last:
            samples.append([])
            last = base
        samples[-1].append((ext, offset, size, name))
    if not samples:
        raise ValueError("Webdataset Tar File empty")
    lines = [f"v1.2 {len(samples)}\n"]
    for sample in samples:
        lines.append(" ".join(" ".join(map(str, member)) for member in sample) + "\n")
    return "".join(lines).encode("ascii")
