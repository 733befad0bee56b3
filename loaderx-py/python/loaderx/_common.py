"""Dtypes and indices between NumPy and the engine."""

from __future__ import annotations

import operator
import os
from typing import Any

import numpy as np

_TO_NUMPY = {
    "u8": np.uint8,
    "i8": np.int8,
    "u16": np.uint16,
    "i16": np.int16,
    "u32": np.uint32,
    "i32": np.int32,
    "u64": np.uint64,
    "i64": np.int64,
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
    "bool": np.bool_,
}
_FROM_NUMPY = {np.dtype(v).str[1:]: k for k, v in _TO_NUMPY.items()}


def check_int(name: str, value: Any, lo: int, hi: int) -> int:
    """``value`` when it is an int in ``[lo, hi)``; otherwise a ``ValueError`` (``TypeError`` for
    a non-int) naming the argument, instead of the binding's nameless ``OverflowError``."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not lo <= int(value) < hi:
        raise ValueError(f"{name} must be an int in [{lo}, {_bound(hi)}), not {value!r}")
    return int(value)


def _bound(n: int) -> str:
    return f"2**{n.bit_length() - 1}" if n > 1024 and n & (n - 1) == 0 else str(n)


def bfloat16() -> np.dtype | None:
    """``ml_dtypes.bfloat16`` when that package is installed (NumPy has no bfloat16)."""
    try:
        import ml_dtypes  # type: ignore[import-not-found]
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of an engine dtype name. ``bf16`` is ``ml_dtypes.bfloat16`` when that
    package is installed, otherwise ``uint16`` holding the bit patterns."""
    if name == "bf16":
        return bfloat16() or np.dtype(np.uint16)
    return np.dtype(_TO_NUMPY[name])


def engine_dtype(dtype: Any) -> str:
    """The engine's name for a NumPy dtype (either byte order); TypeError for one it lacks."""
    dt = np.dtype(dtype)
    if dt.name == "bfloat16":
        return "bf16"
    name = _FROM_NUMPY.get(dt.newbyteorder("=").str[1:]) if dt.kind in "biuf" else None
    if name is None:
        raise TypeError(
            f"dtype {dt} is not supported (expected bool, an integer of 8 to 64 bits, "
            "float16, bfloat16, float32 or float64)"
        )
    return name


def fs_path(path: Any) -> str:
    """``path`` (a ``str``, ``bytes`` or ``os.PathLike`` of either) as the ``str`` the engine
    takes, bytes decoded as ``os.fsdecode`` does (look 101, L101-5: a bytes path met the
    binding's "'bytes' object is not an instance of 'str'"). A NUL byte is refused by name, as
    ``open()`` refuses it (the engine's errors printed the path with the byte unseen)."""
    path = os.fsdecode(os.fspath(path))
    if "\0" in path:
        raise ValueError(f"{path!r}: a path cannot hold a NUL byte")
    return path


def opened_path(path: Any) -> str:
    """``path`` as :func:`fs_path` gives it, made absolute when it is local: what a dataset keeps
    to be opened again in another process or directory (a pickle for torch's spawned workers, a
    Ray read task), so that it names the same dataset there (look 167: a relative path reopened
    whatever lay at it in the worker's directory). Only ``s3://`` is a URL, as the engine takes
    it (look 169, L169-3: ``run://x`` is the directory ``run:`` and its ``x``)."""
    path = fs_path(path)
    if not path or path.startswith("s3://") or os.path.isabs(path):
        return path
    # Joined, not normalised: `lnk/../x` is where the kernel takes it, through the link (look
    # 169, L169-1: `abspath` dropped `..` by its text and named another dataset).
    return os.path.join(os.getcwd(), path)


def record_key(key: Any) -> Any:
    """``key`` of ``dataset[key]``, refused when it is a tuple: NumPy reads ``a[1, 2]`` as one
    index an axis, so taking it as the records 1 and 2 would answer another question without a
    word (look 101, L101-3)."""
    if isinstance(key, tuple):
        raise IndexError(
            f"dataset[{key!r}]: a dataset indexes its records only (one axis); "
            "index the records first, then the array (dataset[i][j]), or pass a list of records (dataset[[i, j]])"
        )
    return key


