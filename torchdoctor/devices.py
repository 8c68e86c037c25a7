"""Devices: choose where to run, honouring an explicit choice, and seed every random generator."""

from __future__ import annotations

import os
import random

import torch

__all__ = ["pick_device", "seed_everything"]

_KINDS = ("cpu", "cuda", "mps")


def _mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def pick_device(choice: str | torch.device = "auto") -> torch.device:
    """Return the device to use: "auto" picks cuda, then mps, then cpu; "cpu", "cuda", "cuda:1" or "mps"
    are honoured, with a clear error when that device is not available here."""
    if isinstance(choice, str) and choice.strip().lower() == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        device = torch.device(choice.strip().lower() if isinstance(choice, str) else choice)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"unknown device {choice!r}; use 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'") from exc
    if device.type not in _KINDS:
        raise ValueError(f"unsupported device {choice!r}; use 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'")
    if device.type == "cuda":
        if not torch.backends.cuda.is_built():
            raise RuntimeError(
                f"DEVICE={choice!r} was requested but this PyTorch is a CPU-only build. Use 'auto' or 'cpu'."
            )
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"DEVICE={choice!r} was requested but no CUDA GPU is usable here (torch.cuda.is_available() is "
                f"False: no GPU or no NVIDIA driver). Use 'auto' or 'cpu'."
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise RuntimeError(
                f"DEVICE={choice!r} was requested but only {torch.cuda.device_count()} GPU(s) are visible "
                f"(indices 0..{torch.cuda.device_count() - 1})."
            )
    if device.type == "mps" and not _mps_available():
        raise RuntimeError(f"DEVICE={choice!r} was requested but MPS (Apple GPU) is not available. Use 'auto'.")
    return device


def seed_everything(seed: int) -> int:
    """Seed Python, NumPy (when installed) and PyTorch on every device; returns the seed.

    This makes runs repeatable on one machine and one PyTorch version; some GPU kernels stay
    nondeterministic unless torch.use_deterministic_algorithms(True) is also set.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)  # inherited by worker processes started later
    try:
        import numpy as np
    except ImportError:
        pass
    else:
        np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return seed
