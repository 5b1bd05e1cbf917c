"""The ``collect_landscape`` part of SummaryCollector: interval checkpoints, then their metadata.

The file formats (checkpoints, ``train_metadata.json``) and the validation of the
``collect_landscape`` dict belong to :mod:`collector.trajectory`.
"""

from __future__ import annotations

import bisect
import logging
import math
import os
import time
from typing import Any

from torch import nn
from torch.utils.data import Dataset

from collector.common import BackgroundWriter, unwrap_module
from collector.trajectory import (
    LANDSCAPE_DEFAULTS,
    METADATA_FILE,
    FileDigest,
    TrainMetadata,
    checkpoint_file_name,
    cpu_state_dict,
    save_file,
)

__all__ = ["LandscapeCollector", "dataset_samples"]

logger = logging.getLogger(__name__)

#: Checkpoint copies wait in memory until they hold this many bytes or the oldest is this
#: old (checked at the next save), then one background job writes them all; what waits
#: when training ends is written by ``shutdown`` (before the metadata). Small networks'
#: checkpoints are then serialized together with warm caches instead of one by one
#: between training steps (each write competing with the training loop for the GIL);
#: large ones are written as they come.
CKPT_BATCH_BYTES = 64 << 20
CKPT_BATCH_SECONDS = 2.0
#: The copies handed to the writer thread and not yet written hold at most this many
#: bytes, or one copy when a copy is larger: before copying a large network again, the
#: training thread waits for the previous copy's write (memory: the network and one copy).
CKPT_PENDING_BYTES = 2 * CKPT_BATCH_BYTES


#: The step or epoch number of the initial weights' checkpoint (interval numbers start at 1).
INITIAL = 0


def dataset_samples(data: Any) -> int | None:
    """How many samples the training data holds: ``len`` of a DataLoader's ``dataset``, or of a
    sized dataset given itself; None when that is unknown (an iterable dataset, a list of batches).

    Examples
    --------
    >>> import torch
    >>> from torch.utils.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(torch.zeros(569, 30))
    >>> dataset_samples(DataLoader(ds, batch_size=64)), dataset_samples(ds), dataset_samples([1, 2])
    (569, 569, None)
    """
    source = getattr(data, "dataset", None)
    if source is None and isinstance(data, Dataset):
        source = data
    try:
        n = len(source)  # type: ignore[arg-type]  # None or an IterableDataset: the TypeError below
    except TypeError:
        return None
    return n if isinstance(n, int) and n > 0 else None


def _save_files(batch: list[tuple[dict[str, Any], str, int]], digests: dict[int, FileDigest],
                file_format: str = "torch") -> None:
    """Write every checkpoint of a batch and put its digest in ``digests`` (by step or epoch number);
    raise the first failure once all were tried."""
    errors = []
    while batch:
        # popped as it goes: a written copy is freed before the next one is written
        state, path, number = batch.pop(0)
        try:
            # save_file hashes the bytes it writes, here on the writer thread (not the training loop's)
            digests[number] = save_file(state, path, file_format=file_format)
        except Exception as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


