"""Module-level functions for the tests (picklable under spawn)."""

from __future__ import annotations

from typing import Any


def key_and_cls(sample: dict[str, Any]) -> tuple[str, int]:
    """(``__key__``, ``cls``) of a decoded sample."""
    return sample["__key__"], sample["cls"]


def key_npy_cls(sample: dict[str, Any]) -> tuple[str, Any, int]:
    """(``__key__``, ``npy``, ``cls``) of a decoded sample."""
    return sample["__key__"], sample["npy"], sample["cls"]
