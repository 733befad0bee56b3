"""The endless, step-based DataLoader.

A batch is a dict ``{name: array}``, every stream gathered at the same indices, each array of
shape ``(batch_size, *item_shape)``. Indices come from the Zsampler (a pure function of seed and
step), so a run resumes exactly from :meth:`DataLoader.state`. The engine's prefetch threads
gather (and pad ragged streams) without the GIL; a ``transform`` runs on those threads, taking
the GIL only for its call. There are no epochs and no partial batches unless ``epochs=`` asks
for a finite pass.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from loaderx import _native
from loaderx._common import bfloat16, check_int, pad_float
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.zsampler import mode_name

__all__ = ["DataLoader"]


class DataLoader:
    """Batches of ``batch_size`` records of every dataset in ``datasets``, endlessly.

    ``num_workers`` prefetch threads each keep up to ``prefetch_size`` batches ready; ``mode``
    is ``"sequential"``, ``"iid"`` or ``"cyclic"`` (or the seed's codes 0, 1, 2); ``transform``
    (the collate step) maps each batch dict to whatever the loop consumes.

    Beyond the seed: ``shard=(rank, world)`` (or ``shard="env"`` for torchrun's and Slurm's
    variables) takes this process's share of each global batch; ``pad={name: rows or None}``
    pads ragged streams to ``rows`` (None: the longest record of the batch) with ``pad_value``,
    adding ``name + "_lengths"`` (a record longer than ``rows`` is an error unless
    ``pad_truncate=True``, which cuts it); ``epochs=n`` makes a finite pass of ``n`` epochs
    (``shuffle``, ``drop_last``), after which iteration stops; ``state=`` (bytes from
    :meth:`state`) or ``start_step=`` resume. ``batch_size``, ``mode`` and ``seed`` default to
    256, ``"cyclic"`` and 42; beside ``state=`` an argument left out is the state's, and one
    given that the state contradicts is a ``ValueError`` naming it (it used to be dropped
    silently); ``shard=`` beside ``state=`` moves the state onto that shard (the same global
    batches, so a run resumes on another world size; a packed stream resumes on its own shard
    only). ``datasets`` as a list of ``(weight, {name:
    dataset})`` pairs is a weighted mixture (each batch drawn from the sources in proportion,
    every source with the same stream names); ``pack={name: length}`` packs a ragged token
    stream into rows of ``length`` tokens (adding ``name_segments`` and ``name_positions``;
    ``pack_split`` cuts samples at row ends and carries the rest into the next row; without it a
    sample longer than ``length`` is cut to ``length`` and its rest dropped); ``bucket={name:
    window}`` groups records of
    similar length within windows of ``window`` batches.
    """

    def __init__(
        self,
        datasets: Mapping[str, DenseDataset | RaggedDataset] | Sequence[tuple[float, Mapping[str, Any]]],
        batch_size: int | None = None,
        num_workers: int = 4,
        prefetch_size: int = 4,
        mode: str | int | None = None,
        seed: int | None = None,
        transform: Callable[[dict[str, Any]], Any] | None = None,
        *,
        shard: tuple[int, int] | str | None = None,
        pad: Mapping[str, int | None] | None = None,
        pad_value: float = 0.0,
        pad_truncate: bool = False,
        epochs: int | None = None,
        shuffle: bool = True,
        drop_last: bool = False,
        state: bytes | None = None,
        start_step: int | None = None,
        pack: Mapping[str, int] | None = None,
        pack_split: bool = False,
        bucket: Mapping[str, int] | None = None,
    ) -> None:
        if state is not None and not isinstance(state, (bytes, bytearray, memoryview)):
            # The binding's own words name its parameter, not this one (look 99, L99-2).
            hint = ": call it, loader.state()" if callable(state) else ""
            raise TypeError(f"state must be the bytes a DataLoader's state() returns, not {type(state).__name__}{hint}")
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable")
        for arg, value, least, past in (
            ("batch_size", batch_size, 1, 2**32),
            ("num_workers", num_workers, 0, 2**32),
            ("prefetch_size", prefetch_size, 1, 2**32),
            ("epochs", epochs, 1, 2**64),
            ("seed", seed, 0, 2**64),
            # NumPy's integers too, as every other count here (look 99, L99-1).
            ("start_step", start_step, 0, 2**64),
        ):
            if value is not None:
                check_int(arg, value, least, past)
        if epochs is None and (not shuffle or drop_last):
            # They shape a finite pass only; an endless loader would ignore them without a word.
            raise ValueError(
                "shuffle=False and drop_last=True shape a finite pass: pass epochs=n with them (an endless "
                "loader always draws shuffled batches, every one full)"
            )
        for flag, value in (("pad_truncate", pad_truncate), ("shuffle", shuffle), ("drop_last", drop_last),
                            ("pack_split", pack_split)):
            # A bool, not anything truthy: "no" and "false" cut records (look 105, L105-5).
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"{flag} must be True or False, not {value!r}")
        if pad_truncate and not pad:
            raise ValueError("pad_truncate=True truncates the streams pad= names: pass pad={name: rows} with it")
        if isinstance(pad_value, (bool, np.bool_)) or not isinstance(pad_value, (int, float, np.integer, np.floating)):
            # float() took "5" and True (look 107, L107-3); an array is no pad value.
            raise TypeError(f"pad_value must be a number, not {pad_value!r}")
        if pad_value != 0.0 and not pad:
            # Look 105, L105-3: taken and used nowhere (packed rows are padded with 0, their loss
            # mask saying which), where an ignore index was meant.
            raise ValueError(
                "pad_value pads the streams pad= names: pass pad={name: rows} with it (a packed stream's rows "
                "are padded with 0, and its _loss_mask says which tokens are padding)"
            )
        # Look 105, L105-2: mode="sequential" beside epochs= gave a shuffled pass, and a mixture
        # took any mode, without a word. A pass is ordered by shuffle=; a mode that says otherwise
        # is refused (sequential is shuffle=False, cyclic shuffle=True, iid no pass at all).
        if mode is not None and not isinstance(datasets, Mapping):
            raise ValueError("mode= orders an endless loader's batches; a mixture's are ordered by its weights")
        if mode is not None and epochs is not None:
            agrees = {"sequential": not shuffle, "cyclic": bool(shuffle)}.get(mode_name(mode), False)
            if not agrees:
                raise ValueError(
                    f"mode={mode!r} beside epochs=: a finite pass draws every record once, ordered by shuffle= "
                    f"(shuffle={bool(shuffle)} here; shuffle=False is record order)"
                )
        if pack_split and not pack:
            # Look 96: taken and ignored, where pad_truncate without pad is refused.
            raise ValueError("pack_split=True splits the samples pack= packs: pass pack={name: length} with it")
        if shard is not None and shard != "env" and not (isinstance(shard, (tuple, list)) and len(shard) == 2):
            # Named, with what it takes (look 107, L107-4: "too many values to unpack").
            raise ValueError(f"shard must be (rank, world) or \"env\", not {shard!r}")
        if isinstance(shard, (tuple, list)):
            check_int("shard's rank", shard[0], 0, 2**32)
            check_int("shard's world", shard[1], 1, 2**32)
        # Each a dict of stream names, said so by name (look 133, L133-1: "'list' object has no
        # attribute 'items'", and a key of another type the binding's nameless error).
        for option, given in (("pad", pad), ("pack", pack), ("bucket", bucket)):
            if given is not None and not isinstance(given, Mapping):
                raise TypeError(f"{option} must be a dict of stream names, not {type(given).__name__}")
            for key in given or {}:
                if not isinstance(key, str):
                    raise TypeError(f"{option}'s stream names must be str, not {type(key).__name__}")
        for name, rows in (pad or {}).items():
            if rows is not None:
                check_int(f"pad[{name!r}]", rows, 1, 2**63)
        for option, least in (("pack", 1), ("bucket", 1)):
            for name, n in ((pack if option == "pack" else bucket) or {}).items():
                check_int(f"{option}[{name!r}]", n, least, 2**32)

        def streams(of: Mapping[str, Any]) -> _native.LoaderBuilder:
            """A builder of the streams ``of``, padded as ``pad`` says."""
            b = _native.LoaderBuilder()
            for name, ds in _streams(of):
                b.stream(name, ds)
            # The streams of bfloat16 records: the engine hands their batches over as their
            # uint16 bits, viewed here as `ml_dtypes.bfloat16` as gathers are (look 153, L153-1).
            bf16.update(name for name, d in of.items() if bf16_dtype is not None and getattr(d, "dtype", None) == bf16_dtype)
            for name, rows in (pad or {}).items():
                b.pad(name, rows, pad_float(pad_value), bool(pad_truncate))
            return b

        bf16: set[str] = set()
        bf16_dtype = bfloat16()
        if isinstance(datasets, Mapping):
            b = streams(datasets)
        elif isinstance(datasets, Sequence) and datasets and not isinstance(datasets, (str, bytes)):
            sources = []
            for j, source in enumerate(datasets):
                if not (isinstance(source, tuple) and len(source) == 2 and isinstance(source[1], Mapping)):
                    raise TypeError(f"mixture source {j} must be a (weight, {{name: dataset}}) pair")
                weight = source[0]
                if isinstance(weight, (bool, np.bool_)) or not isinstance(weight, (int, float, np.integer, np.floating)):
                    # float() took True as 1.0 and "2" as 2.0 (look 105).
                    raise TypeError(f"mixture source {j}'s weight must be a number, not {weight!r}")
                sources.append((float(weight), streams(source[1])))
            b = _native.LoaderBuilder.mixture(sources)
        else:
            raise TypeError(
                "datasets must be a non-empty dict of {name: DenseDataset or RaggedDataset}, or a list of "
                "(weight, dict) pairs for a mixture"
            )
        b.threads(num_workers).prefetch(prefetch_size)
        if batch_size is not None:
            b.batch_size(batch_size)
        if mode is not None:
            b.mode(mode_name(mode))
        if seed is not None:
            b.seed(seed)
        if shard == "env":
            b.shard_from_env()
        elif shard is not None:
            rank, world = shard
            b.shard(rank, world)
        if epochs is not None:
            b.finite(shuffle, epochs, drop_last)
        if pack is not None:
            name, length = _one("pack", pack)
            b.pack(name, length, pack_split)
        if bucket is not None:
            b.bucket(*_one("bucket", bucket))
        if state is not None:
            b.state(bytes(state))
        if start_step is not None:
            b.start_step(int(start_step))
        self._bf16 = frozenset(bf16)
        if transform is not None and bf16:
            # What a transform takes is what a batch is: bfloat16 viewed first. The wrapper holds
            # the transform only, never this loader.
            user, names = transform, self._bf16
            transform = lambda batch: user(_as_bfloat16(batch, names))  # noqa: E731
            self._bf16 = frozenset()
        self._native = b.build(transform)
        # Threads stop when the loader is collected or the interpreter exits, closed or not. The
        # finalizer holds the native loader weakly: held strongly, it kept alive a loader whose
        # transform refers back to it (a trainer's bound method), and the cycle was never
        # collected (look 119, L119-1); collected, the native loader stops its threads itself.
        self._finalizer = weakref.finalize(self, _close_at_collection, weakref.ref(self._native))
        self.batch_size: int = self._native.batch_size()
        # A loader resumed from the state of a finished pass is over before its first `for`
        # (look 57, D1: that `for` yielded nothing, without a word).
        steps = self._native.steps()
        self._ended = steps is not None and self._native.step() >= steps
        # A pass of no steps is over before it starts, for another reason than a finished one
        # (look 84, F84-6): its data fill no batch.
        self._empty = steps == 0
        self._drop_last = drop_last

    def __iter__(self) -> "DataLoader":
        if self._empty:
            why = (
                ", drop_last=True drops its one short batch (drop_last=False keeps it)"
                if self._drop_last
                else ": the datasets (or this rank's share) hold no records"
            )
            raise RuntimeError(f"this DataLoader's pass has no steps: its data fill no batch of {self.batch_size}{why}")
        if self._ended:
            # torch's DataLoader starts a new epoch at every `for`; this one's `epochs=n` pass is
            # one iteration, and a second `for` would silently do nothing (issue 42's trial).
            raise RuntimeError(
                "this DataLoader's pass is over: epochs=n runs all n epochs in one `for` loop (len(loader) // n "
                "steps each); for a loop per epoch, make a DataLoader per epoch with a seed= of its own"
            )
        return self

    def __next__(self) -> Any:
        try:
            batch = self._native.next()
            return _as_bfloat16(batch, self._bf16) if self._bf16 else batch
        except StopIteration:
            self._ended = True
            raise
        except ValueError as e:
            if "truncation was not asked for" in str(e):
                # The engine's words name no Python argument (issue 42's trial).
                raise ValueError(f"{e}: pass pad_truncate=True to cut longer records to pad's length") from None
            raise

    def __len__(self) -> int:
        steps = self._native.steps()
        if steps is None:
            raise TypeError(
                "an endless DataLoader has no length: pass epochs=n for a finite pass of n epochs "
                "(len() then counts its steps), or count the steps you take"
            )
        if steps > sys.maxsize:
            raise OverflowError(f"the pass has {steps} steps, more than len() can return: count the steps you take")
        return steps

    def __bool__(self) -> bool:
        # A loader is a loader, endless or not (without this, `if loader:` asks len()).
        return True

    def __repr__(self) -> str:
        if self.closed:
            return f"DataLoader(batch_size={self.batch_size}, closed)"
        steps = self._native.steps()
        extent = "endless" if steps is None else f"{steps} steps"
        return f"DataLoader(batch_size={self.batch_size}, {extent}, next step {self.step})"

    @property
    def step(self) -> int:
        """The next step to be delivered."""
        return self._native.step()

    def state(self) -> bytes:
        """Where the loader is: pass it as ``state=`` to a new loader over the same data to
        resume exactly."""
        return self._native.state()

    def close(self) -> None:
        """Stops and joins every thread. Idempotent. From the loader's own transform it is a
        ``RuntimeError`` (the loader waits for that transform), and the loader stays open."""
        if self._finalizer.alive:
            self._native.close()
            self._finalizer()

    @property
    def closed(self) -> bool:
        """Whether the loader was closed."""
        return self._native.closed

    def __copy__(self) -> "DataLoader":
        # A copy would share this loader's threads and position: closing it closed this one
        # (look 144).
        raise TypeError(
            "a DataLoader is not copied (a copy would share its threads and position): make another "
            "DataLoader over the same datasets, with state=loader.state() to start where this one stands"
        )

    def __deepcopy__(self, memo: dict) -> "DataLoader":
        return self.__copy__()

    def __reduce__(self) -> tuple:
        raise TypeError(
            "a DataLoader is not pickled (it holds threads): pickle loader.state() and pass it as state= to "
            "a DataLoader made where it is unpickled"
        )

    def __enter__(self) -> "DataLoader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close_at_collection(native_ref: Any) -> None:
    """Closes a collected loader's threads, when its native loader (held weakly) is still
    there; collected inside its own transform (its last reference let go on one of its threads),
    or in a cycle, the native loader stops them when it is dropped or cleared."""
    native = native_ref()
    if native is None:
        return
    try:
        native.close()
    except RuntimeError:
        pass


def _as_bfloat16(batch: Any, names: frozenset[str]) -> Any:
    """``batch`` (a dict of arrays) with the arrays of the streams ``names`` that came as their
    ``uint16`` bits viewed as ``ml_dtypes.bfloat16``."""
    dtype = bfloat16()
    if isinstance(batch, dict) and dtype is not None:
        for name in names:
            a = batch.get(name)
            if isinstance(a, np.ndarray) and a.dtype == np.uint16:
                batch[name] = a.view(dtype)
    return batch


def _streams(datasets: Mapping[str, Any]) -> list[tuple[str, Any]]:
    if not datasets:
        raise TypeError("datasets must be a non-empty dict of {name: DenseDataset or RaggedDataset}")
    streams = []
    for name, ds in datasets.items():
        if not isinstance(name, str):
            raise TypeError(f"stream names must be str, not {type(name).__name__}")
        from .vision import ImageDataset

        if not isinstance(ds, (DenseDataset, RaggedDataset, ImageDataset)):
            raise TypeError(
                f"stream {name!r} is a {type(ds).__name__}, not a DenseDataset, RaggedDataset or vision.ImageDataset"
            )
        streams.append((name, ds._native))
    return streams


def _one(what: str, option: Mapping[str, int]) -> tuple[str, int]:
    """``{name: n}`` of an option that applies to one stream, as the engine takes it."""
    if not isinstance(option, Mapping) or len(option) != 1:
        raise TypeError(f"{what} must be a dict of one stream name to its value, e.g. {{'tokens': 512}}")
    ((name, n),) = option.items()
    return (name, int(n))
