"""Module-level functions for the shared-memory batch tests (picklable under spawn)."""

from __future__ import annotations

from typing import Any

import torch


def key_npy_bf16_cls(sample: dict[str, Any]) -> tuple[str, Any, Any, int]:
    """(``__key__``, ``npy`` as a tensor, a bfloat16 tensor, ``cls``)."""
    npy = torch.from_numpy(sample["npy"])
    return (
        sample["__key__"],
        npy,
        torch.full((2, 3), sample["cls"], dtype=torch.bfloat16),
        sample["cls"],
    )
