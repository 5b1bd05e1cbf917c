"""The ``collect_landscape`` part of SummaryCollector: validation, interval checkpoints, metadata.

:func:`validate_collect_landscape` is shared with ``landscape.SummaryLandscape`` (whose
``collect_landscape`` override takes the same keys), so both refuse a bad value with the
same message.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import os
import time
from typing import Any

from torch import nn

from collector.trajectory._state_io import BackgroundWriter, cpu_state_dict, save_file, unwrap_module
from collector.common._validation import InstanceOf, Interval, InvalidParameterError, Options, check_param

__all__ = ["validate_collect_landscape", "LANDSCAPE_DEFAULTS", "METADATA_FILE", "CKPT_DIR"]

logger = logging.getLogger(__name__)

METADATA_FILE = "train_metadata.json"
CKPT_DIR = "ckpt_dir"

#: Defaults of every key but ``intervals`` (which has none: it must be given).
LANDSCAPE_DEFAULTS: dict[str, Any] = {
    "landscape_size": 40,
    "unit": "step",
    "create_landscape": {"train": True, "result": True},
    "num_samples": 2048,
}
_KEYS = ("landscape_size", "unit", "create_landscape", "num_samples", "intervals")


def validate_collect_landscape(
    value: Any,
    caller: str = "SummaryCollector",
    *,
    name: str = "collect_specified_data['collect_landscape']",
    require_intervals: bool = True,
    fill_defaults: bool = True,
) -> dict[str, Any]:
    """Check a ``collect_landscape`` dict and return a normalised copy.

    Parameters
    ----------
    value : dict
        ``{landscape_size, unit, create_landscape, num_samples, intervals}``.
    caller : str, default="SummaryCollector"
        Named in error messages.
    name : str, default="collect_specified_data['collect_landscape']"
        How the dict is named in error messages; keys appear as ``name['key']``.
    require_intervals : bool, default=True
        Whether ``intervals`` must be present (an override at landscape-generation
        time may leave it out).
    fill_defaults : bool, default=True
        Fill missing keys with :data:`LANDSCAPE_DEFAULTS`; False returns only the keys
        given (``create_landscape`` is always completed to both keys).

    Returns
    -------
    dict
        ``landscape_size`` int in [3, 256]; ``unit`` "step" or "epoch";
        ``create_landscape`` {"train": bool, "result": bool}; ``num_samples`` int >= 1;
        ``intervals`` list of lists of at least three ints >= 1.

    Raises
    ------
    InvalidParameterError
        Naming the key, the accepted values and the value received.
    """
    check_param(name, value, [InstanceOf(dict, description="a dict")], caller=caller,
                hint=f"give a dict with the keys {list(_KEYS)}.")
    unknown = [k for k in value if k not in _KEYS]
    if unknown:
        raise InvalidParameterError(
            f"The '{name}' parameter of {caller} has unknown key(s) {unknown}; the accepted keys are "
            f"{list(_KEYS)}. Got {value!r} instead."
        )
    out: dict[str, Any] = {}
    if fill_defaults:
        out.update({k: (dict(v) if isinstance(v, dict) else v) for k, v in LANDSCAPE_DEFAULTS.items()})
    key = lambda k: f"{name}[{k!r}]"  # noqa: E731
    create_name, intervals_name = key("create_landscape"), key("intervals")
    if "landscape_size" in value:
        out["landscape_size"] = check_param(key("landscape_size"), value["landscape_size"],
                                            [Interval(int, 3, 256)], caller=caller)
    if "unit" in value:
        out["unit"] = check_param(key("unit"), value["unit"], [Options(("step", "epoch"))], caller=caller)
    if "num_samples" in value:
        out["num_samples"] = check_param(key("num_samples"), value["num_samples"],
                                         [Interval(int, 1, None)], caller=caller)
    if "create_landscape" in value:
        create = check_param(key("create_landscape"), value["create_landscape"],
                             [InstanceOf(dict, description="a dict with bool values for 'train' and 'result'")],
                             caller=caller)
        bad = [k for k in create if k not in ("train", "result")]
        if bad:
            raise InvalidParameterError(
                f"The '{create_name}' parameter of {caller} has unknown key(s) {bad}; the accepted "
                f"keys are ['train', 'result']. Got {create!r} instead."
            )
        full = dict(LANDSCAPE_DEFAULTS["create_landscape"])
        for k, v in create.items():
            full[k] = check_param(f"{key('create_landscape')}[{k!r}]", v, ["boolean"], caller=caller)
        out["create_landscape"] = full
    if "intervals" in value:
        out["intervals"] = _check_intervals(value["intervals"], key("intervals"), caller)
    elif require_intervals:
        raise InvalidParameterError(
            f"The '{intervals_name}' parameter of {caller} is required: a list of lists of at least three "
            f"step or epoch numbers, e.g. [[1, 2, 3, 4, 5]]. Got {value!r} without it."
        )
    return out


def _check_intervals(intervals: Any, name: str, caller: str) -> list[list[int]]:
    hint = "e.g. [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]."
    what = "a non-empty list of lists of at least three ints in the range [1, inf)"
    if not isinstance(intervals, (list, tuple)) or len(intervals) == 0:
        raise InvalidParameterError(f"The '{name}' parameter of {caller} must be {what}. "
                                    f"Got {intervals!r} instead. HINT: {hint}")
    out = []
    for i, interval in enumerate(intervals):
        if not isinstance(interval, (list, tuple)) or len(interval) < 3:
            raise InvalidParameterError(
                f"The '{name}[{i}]' parameter of {caller} must be a list of at least three ints in the range "
                f"[1, inf). Got {interval!r} instead. HINT: {hint}"
            )
        for j, n in enumerate(interval):
            check_param(f"{name}[{i}][{j}]", n, [Interval(int, 1, None)], caller=caller)
        out.append([int(n) for n in interval])
    return out


#: Checkpoint copies wait in memory until they hold this many bytes or the oldest is this
#: old (checked at the next save), then one background job writes them all; what waits
#: when training ends is written by ``shutdown`` (before the metadata). Small networks'
#: checkpoints are then serialized together with warm caches instead of one by one
#: between training steps (each write competing with the training loop for the GIL);
#: large ones are written as they come.
CKPT_BATCH_BYTES = 64 << 20
CKPT_BATCH_SECONDS = 2.0


def _save_files(batch: list[tuple[dict[str, Any], str]]) -> None:
    """Write every checkpoint of a batch; raise the first failure once all were tried."""
    errors = []
    for state, path in batch:
        try:
            save_file(state, path)
        except Exception as exc:  # noqa: BLE001 - the other files are still written
            errors.append(exc)
    if errors:
        raise errors[0]


class LandscapeCollector:
    """Saves interval checkpoints while training and writes ``train_metadata.json`` at the end.

    Checkpoints: ``{ckpt_dir}/{NetworkClass}_{n}_{unit}.pt``, the unwrapped network's
    state dict (CPU tensors, copied on the training thread, written in batches: see
    ``CKPT_BATCH_BYTES``); all are written before the metadata.
    """

    def __init__(self, ckpt_dir: str, config: dict[str, Any]) -> None:
        self.ckpt_dir = ckpt_dir
        self.config = config
        self.unit: str = config["unit"]
        self.wanted = {n for interval in config["intervals"] for n in interval}
        self._wanted_sorted = sorted(self.wanted)
        self.files: dict[int, str] = {}
        self._writer = BackgroundWriter("landscape-ckpt")
        self._batch: list[tuple[dict[str, Any], str]] = []
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
        self.metadata_written = False

    def maybe_save(self, network: nn.Module, number: int) -> bool:
        """Save a checkpoint if ``number`` (step or epoch, per ``unit``) is in an interval."""
        if number not in self.wanted:
            return False
        module = unwrap_module(network)
        if not self.files:
            os.makedirs(self.ckpt_dir, exist_ok=True)
        file_name = f"{type(module).__name__}_{number}_{self.unit}.pt"
        state = cpu_state_dict(module)
        now = time.monotonic()
        if not self._batch:
            self._batch_since = now
        self._batch.append((state, os.path.join(self.ckpt_dir, file_name)))
        self._batch_bytes += sum(t.nbytes for t in state.values())
        self.files[number] = file_name
        if self._batch_bytes >= CKPT_BATCH_BYTES or now - self._batch_since >= CKPT_BATCH_SECONDS:
            self._hand_off()
        return True

    def _hand_off(self) -> None:
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        if batch:
            self._writer.submit(_save_files, batch)

    def write_metadata(self, step_per_epoch: int | None) -> str | None:
        """Wait for pending checkpoints, then write the metadata of the complete intervals.

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
        metadata = {
            "epoch_group": {str(i): list(iv) for i, iv in enumerate(complete)},
            "model_params_file_map": {str(n): self.files[n] for n in sorted(self.files)},
            "step_per_epoch": int(step_per_epoch or 0),
            "unit": self.unit,
            "num_samples": self.config["num_samples"],
            "landscape_size": self.config["landscape_size"],
            "create_landscape": dict(self.config["create_landscape"]),
        }
        path = os.path.join(self.ckpt_dir, METADATA_FILE)
        tmp = os.path.join(self.ckpt_dir, f".{METADATA_FILE}.tmp{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(metadata, f)
        os.replace(tmp, path)  # atomic: a reader sees the old file or the whole new one
        os.chmod(path, 0o444)
        logger.info("collect_landscape: wrote %s (%d checkpoints, %d complete intervals).",
                    path, len(self.files), len(complete))
        return path

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
        except Exception as exc:  # noqa: BLE001 - the waiting checkpoints are still written
            errors.append(exc)
        try:
            _save_files(batch)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        self._writer.shutdown()
        if errors:
            raise errors[0]
