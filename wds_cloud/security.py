"""Secure mode: webdataset's ``WDS_SECURE=1`` / ``enforce_security`` switch, in one place.

When secure mode is on, wds_cloud refuses what lets a shard or a URL run code or read files the
program did not mean to expose, as webdataset 1.0.2 does:

* ``pipe:`` URLs (reading and writing) are not run, unless a :class:`~wds_cloud.PipeOpener` is
  built with ``allow=True`` (or ``WDS_CLOUD_ALLOW_PIPE=1``);
* local paths and ``file:`` URLs are not opened (reading, writing, listing), unless a
  :class:`~wds_cloud.LocalOpener` is built with ``allow=True`` (or ``WDS_CLOUD_ALLOW_LOCAL=1``);
  ``-`` (standard input or output) stays open;
* ``pkl``/``pickle``/``pyd`` and ``pth`` values are not decoded (``pickle.loads``,
  ``torch.load``);
* ``GOPEN_REWRITE`` is not applied: :func:`wds_cloud.openers.gopen.rewrite_url` raises.

The object-store and HTTP openers keep working. Each refusal is a ``ValueError`` (a
:class:`~wds_cloud.errors.ConfigError`, or a :class:`~wds_cloud.errors.SampleError` for values)
whose message starts with webdataset's own text, then says which switch is on and how to allow
the thing refused (:func:`refusal`).

It is on when the program sets ``security.enforce_security = True`` (webdataset code sets
``wds.utils.enforce_security``, which is the same switch), or, while that is left at ``None``,
when ``WDS_SECURE`` or ``WDS_CLOUD_SECURE`` is set to a true boolean in the environment
(:func:`wds_cloud.settings.env_bool`: ``1``/``true``/``yes``/``on`` or any non-zero integer;
another word is a :class:`~wds_cloud.errors.ConfigError`), read each time, so it can be set
after import.
"""

from __future__ import annotations

import os

from wds_cloud.settings import env_bool

__all__ = ["enforce_security", "refusal", "secure_mode"]

_ENV = ("WDS_SECURE", "WDS_CLOUD_SECURE")

# None: follow the environment; True/False: set by the program.
enforce_security: bool | None = None


def _env_switch() -> str | None:
    """The first secure-mode variable set in the environment, or None."""
    for name in _ENV:
        if env_bool(name, False):
            return name
    return None


def secure_mode() -> bool:
    """Whether secure mode is on (the program's setting, else the environment)."""
    if enforce_security is not None:
        return enforce_security
    return _env_switch() is not None


def refusal(webdataset_message: str, refused: str, allow: str | None = None) -> str:
    """The message for something secure mode refuses.

    Args:
        webdataset_message: webdataset 1.0.2's text for the same refusal (kept verbatim at the
            start, so code matching webdataset's message keeps working).
        refused: what was refused, e.g. ``"refusing to read '/data/x.tar'"``.
        allow: another way to allow it, e.g. ``"use PipeOpener(allow=True)"``, if there is one.
    """
    name = _env_switch() if enforce_security is None else None
    if name is not None:
        why = f"{name}={os.environ[name].strip()} is set in the environment"
        off = f"unset {name}"
    else:
        why = "wds.utils.enforce_security is True"
        off = "set wds.utils.enforce_security = False"
    text = f"{webdataset_message.rstrip('.')}: {refused}; secure mode is on ({why}); "
    text += f"to allow it, {off}"
    return text + (f", or {allow}" if allow else "")
