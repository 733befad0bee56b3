"""loaderx: a persistent record store, dense and ragged datasets, a stateless sampler and an
endless step-based data loader, on the Rust engine of the loaderx workspace.

Modules, as the loaderx 0.9.11 specification names them:

- :mod:`loaderx.converter`: ``from_numpy``, ``from_iterator`` (NumPy arrays into datasets);
- :mod:`loaderx.dataset`: ``DenseDataset``, ``RaggedDataset``, ``pad``;
- :mod:`loaderx.dataloader`: the endless ``DataLoader``;
- :mod:`loaderx.zrecord`: ``Zrecord``, raw byte records;
- :mod:`loaderx.zsampler`: ``Zsampler``, batches of indices as a function of (seed, step);
- :mod:`loaderx.chunker`: ``plan_file``, record-aligned byte ranges (mmap-chunker 0.2.6);
- :mod:`loaderx.torch`: PyTorch datasets over the above (torch imported only there);
- :mod:`loaderx.ray`: Ray Data written to store sets and read from them (Ray imported only there).

Every engine error is a :class:`loaderx.Error` (``CorruptError``, ``NotAStoreError``,
``UnsupportedError``, ``SchemaError``, ``LockedError``, ``CommittedError``, ``RemoteError``, ``LoaderStoppedError``); a
missing path is a ``FileNotFoundError``, a bad argument a ``ValueError`` or ``TypeError``.
"""

from loaderx._native import (
    CommittedError,
    CorruptError,
    Error,
    LoaderStoppedError,
    LockedError,
    NotAStoreError,
    RemoteError,
    SchemaError,
    UnsupportedError,
    __version__,
)
from loaderx import chunker, converter, dataloader, dataset, zrecord, zsampler

__all__ = [
    "CommittedError",
    "CorruptError",
    "Error",
    "LoaderStoppedError",
    "LockedError",
    "NotAStoreError",
    "RemoteError",
    "SchemaError",
    "UnsupportedError",
    "__version__",
    "chunker",
    "converter",
    "dataloader",
    "dataset",
    "zrecord",
    "zsampler",
]
