"""Token streams: the token files language models train from, read where they lie.

A :class:`TokenDataset` opens a Megatron-LM indexed dataset (``corpus.bin`` with ``corpus.idx``
beside it, or the prefix ``corpus``), an llm.c token file (by its magic) or a headerless token
memmap (nanoGPT's ``train.bin``: give ``dtype``) read-only and mapped, every header field
checked against the file's size. Its samplers are datasets the :class:`~loaderx.dataloader.DataLoader`
takes as any other: ``windows(n)`` (windows of ``n`` tokens at any offset: nanoGPT's
``get_batch``) and ``sequences(n)`` (Megatron's GPT samples over the documents shuffled by a
seed, computed when called, no index file written). A batch is ``(B, n)``: inputs
``t[:, :-1]``, targets ``t[:, 1:]``. ``document_records()`` gives a Megatron dataset's documents
for the DataLoader to pack (``pack={name: n}``): rows of whole documents.

``write_megatron`` and ``write_llmc`` write files Megatron and llm.c read.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np

from loaderx import _native
from loaderx._common import check_bool, check_int, engine_dtype, fs_path, numpy_dtype, opened_path
from loaderx.dataset import DenseDataset, RaggedDataset

__all__ = ["TokenDataset", "TokenDocuments", "TokenSamples", "write_llmc", "write_megatron"]


class TokenSamples(DenseDataset):
    """Samples of a token file (``TokenDataset.windows``, ``TokenDataset.sequences``): a dense
    dataset of shape ``(len, n)`` whose pickle opens the token file again."""

    __slots__ = ()

    def __init__(self, recipe: tuple, remote: dict[str, Any] | None = None) -> None:
        path, dtype, vocab, kind, n, arg = recipe
        corpus = _native.TokenFile(path, dtype, vocab)
        if kind == "sequences" and not isinstance(arg, tuple):
            arg = (arg, 1)  # a recipe pickled before epochs: the seed alone (review 47)
        native = corpus.windows(n, arg) if kind == "windows" else corpus.sequences(n, *arg)
        self._adopt(native, (recipe, None, ()))

    def __repr__(self) -> str:
        kind = self._recipe[0][3]
        return f"TokenSamples({self.path!r}, {kind}, len={self._len}, dtype={self.dtype}, n={self.item_shape[0]})"


class TokenDocuments(RaggedDataset):
    """A Megatron dataset's documents (``TokenDataset.document_records``), each a record of its
    tokens: a ragged dataset the DataLoader packs (``pack={name: n}``) into rows of whole
    documents. Its pickle opens the token file again."""

    __slots__ = ()

    def __init__(self, recipe: tuple, remote: dict[str, Any] | None = None) -> None:
        path, dtype, vocab = recipe
        self._adopt(_native.TokenFile(path, dtype, vocab).documents_source(), (recipe, None, ()))

    def __repr__(self) -> str:
        # What it is, not the RaggedDataset it reads as (look 119, L119-5).
        return f"TokenDocuments({self.path!r}, len={self._len}, dtype={self.dtype})"


class TokenDataset:
    """The token file at ``path``: a Megatron dataset (its ``.bin``, its ``.idx`` or their
    prefix), an llm.c token file, or, with ``dtype``, a headerless file of tokens. With
    ``vocab_size``, every read refuses a token id outside ``0..vocab_size``, naming its
    position."""

    __slots__ = ("_native", "_recipe", "_args", "dtype")

    def __init__(self, path: str | os.PathLike[str], dtype: Any = None, vocab_size: int | None = None) -> None:
        path = opened_path(path)
        if dtype is not None and not _little_endian(_token_dtype(dtype)):
            raise ValueError(f"token files are little endian; dtype {np.dtype(dtype).str} is not")
        name = None if dtype is None else engine_dtype(dtype)
        if vocab_size is not None:
            vocab_size = check_int("vocab_size", vocab_size, 1, 2**64)
        self._native = _native.TokenFile(path, name, vocab_size)
        self._recipe = (path, name, vocab_size)
        # What a pickle opens it again with: the dtype as NumPy names it ("<u2"), not the
        # engine's "u16", which NumPy reads otherwise ("i8" is int64 to NumPy; review N4).
        self._args = (path, None if dtype is None else np.dtype(dtype).str, vocab_size)
        self.dtype: np.dtype = numpy_dtype(self._native.dtype)

    def __reduce__(self) -> tuple:
        return (type(self), self._args)

    def __len__(self) -> int:
        """Tokens in the file."""
        return len(self._native)

    def __repr__(self) -> str:
        docs = "" if self.documents is None else f", documents={self.documents}"
        return f"TokenDataset({self.path!r}, format={self.format}, tokens={len(self)}, dtype={self.dtype}{docs})"

    @property
    def path(self) -> str:
        """The tokens' file (a Megatron dataset's ``.bin``)."""
        return str(self._native.path)

    @property
    def format(self) -> str:
        """``"megatron"``, ``"llmc"`` or ``"raw"``."""
        return self._native.format

    @property
    def documents(self) -> int | None:
        """Documents, where the format has them (Megatron's); ``None`` otherwise."""
        return self._native.documents

    def windows(self, n: int, stride: int | None = None) -> TokenSamples:
        """Windows of ``n`` tokens (the context length plus one) starting every ``stride``
        tokens: every token for ``None`` below 2^32 windows, else the least stride that keeps
        the count under 2^32."""
        n = check_int("n", n, 1, 2**32)
        if stride is not None:
            stride = check_int("stride", stride, 1, 2**64)
        return TokenSamples((*self._recipe, "windows", n, stride))

    def sequences(self, n: int, seed: int | None = 0, epochs: int = 1) -> TokenSamples:
        """Megatron's GPT samples over ``epochs`` epochs: each epoch, the documents in the order
        ``seed`` shuffles them to for that epoch (the file's order for ``None``), concatenated
        and cut into samples of ``n`` tokens that overlap by one. Record ``i`` is sample
        ``i % s`` of epoch ``i // s`` (``s = len(samples) // epochs``). The first epoch's order
        is computed here, each other epoch's when its first sample is read (about 4.5 bytes a
        document each). A file without documents is one document, the same every epoch."""
        n = check_int("n", n, 2, 2**32)
        if seed is not None:
            seed = check_int("seed", seed, 0, 2**64)
        epochs = check_int("epochs", epochs, 1, 2**16 + 1)
        return TokenSamples((*self._recipe, "sequences", n, (seed, epochs)))

    def document_records(self) -> TokenDocuments:
        """The documents of a Megatron dataset, each a record, for the DataLoader to pack into
        rows of whole documents (``pack={name: n}``): document-aligned samples."""
        return TokenDocuments(self._recipe)

    def read(self, first: int, n: int) -> np.ndarray:
        """Tokens ``first..first + n`` as ``int64``."""
        return self._native.read(check_int("first", first, 0, 2**64), check_int("n", n, 0, 2**64))

    def verify(self) -> None:
        """Reads every token (and a Megatron index's every sequence and document), raising
        ``loaderx.Error`` naming the file and field at the first problem."""
        self._native.verify()


def _little_endian(dt: np.dtype) -> bool:
    """Whether ``dt``'s bytes are little endian (one byte has no order)."""
    return dt.byteorder in "<|" or (dt.byteorder == "=" and np.little_endian)


def _token_dtype(dtype: Any) -> np.dtype:
    """``dtype`` as NumPy's, when it is an integer type (token ids); otherwise a ``TypeError``
    naming the argument, the same from every token function (look 133, L133-3)."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype {dtype!r} is not a NumPy dtype") from None
    if dt.kind not in "iu":
        raise TypeError(f"dtype must be an integer type of token ids, not {dt}")
    return dt


def _tokens(values: Any, dtype: np.dtype, what: str) -> np.ndarray:
    """``values`` as a contiguous array of ``dtype``; ValueError for a value it cannot hold."""
    dtype = np.dtype(dtype).newbyteorder("<")
    if dtype.kind not in "iu":
        # Before NumPy's own words about it (look 131, L131-3: "Invalid integer data type 'b'.").
        raise TypeError(f"token ids are integers: dtype {dtype} holds none")
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, not of shape {arr.shape}")
    if arr.dtype == dtype:
        return np.ascontiguousarray(arr)
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"{what} holds {arr.dtype} values, not token ids")
    if arr.size:
        # Compared as Python ints: a uint64 id of 2^63 or more is no int64, whatever a cast
        # through int64 makes of it.
        info = np.iinfo(dtype)
        if int(arr.min()) < info.min or int(arr.max()) > info.max:
            raise ValueError(f"{what} holds ids that {dtype} cannot hold (from {int(arr.min())} to {int(arr.max())})")
    # Token files are little endian whatever byte order ``dtype`` or the values name.
    return np.ascontiguousarray(arr.astype(dtype.newbyteorder("<")))


def write_megatron(
    prefix: str | os.PathLike[str], documents: Iterable[Any], dtype: Any = np.uint16, overwrite: bool = False
) -> int:
    """Writes ``prefix.bin`` and ``prefix.idx``, a Megatron-LM indexed dataset of one sequence
    per document, from an iterable of 1-D arrays of token ids; returns the tokens written."""
    dt = _token_dtype(dtype)
    w = _native.MegatronWriter(fs_path(prefix), engine_dtype(dt), check_bool("overwrite", overwrite))
    for i, doc in enumerate(documents):
        w.add_document(_tokens(doc, dt, f"document {i}").view(np.uint8))
    return w.finish()


def write_llmc(path: str | os.PathLike[str], tokens: Any, dtype: Any = np.uint16, overwrite: bool = False) -> None:
    """Writes an llm.c token file: ``uint16`` (GPT-2, magic 20240520) or ``uint32`` (Llama-3,
    magic 20240801) tokens after a 1,024-byte header."""
    dt = _token_dtype(dtype)
    _native.write_llmc(fs_path(path), _tokens(tokens, dt, "tokens").view(np.uint8), engine_dtype(dt), check_bool("overwrite", overwrite))
