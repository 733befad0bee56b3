"""The Zsampler: batches of indices as a pure function of (seed, step).

``"sequential"`` walks ``0..length`` as a circular queue, ``"iid"`` draws uniformly with
replacement (unbiased: Lemire with rejection), ``"cyclic"`` walks a fresh keyed permutation each
cycle, every batch full. A run resumes by asking for its next step: there is no state.
"""

from __future__ import annotations

import numpy as np

from loaderx import _native
from loaderx._common import check_int

__all__ = ["Zsampler", "MODES"]

# The seed's integer mode codes, in its order: the engine's one table (SamplerMode::ALL).
MODES = _native.SAMPLER_MODES


def mode_name(mode: str | int) -> str:
    """A mode given by name or by the seed's integer code (0 sequential, 1 iid, 2 cyclic)."""
    if isinstance(mode, (bool, np.bool_)):
        raise TypeError("mode must be a name or an integer code, not a bool")
    if isinstance(mode, (int, np.integer)):
        # NumPy's integers too, as every count of the package takes them (look 105).
        mode = int(mode)
        if not 0 <= mode < len(MODES):
            raise ValueError(f"mode code {mode} is not one of 0 (sequential), 1 (iid), 2 (cyclic)")
        return MODES[mode]
    if isinstance(mode, str):
        return mode
    raise TypeError(f"mode must be a str or an int, not {type(mode).__name__}")


class Zsampler:
    """Batches of ``batch_size`` indices into ``0..length``; ``rank``/``world`` take this
    process's share of each global batch."""

    __slots__ = ("_args", "_native")

    def __init__(
        self, length: int, batch_size: int, mode: str | int = "iid", seed: int = 42, rank: int = 0, world: int = 1
    ) -> None:
        mode = mode_name(mode)
        check_int("length", length, 1, 2**32)
        check_int("seed", seed, 0, 2**64)
        check_int("batch_size", batch_size, 1, 2**32)
        check_int("rank", rank, 0, 2**32)
        check_int("world", world, 1, 2**32)
        self._native = _native.Sampler(length, batch_size, mode, seed, rank, world)
        self._args = (int(length), int(batch_size), mode, int(seed), int(rank), int(world))

    # Read-only: assigning them changed what len() and repr said, not what batch() draws (look
    # 119, L119-5).
    @property
    def length(self) -> int:
        """The indices are drawn from ``0..length``."""
        return self._args[0]

    @property
    def mode(self) -> str:
        """``"sequential"``, ``"iid"`` or ``"cyclic"``."""
        return self._args[2]

    @property
    def seed(self) -> int:
        """The seed every batch is a function of, with its step."""
        return self._args[3]

    @property
    def batch_size(self) -> int:
        """Indices per batch on this rank."""
        return self._native.batch_size

    def __repr__(self) -> str:
        length, batch_size, mode, seed, rank, world = self._args
        return f"Zsampler(length={length}, batch_size={batch_size}, mode={mode!r}, seed={seed}, rank={rank}, world={world})"

    def __reduce__(self) -> tuple:
        return (Zsampler, self._args)

    def __len__(self) -> int:
        return self.length

    def batch(self, step: int, out: np.ndarray | None = None) -> np.ndarray:
        """The indices of ``step`` as a ``uint32`` array, written into ``out`` when given."""
        check_int("step", step, 0, 2**64)
        if out is None:
            return self._native.batch(step)
        # Named, as every other `out` is (look 144, L144-2: the binding's own words, naming none).
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy.ndarray, not {type(out).__module__}.{type(out).__name__}")
        if out.dtype != np.uint32:
            raise TypeError(f"out has dtype {out.dtype}; the sampler's indices are uint32")
        if out.shape != (self.batch_size,):
            raise ValueError(f"out has shape {out.shape}; a batch is ({self.batch_size},)")
        if not (out.flags.c_contiguous and out.flags.aligned and out.flags.writeable):
            raise ValueError("out must be writable, C-contiguous and aligned")
        self._native.batch_into(step, out)
        return out
