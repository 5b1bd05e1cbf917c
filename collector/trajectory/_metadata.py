"""``train_metadata.json``: the one module that writes, reads and validates it.

SummaryCollector writes it at the end of training (``{summary_dir}/ckpt_dir``), next to
the interval checkpoints; ``SummaryLandscape`` reads it to know which checkpoints make
which landscape. MindSpore writes the same file, so one written by MindSpore 2.10 reads
here too. Also here: :func:`validate_collect_landscape`, the check of the
``collect_landscape`` dict whose keys the file records (shared by SummaryCollector and
the override of ``SummaryLandscape.gen_landscapes_with_multi_process``, so both refuse a
bad value with the same message).

Beyond MindSpore's keys, ours records each checkpoint's SHA-256 and size under
``model_params_file_digest`` (``{"3": {"sha256": "...", "size": 105563}}``), computed as the
file was written; the initial weights, saved before the first step as the step or epoch 0
checkpoint, under ``initial_checkpoint`` (``{"file": "MLP_0_epoch.pt", "sha256": "...",
"size": 105563}``: not in ``model_params_file_map``, so no interval, PCA or MindSpore reader
sees it); and ``num_samples_default``, whether ``num_samples`` was left at its default (the
collector then records at most the training data's size). MindSpore ignores keys it does
not know, and a file without them (MindSpore's) still reads: its checkpoints are then
checked by their archives' CRC-32 and loading only.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from collector.common import (
    InstanceOf,
    Interval,
    InvalidParameterError,
    Options,
    atomic_path,
    check_param,
)
from collector.trajectory._integrity import CheckpointNotFoundError, FileDigest
from collector.trajectory._safetensors import SUFFIX

__all__ = ["TrainMetadata", "read_train_metadata", "validate_collect_landscape", "checkpoint_file_name",
           "CHECKPOINT_FORMATS", "recorded_digest", "LANDSCAPE_DEFAULTS", "LANDSCAPE_SIZES", "METADATA_FILE",
           "CKPT_DIR", "DIGEST_KEY", "INITIAL_KEY"]

METADATA_FILE = "train_metadata.json"
CKPT_DIR = "ckpt_dir"
_FILE_KEYS = ("epoch_group", "model_params_file_map", "step_per_epoch", "unit", "num_samples",
              "landscape_size", "create_landscape")
#: Our key beyond MindSpore's: each checkpoint's SHA-256 and size, by step or epoch number.
DIGEST_KEY = "model_params_file_digest"
#: Our key for the initial weights' checkpoint: ``{"file": ..., "sha256": ..., "size": ...}`` (the digest
#: absent for a file a resumed run's first part saved).
INITIAL_KEY = "initial_checkpoint"
#: Our key saying whether ``num_samples`` was left at its default when training.
_NUM_SAMPLES_DEFAULT_KEY = "num_samples_default"
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: Points per side a landscape may have (MindSpore's ``landscape_size``: 3 to 256), wherever a
#: size is given: ``collect_landscape``, ``train_metadata.json``, ``compute_landscape(size=)``
#: and ``landscape gen --size``.
LANDSCAPE_SIZES = (3, 256)


#: The file formats of interval checkpoints: ``torch.save``'s (``.pt``) and safetensors.
CHECKPOINT_FORMATS = ("torch", "safetensors")


def checkpoint_file_name(network_name: str, number: int, unit: str, file_format: str = "torch") -> str:
    """``{NetworkClass}_{n}_{unit}.pt`` (``.safetensors`` for that format), the name of an
    interval checkpoint in ``ckpt_dir``."""
    return f"{network_name}_{number}_{unit}{SUFFIX if file_format == 'safetensors' else '.pt'}"


@dataclass
class TrainMetadata:
    """The content of ``train_metadata.json``.

    Attributes
    ----------
    intervals : list of list of int
        The complete intervals (``epoch_group``), in order.
    files : dict of int to str
        Checkpoint file of each step or epoch number (``model_params_file_map``), relative
        to the ``ckpt_dir`` or absolute.
    step_per_epoch : int
    unit : {"step", "epoch"}
    num_samples : int
    landscape_size : int
    create_landscape : dict
        ``{"train": bool, "result": bool}``.
    digests : dict of int to FileDigest
        SHA-256 and size of each checkpoint as it was written (``model_params_file_digest``);
        empty in MindSpore's files.
    initial : str, optional
        The checkpoint of the initial weights, saved before the first step (step or epoch 0;
        ``initial_checkpoint``); None in MindSpore's files and in ours written before it.
        Not in ``files``: it belongs to no interval.
    initial_digest : FileDigest, optional
        Its SHA-256 and size as it was written.
    num_samples_default : bool, optional
        Whether ``num_samples`` was left at its default when training (``num_samples_default``);
        None when the file does not say (MindSpore's, and ours written before it).
    """

    intervals: list[list[int]]
    files: dict[int, str]
    step_per_epoch: int
    unit: str
    num_samples: int
    landscape_size: int
    create_landscape: dict[str, bool] = field(default_factory=lambda: {"train": True, "result": True})
    digests: dict[int, FileDigest] = field(default_factory=dict)
    initial: str | None = None
    initial_digest: FileDigest | None = None
    num_samples_default: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON object MindSpore writes (string keys, in its key order), then our keys that are set."""
        out: dict[str, Any] = {
            "epoch_group": {str(i): list(iv) for i, iv in enumerate(self.intervals)},
            "model_params_file_map": {str(n): self.files[n] for n in sorted(self.files)},
            "step_per_epoch": int(self.step_per_epoch),
            "unit": self.unit,
            "num_samples": self.num_samples,
            "landscape_size": self.landscape_size,
            "create_landscape": dict(self.create_landscape),
        }
        if self.digests:
            out[DIGEST_KEY] = {str(n): _digest_json(d) for n, d in sorted(self.digests.items())}
        if self.initial is not None:
            out[INITIAL_KEY] = {"file": self.initial,
                                **(_digest_json(self.initial_digest) if self.initial_digest else {})}
        if self.num_samples_default is not None:
            out[_NUM_SAMPLES_DEFAULT_KEY] = bool(self.num_samples_default)
        return out

    def write(self, ckpt_dir: str | os.PathLike) -> str:
        """Write ``{ckpt_dir}/train_metadata.json`` atomically and read-only; return its path."""
        path = os.path.join(os.fspath(ckpt_dir), METADATA_FILE)
        with atomic_path(path) as tmp:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(self.to_json(), fh)
            os.chmod(tmp, 0o444)
        return path

    def checkpoint_path(self, ckpt_dir: str | os.PathLike, number: int) -> str:
        """The path of the checkpoint of step or epoch ``number``; FileNotFoundError naming
        the number and the file when it was not collected or is missing."""
        name = self.files.get(int(number))
        where = os.path.join(os.fspath(ckpt_dir), METADATA_FILE)
        if not isinstance(name, str):
            raise CheckpointNotFoundError(f"No checkpoint was collected for {self.unit} {number}: it is not in "
                                          f"model_params_file_map of {where!r}.", what=f"{self.unit} {number}")
        return self._existing(ckpt_dir, name, number)

    def initial_path(self, ckpt_dir: str | os.PathLike) -> str | None:
        """The path of the initial weights' checkpoint (step or epoch 0); None when it was not
        saved (MindSpore's runs, ours before it); FileNotFoundError when it is missing."""
        return None if self.initial is None else self._existing(ckpt_dir, self.initial, 0)

    def _existing(self, ckpt_dir: str | os.PathLike, name: str, number: int) -> str:
        path = name if os.path.isabs(name) else os.path.join(os.fspath(ckpt_dir), name)
        if not os.path.isfile(path):
            what = f"{self.unit} {number}" + (" (the initial weights)" if number == 0 else "")
            hint = ("restore it; the initial weights are saved once, before the first step" if number == 0 else
                    "restore it, or leave the intervals that use it out (collect_landscape={'intervals': [...]})")
            raise CheckpointNotFoundError(f"The checkpoint of {what} ({name!r}) is missing: {path!r} does not exist. "
                                          f"HINT: {hint}.", path=path, what=f"{self.unit} {number}")
        return path


def read_train_metadata(path: str | os.PathLike) -> TrainMetadata:
    """Read and validate ``train_metadata.json`` (ours or MindSpore's).

    Parameters
    ----------
    path : str or os.PathLike
        The file, or the ``ckpt_dir`` holding it.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not JSON, a key missing, or a value of the wrong type or range (naming the key).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, METADATA_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"train_metadata.json not found at {path!r}. HINT: train with "
                                "SummaryCollector(collect_specified_data={'collect_landscape': ...}).")
    try:
        with open(path, encoding="utf-8") as fh:
            md = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ValueError(f"train_metadata.json at {path!r} is not valid JSON: {exc}") from None
    if not isinstance(md, dict):
        raise ValueError(f"train_metadata.json at {path!r} must hold a JSON object; got {type(md).__name__}.")
    missing = [k for k in _FILE_KEYS if k not in md]
    if missing:
        raise ValueError(f"train_metadata.json at {path!r} lacks the key(s) {missing}.")
    caller = f"train_metadata.json ({path})"
    for key in ("epoch_group", "model_params_file_map"):
        if not isinstance(md[key], dict):
            raise ValueError(f"The {key!r} key of {caller} must be an object; got {md[key]!r}.")
    check_param("step_per_epoch", md["step_per_epoch"], [Interval(int, 0, None)], caller=caller)
    check_param("unit", md["unit"], [Options(("step", "epoch"))], caller=caller)
    check_param("num_samples", md["num_samples"], [Interval(int, 1, None)], caller=caller)
    check_param("landscape_size", md["landscape_size"], [Interval(int, *LANDSCAPE_SIZES)], caller=caller)
    cl = md["create_landscape"]
    if not (isinstance(cl, dict) and all(isinstance(cl.get(k), bool) for k in ("train", "result"))):
        raise ValueError(f"The 'create_landscape' key of {caller} must be "
                         f'{{"train": bool, "result": bool}}; got {cl!r}.')
    intervals = []
    for k in sorted(md["epoch_group"], key=lambda s: int(s) if str(s).isdigit() else 0):
        iv = md["epoch_group"][k]
        if not (isinstance(iv, list) and all(isinstance(n, int) and not isinstance(n, bool) for n in iv)):
            raise ValueError(f"The 'epoch_group' key of {caller} must map to lists of ints; got {k!r}: {iv!r}.")
        intervals.append(list(iv))
    files: dict[int, str] = {}
    for k, name in md["model_params_file_map"].items():
        if not str(k).lstrip("-").isdigit():
            raise ValueError(f"The 'model_params_file_map' key of {caller} must map step or epoch numbers to "
                             f"file names; got {k!r}: {name!r}.")
        files[int(k)] = name
    default = md.get(_NUM_SAMPLES_DEFAULT_KEY)
    if default is not None and not isinstance(default, bool):
        raise ValueError(f"The {_NUM_SAMPLES_DEFAULT_KEY!r} key of {caller} must be true or false; got {default!r}.")
    initial, initial_digest = _read_initial(md.get(INITIAL_KEY), caller)
    return TrainMetadata(intervals=intervals, files=files, step_per_epoch=md["step_per_epoch"], unit=md["unit"],
                         num_samples=md["num_samples"], landscape_size=md["landscape_size"],
                         create_landscape=dict(cl), digests=_read_digests(md.get(DIGEST_KEY), caller),
                         initial=initial, initial_digest=initial_digest, num_samples_default=default)


_DIGEST_SHAPE = '{"sha256": "<64 lowercase hex digits>", "size": <bytes>}'


def _digest_json(d: FileDigest) -> dict[str, Any]:
    return {"sha256": d.sha256, "size": int(d.size)}


def _is_digest(d: Any) -> bool:
    """Whether a JSON value is a digest object (see :data:`_DIGEST_SHAPE`)."""
    return (isinstance(d, dict) and isinstance(d.get("sha256"), str) and _SHA256.fullmatch(d["sha256"]) is not None
            and isinstance(d.get("size"), int) and not isinstance(d.get("size"), bool) and d["size"] >= 0)


def _read_initial(value: Any, caller: str) -> tuple[str | None, FileDigest | None]:
    """The optional ``initial_checkpoint`` object: its file and, when recorded, its digest."""
    if value is None:
        return None, None
    shape = '{"file": "<name>", "sha256": "<64 lowercase hex digits>", "size": <bytes>}'
    ok = (isinstance(value, dict) and isinstance(value.get("file"), str) and value["file"] != ""
          and set(value) <= {"file", "sha256", "size"}
          and (set(value) == {"file"} or _is_digest(value)))
    if not ok:
        raise ValueError(f"The {INITIAL_KEY!r} key of {caller} must be an object {shape} (the digest may be "
                         f"absent); got {value!r}.")
    return value["file"], FileDigest(value["sha256"], value["size"]) if "sha256" in value else None


def _read_digests(value: Any, caller: str) -> dict[int, FileDigest]:
    """The optional ``model_params_file_digest`` object (absent from MindSpore's files)."""
    if value is None:
        return {}
    shape = '{"3": ' + _DIGEST_SHAPE + ', ...}'
    if not isinstance(value, dict):
        raise ValueError(f"The {DIGEST_KEY!r} key of {caller} must be an object {shape}; got {value!r}.")
    out = {}
    for k, d in value.items():
        if not (str(k).lstrip("-").isdigit() and _is_digest(d)):
            raise ValueError(f"The {DIGEST_KEY!r} key of {caller} must be an object {shape}; got {k!r}: {d!r}.")
        out[int(k)] = FileDigest(d["sha256"], d["size"])
    return out


def recorded_digest(path: str | os.PathLike) -> tuple[FileDigest, str] | None:
    """The digest recorded for a checkpoint file by the ``train_metadata.json`` of its folder.

    For checkpoints given by path (``compute_landscape(checkpoints=[...])``): a file that
    SummaryCollector wrote has its digest next to it.

    Returns
    -------
    (FileDigest, str) or None
        The digest and the metadata file's path; None when the folder has no metadata,
        the metadata cannot be read, or it records no digest for this file.
    """
    path = os.path.realpath(os.fspath(path))
    folder = os.path.dirname(path)
    where = os.path.join(folder, METADATA_FILE)
    if not os.path.isfile(where):
        return None
    try:
        md = read_train_metadata(where)
    except (OSError, ValueError):
        return None  # not ours to judge here: the checkpoint itself is still checked (CRC-32, loading)
    recorded = [(name, md.digests.get(n)) for n, name in md.files.items()] + [(md.initial, md.initial_digest)]
    for name, digest in recorded:
        if name is None or digest is None:
            continue
        full = name if os.path.isabs(name) else os.path.join(folder, name)
        if os.path.realpath(full) == path:
            return digest, where
    return None


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
        ``intervals`` list of lists of at least three strictly increasing ints >= 1.

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
    key = lambda k: f"{name}[{k!r}]"
    create_name, intervals_name = key("create_landscape"), key("intervals")
    if "landscape_size" in value:
        out["landscape_size"] = check_param(key("landscape_size"), value["landscape_size"],
                                            [Interval(int, *LANDSCAPE_SIZES)], caller=caller)
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
        # A repeated or earlier number is not a trajectory: its PCA would weigh one checkpoint twice
        # and its path would step back.
        for j in range(1, len(interval)):
            if interval[j] <= interval[j - 1]:
                what = "repeats" if interval[j] == interval[j - 1] else "comes after the larger"
                raise InvalidParameterError(
                    f"The '{name}[{i}]' parameter of {caller} must list strictly increasing step or epoch numbers. "
                    f"Got {list(interval)!r} instead: {interval[j]} at position {j} {what} {interval[j - 1]}. "
                    f"HINT: {hint}")
        out.append([int(n) for n in interval])
    return out
