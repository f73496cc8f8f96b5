"""Secure mode: webdataset's ``WDS_SECURE=1`` / ``enforce_security`` switch, in one place.

When secure mode is on, wds_cloud refuses what lets a shard or a URL run code or read files the
program did not mean to expose:

* ``pipe:`` URLs (reading and writing) are not run, unless a :class:`~wds_cloud.PipeOpener` is
  built with ``allow=True``;
* ``pkl``/``pickle``/``pyd`` and ``pth`` values are not decoded (``pickle.loads``,
  ``torch.load``);
* :func:`wds_cloud.gopen` does not open local paths or ``file:`` URLs (the object-store and HTTP
  openers, and ``-`` for stdin/stdout, keep working).

It is on when the program sets ``security.enforce_security = True`` (webdataset code sets
``wds.utils.enforce_security``, which is the same switch), or, while that is left at ``None``,
when ``WDS_SECURE`` or ``WDS_CLOUD_SECURE`` is set to anything but ``""``/``"0"`` in the
environment (read each time, so it can be set after import).
"""

from __future__ import annotations

import os

__all__ = ["enforce_security", "secure_mode"]

# None: follow the environment; True/False: set by the program.
enforce_security: bool | None = None


def secure_mode() -> bool:
    """Whether secure mode is on (the program's setting, else the environment)."""
    if enforce_security is not None:
        return enforce_security
    return any(
        os.environ.get(name, "0").strip() not in ("", "0")
        for name in ("WDS_SECURE", "WDS_CLOUD_SECURE")
    )