class LandscapeCollector:
    """Saves interval checkpoints while training and writes ``train_metadata.json`` at the end.

    Checkpoints: ``{ckpt_dir}/{NetworkClass}_{n}_{unit}.pt`` (``.safetensors`` with
    ``file_format="safetensors"``), the unwrapped network's state dict (CPU tensors, copied
    on the training thread, written in batches: see ``CKPT_BATCH_BYTES``; a network
    larger than ``CKPT_PENDING_BYTES`` is copied again only once its previous copy is
    written); all are written before the metadata, which records each one's file name,
    SHA-256 and size as the writer computed them from the bytes it wrote. The initial
    weights are saved the same way before the first step (:meth:`save_initial`, number 0),
    and recorded apart from the intervals' checkpoints.
    """

    def __init__(self, ckpt_dir: str, config: dict[str, Any], file_format: str = "torch", *,
                 num_samples_default: bool = False) -> None:
        self.ckpt_dir = ckpt_dir
        self.config = config
        #: Whether ``num_samples`` was left out of ``collect_landscape`` (then ``config`` holds the default).
        self.num_samples_default = num_samples_default
        self.file_format = file_format
        self.unit: str = config["unit"]
        self.wanted = {n for interval in config["intervals"] for n in interval}
        self._wanted_sorted = sorted(self.wanted)
        self.files: dict[int, str] = {}
        self.initial: str | None = None  # the initial weights' checkpoint (number INITIAL), once saved
        # Filled by the writer thread as each file is written (the initial weights' under INITIAL);
        # read once every write is done.
        self.digests: dict[int, FileDigest] = {}
        self._writer = BackgroundWriter("landscape-ckpt", max_pending_bytes=CKPT_PENDING_BYTES)
        self._batch: list[tuple[dict[str, Any], str, int]] = []
        self._batch_bytes = 0
        self._batch_since = 0.0
        self.metadata_written = False

    def next_wanted(self, number: int) -> int | float:
        """The first step or epoch number after ``number`` that is saved (inf when none is left)."""
        i = bisect.bisect_right(self._wanted_sorted, number)
        return self._wanted_sorted[i] if i < len(self._wanted_sorted) else math.inf

    def reset(self) -> None:
        """Forget the checkpoints of a previous run (a new ``train`` starts)."""
        self.files = {}
        self.initial = None
        self.digests = {}
        self.metadata_written = False

    def adopt_saved(self, network: nn.Module, done: int) -> list[int]:
        """Count the checkpoints of numbers up to ``done`` already in ``ckpt_dir`` (a resumed run).

        A run resumed after step or epoch ``done`` does not pass those numbers again;
        the checkpoints its first part saved there (same network class, same unit) make
        its intervals complete. Returns the numbers adopted.
        """
        name = type(unwrap_module(network)).__name__
        initial = checkpoint_file_name(name, INITIAL, self.unit, self.file_format)
        if os.path.isfile(os.path.join(self.ckpt_dir, initial)):
            self.initial = initial  # the first part's initial weights: the run's true start
        adopted = []
        for n in self._wanted_sorted:
            if n > done:
                break
            file_name = checkpoint_file_name(name, n, self.unit, self.file_format)
            if os.path.isfile(os.path.join(self.ckpt_dir, file_name)):
                self.files[n] = file_name
                adopted.append(n)
        if adopted:
            logger.info("collect_landscape: resumed after %s %d; the checkpoints of %s %s saved before are kept.",
                        self.unit, done, self.unit, adopted)
        return adopted

    def save_initial(self, network: nn.Module) -> None:
        """Save the initial weights (before the first step) as the step or epoch 0 checkpoint.

        Not an interval's checkpoint: the metadata records it apart (``initial_checkpoint``),
        so no landscape's PCA, and no MindSpore reader, sees it; ``landscape compare --centre
        start`` centres on it.
        """
        self.initial = self._save(network, INITIAL)

    def maybe_save(self, network: nn.Module, number: int) -> bool:
        """Save a checkpoint if ``number`` (step or epoch, per ``unit``) is in an interval."""
        if number not in self.wanted:
            return False
        self.files[number] = self._save(network, number)
        return True

    def _save(self, network: nn.Module, number: int) -> str:
        """Copy ``network``'s state for the checkpoint of ``number`` and queue its write; return the file name."""
        module = unwrap_module(network)
        os.makedirs(self.ckpt_dir, exist_ok=True)
        file_name = checkpoint_file_name(type(module).__name__, number, self.unit, self.file_format)
        waited = self._writer.make_room(sum(t.nbytes for t in module.state_dict().values()))
        if waited > 0.1:
            logger.debug("collect_landscape: %s %d waited %.2f s for the previous checkpoint's write.",
                         self.unit, number, waited)
        state = cpu_state_dict(module)
        now = time.monotonic()
        if not self._batch:
            self._batch_since = now
        self._batch.append((state, os.path.join(self.ckpt_dir, file_name), number))
        self._batch_bytes += sum(t.nbytes for t in state.values())
        if self._batch_bytes >= CKPT_BATCH_BYTES or now - self._batch_since >= CKPT_BATCH_SECONDS:
            self._hand_off()
        return file_name

    def _hand_off(self) -> None:
        batch, nbytes, self._batch, self._batch_bytes = self._batch, self._batch_bytes, [], 0
        if batch:
            self._writer.submit(_save_files, batch, self.digests, self.file_format, nbytes=nbytes)

    def write_pending(self) -> None:
        """Hand the checkpoints still waiting to the writer thread now (training has ended).

        Called before the end-of-training lineage is built: the writer serializes, writes
        and hashes them meanwhile, instead of :meth:`shutdown` doing it on the training
        thread afterwards.
        """
        self._hand_off()

    def write_metadata(self, step_per_epoch: int | None, train_dataset: Any = None) -> str | None:
        """Wait for pending checkpoints, then write the metadata of the complete intervals.

        ``num_samples`` left at its default (2048) is recorded as at most the samples
        ``train_dataset`` holds (:func:`dataset_samples`), when that is known; a value given
        is recorded as given. Whether it was the default is recorded too.

        Returns the metadata path, or None when there was nothing to write (no
        checkpoint saved at all).
        """
        self.shutdown()
        self.metadata_written = True
        if not self.files:
            logger.warning("collect_landscape: no checkpoint of any interval was saved; %s not written.",
                           METADATA_FILE)
            return None
        complete = [iv for iv in self.config["intervals"] if all(n in self.files for n in iv)]
        incomplete = [iv for iv in self.config["intervals"] if iv not in complete]
        if incomplete:
            logger.warning(
                "collect_landscape: training ended before these intervals were complete; they are left out "
                "of %s: %s (missing %s numbers: %s).", METADATA_FILE, incomplete, self.unit,
                sorted({n for iv in incomplete for n in iv if n not in self.files}))
        path = TrainMetadata(
            intervals=complete, files=dict(self.files), step_per_epoch=int(step_per_epoch or 0), unit=self.unit,
            num_samples=self._num_samples(train_dataset), landscape_size=self.config["landscape_size"],
            create_landscape=dict(self.config["create_landscape"]),
            digests={n: d for n, d in self.digests.items() if n in self.files},
            initial=self.initial, initial_digest=self.digests.get(INITIAL) if self.initial else None,
            num_samples_default=self.num_samples_default).write(self.ckpt_dir)
        logger.info("collect_landscape: wrote %s (%d checkpoints, %d complete intervals).",
                    path, len(self.files), len(complete))
        return path

    def _num_samples(self, train_dataset: Any) -> int:
        """The ``num_samples`` to record: as given, or the default capped by the data's samples."""
        n = self.config["num_samples"]
        size = dataset_samples(train_dataset) if self.num_samples_default else None
        if size is not None and size < n:
            logger.info("collect_landscape: num_samples was left at its default %d and the training data holds %d "
                        "samples; %d is recorded.", LANDSCAPE_DEFAULTS["num_samples"], size, size)
            return size
        return int(n)

    def shutdown(self) -> None:
        """Write the checkpoints still waiting and wait for every write (also used when training raised).

        The waiting ones are written on this thread, after those handed to the writer
        thread: the caller waits for them anyway, and a hand-off would add two thread
        wake-ups. Every file is tried; the first failure is raised afterwards.
        """
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        errors: list[BaseException] = []
        try:
            self._writer.wait()
        except Exception as exc:
            errors.append(exc)
        try:
            _save_files(batch, self.digests, self.file_format)
        except Exception as exc:
            errors.append(exc)
        self._writer.shutdown()
        if errors:
            raise errors[0]