def indices(key: Any, length: int, dtype: type = np.uint32) -> tuple[np.ndarray, tuple[int, ...] | None]:
    """``key`` (an int, a slice, a sequence or array of ints, or a boolean mask) as a flat,
    contiguous array of non-negative indices, with the shape the result takes (None for a
    single int). Negative indices count from the end, as in NumPy; IndexError past either end."""
    if isinstance(key, slice):
        picked = np.arange(*key.indices(length), dtype=dtype)
        return picked, picked.shape
    # An int, or any object that is one (`__index__`, as NumPy takes it: a 0-d torch tensor);
    # not a bool, and not an array (a 0-d array keeps its shape below).
    single = None
    if not isinstance(key, (bool, np.bool_, np.ndarray)) and hasattr(type(key), "__index__"):
        try:
            single = operator.index(key)
        except TypeError:
            pass  # a tensor of several elements: an array below
    if single is not None:
        i = single + length if single < 0 else single
        if not 0 <= i < length:
            raise IndexError(f"index {single} is out of bounds for a dataset of length {length}")
        return np.array([i], dtype=dtype), None
    # A subclass (np.matrix stays 2-D through reshape) as a plain array (look 103, L103-6).
    arr = key if type(key) is np.ndarray else np.asarray(key)
    # Aligned too: an array read through `np.frombuffer` at an odd offset is contiguous but
    # unaligned, which the engine cannot borrow; it goes the copying way (look 144, L144-1).
    if arr.dtype == dtype and arr.ndim == 1 and arr.flags.c_contiguous and arr.flags.aligned:
        if arr.size and int(arr.max()) >= length:
            # Read once more, as a copy: another thread may be changing the array (free-threaded
            # Python), and the index named must be one the array held (look 92, F4).
            snap = arr.copy()
            over = snap[snap >= length]
            if over.size:
                raise IndexError(f"index {int(over[0])} is out of bounds for a dataset of length {length}")
            return snap, snap.shape
        return arr, arr.shape
    if arr.dtype == np.bool_:
        if arr.shape != (length,):
            raise IndexError(f"a boolean index of shape {arr.shape} for a dataset of length {length}")
        picked = np.flatnonzero(arr).astype(dtype)
        return picked, picked.shape
    # An empty sequence is no index of any type; an empty array of floats is refused, as NumPy
    # refuses it (look 103, L103-7).
    if arr.size == 0 and (arr.dtype.kind in "iu" or not isinstance(key, np.ndarray)):
        return np.empty(0, dtype=dtype), arr.shape
    if arr.dtype == object and arr.ndim == 0:
        raise TypeError(
            f"a dataset's index is an int, a slice, a sequence or array of ints, or a boolean mask, not "
            f"{type(key).__name__}"
        )
    if arr.dtype.kind not in "iu":
        # NumPy makes floats of a sequence with an integer past int64's range: say so, of a
        # sequence only (look 103, L103-4).
        made = " (NumPy's reading of the sequence given: are its integers within int64?)"
        sequence = isinstance(key, (list, tuple)) and arr.dtype.kind == "f"
        raise TypeError(f"indices must be integers, not {arr.dtype}" + (made if sequence else ""))
    flat = arr.reshape(-1)
    lo, hi = int(flat.min()), int(flat.max())
    if lo < -length or hi >= length:
        bad = lo if lo < -length else hi
        raise IndexError(f"index {bad} is out of bounds for a dataset of length {length}")
    if lo < 0:
        # In int64, not the array's own type: -1 + 4096 overflows an int8 (look 92, F2).
        flat = flat.astype(np.int64)
        flat = np.where(flat < 0, flat + length, flat)
    return np.require(flat, dtype=dtype, requirements=["C_CONTIGUOUS", "ALIGNED"]), arr.shape


def check_number(name: str, value: Any) -> float:
    """``value`` as a float when it is a real number (an int or float, NumPy's too); otherwise a
    ``TypeError`` naming the argument: a string or a bool, which ``float()`` takes, is refused,
    as its siblings' checks refuse them (look 119, L119-6: ``HorizontalFlip("0.7")``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    return float(value)


def check_str(name: str, value: Any) -> str:
    """``value`` when it is a str; otherwise a ``TypeError`` naming the argument (look 131,
    L131-3: the binding's said only "'int' object is not an instance of 'str'")."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """``value`` when it is a bool (NumPy's too); otherwise a ``TypeError`` naming the argument,
    where the binding's said only "'int' object is not an instance of 'bool'" (look 119, L119-7)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return bool(value)


def pad_float(value: Any) -> float:
    """A pad value as the engine takes it (a float), refusing an int no float holds exactly
    (2^53 + 1 would become 2^53): the engine refuses what the stream's dtype cannot hold."""
    f = check_number("the pad value", value)
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) and int(f) != int(value):
        raise ValueError(f"the pad value {value} is not exactly a float, so no dtype of the engine's pad takes it")
    return f
