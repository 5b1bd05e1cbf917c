"""Checkpoint saving during training (MindSpore's ``ModelCheckpoint`` / ``CheckpointConfig``).

A checkpoint is ``torch.save`` of a dict of plain types, loadable with
``torch.load(path, weights_only=True)``::

    {"state_dict": network state dict (CPU tensors),
     "optimizer_state_dict": optimizer state dict (only when the trained network is saved),
     "append_info": {"epoch_num": ..., "step_num": ..., user keys ...}}
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from torch import nn

from collector.common import (
    BackgroundWriter,
    InstanceOf,
    Interval,
    InvalidParameterError,
    Options,
    check_directory,
    check_param,
    unwrap_module,
)
from collector.train._callbacks import Callback, RunContext
from collector.trajectory import cpu_state_dict, save_file, to_cpu

__all__ = ["CheckpointConfig", "ModelCheckpoint"]

logger = logging.getLogger(__name__)


class CheckpointConfig:
    """When to save checkpoints and how many to keep.

    Parameters
    ----------
    save_checkpoint_steps : int, default=1
        Save every this many steps (0 disables). Takes precedence over
        ``save_checkpoint_seconds`` when both are set.
    save_checkpoint_seconds : int, default=0
        Save every this many seconds (0 disables).
    keep_checkpoint_max : int, default=5
        Keep at most this many checkpoint files (oldest removed first). Takes precedence
        over ``keep_checkpoint_per_n_minutes`` when both are set.
    keep_checkpoint_per_n_minutes : int, default=0
        Keep one checkpoint per this many minutes (0 disables).
    integrated_save : bool, default=True
        Accepted for MindSpore compatibility; PyTorch state dicts are always whole.
    async_save : bool, default=False
        Write the files in a background thread (tensors are copied to CPU first).
    saved_network : torch.nn.Module, default=None
        Save this network instead of the trained one (then no optimizer state is saved).
    append_info : list, default=None
        Extra entries: the strings ``"epoch_num"`` / ``"step_num"`` and at most one dict
        of str to int, float or bool.
    enc_key : None, default=None
        Encryption is not supported; any key is refused.
    enc_mode : str, default="AES-GCM"
        Only meaningful with ``enc_key``; "AES-GCM" or "AES-CBC".
    exception_save : bool, default=False
        Save a ``..._breakpoint.pt`` checkpoint when training raises.
    """

    def __init__(
        self,
        save_checkpoint_steps: int | None = 1,
        save_checkpoint_seconds: int | None = 0,
        keep_checkpoint_max: int | None = 5,
        keep_checkpoint_per_n_minutes: int | None = 0,
        integrated_save: bool = True,
        async_save: bool = False,
        saved_network: nn.Module | None = None,
        append_info: list | None = None,
        enc_key: bytes | None = None,
        enc_mode: str = "AES-GCM",
        exception_save: bool = False,
    ) -> None:
        c = "CheckpointConfig"
        nonneg = [None, Interval(int, 0, None)]
        check_param("save_checkpoint_steps", save_checkpoint_steps, nonneg, caller=c)
        check_param("save_checkpoint_seconds", save_checkpoint_seconds, nonneg, caller=c)
        check_param("keep_checkpoint_max", keep_checkpoint_max, nonneg, caller=c)
        check_param("keep_checkpoint_per_n_minutes", keep_checkpoint_per_n_minutes, nonneg, caller=c)
        check_param("integrated_save", integrated_save, ["boolean"], caller=c)
        check_param("async_save", async_save, ["boolean"], caller=c)
        check_param("saved_network", saved_network, [None, InstanceOf(nn.Module)], caller=c)
        check_param("exception_save", exception_save, ["boolean"], caller=c)
        check_param("enc_mode", enc_mode, [Options(("AES-GCM", "AES-CBC"))], caller=c)
        if enc_key is not None:
            raise InvalidParameterError(
                "The 'enc_key' parameter of CheckpointConfig is not supported: checkpoints are plain "
                f"torch.save files. Got a {type(enc_key).__name__} instead of None. "
                "HINT: encrypt the checkpoint directory at rest (e.g. an encrypted filesystem)."
            )
        if not save_checkpoint_steps and not save_checkpoint_seconds:
            raise InvalidParameterError(
                "The 'save_checkpoint_steps' and 'save_checkpoint_seconds' parameters of CheckpointConfig "
                f"cannot both be 0 or None. Got {save_checkpoint_steps!r} and {save_checkpoint_seconds!r} instead."
            )
        if not keep_checkpoint_max and not keep_checkpoint_per_n_minutes:
            raise InvalidParameterError(
                "The 'keep_checkpoint_max' and 'keep_checkpoint_per_n_minutes' parameters of CheckpointConfig "
                f"cannot both be 0 or None. Got {keep_checkpoint_max!r} and {keep_checkpoint_per_n_minutes!r} instead."
            )
        # MindSpore's precedence: steps over seconds, max count over per-n-minutes.
        if save_checkpoint_steps:
            save_checkpoint_seconds = 0
        if keep_checkpoint_max:
            keep_checkpoint_per_n_minutes = 0
        self._save_checkpoint_steps = save_checkpoint_steps or 0
        self._save_checkpoint_seconds = save_checkpoint_seconds or 0
        self._keep_checkpoint_max = keep_checkpoint_max or 0
        self._keep_checkpoint_per_n_minutes = keep_checkpoint_per_n_minutes or 0
        self._integrated_save = integrated_save
        self._async_save = async_save
        self._saved_network = saved_network
        self._append_info = self._check_append_info(append_info)
        self._enc_key = None
        self._enc_mode = enc_mode
        self._exception_save = exception_save

    @staticmethod
    def _check_append_info(append_info: list | None) -> list:
        c = "CheckpointConfig"
        check_param("append_info", append_info, [None, InstanceOf(list)], caller=c)
        out: list = []
        n_dicts = 0
        for i, item in enumerate(append_info or []):
            check_param(f"append_info[{i}]", item, [Options(("epoch_num", "step_num")), InstanceOf(dict)], caller=c)
            if isinstance(item, dict):
                n_dicts += 1
                if n_dicts > 1:
                    raise InvalidParameterError(
                        "The 'append_info' parameter of CheckpointConfig may hold at most one dict. "
                        f"Got {append_info!r} instead."
                    )
                for key, value in item.items():
                    check_param(f"append_info[{i}] key", key, ["nonempty_str"], caller=c)
                    # Plain types only: checkpoints must load with torch.load(weights_only=True).
                    check_param(f"append_info[{i}][{key!r}]", value, [InstanceOf(int, float, bool)], caller=c)
                item = dict(item)
            out.append(item)
        return out

    @property
    def save_checkpoint_steps(self) -> int:
        """Save every this many steps (0: not by steps)."""
        return self._save_checkpoint_steps

    @property
    def save_checkpoint_seconds(self) -> int:
        """Save every this many seconds (0: not by time)."""
        return self._save_checkpoint_seconds

    @property
    def keep_checkpoint_max(self) -> int:
        """Keep at most this many files (0: no count limit)."""
        return self._keep_checkpoint_max

    @property
    def keep_checkpoint_per_n_minutes(self) -> int:
        """Keep one file per this many minutes (0: not by time)."""
        return self._keep_checkpoint_per_n_minutes

    @property
    def integrated_save(self) -> bool:
        """Accepted for compatibility; always whole state dicts."""
        return self._integrated_save

    @property
    def async_save(self) -> bool:
        """Whether files are written in a background thread."""
        return self._async_save

    @property
    def saved_network(self) -> nn.Module | None:
        """The network saved instead of the trained one, if any."""
        return self._saved_network

    @property
    def append_dict(self) -> dict[str, Any]:
        """The user dict of ``append_info`` (without ``epoch_num`` / ``step_num``)."""
        for item in self._append_info:
            if isinstance(item, dict):
                return dict(item)
        return {}

    @property
    def enc_key(self) -> None:
        """Always None: encryption is not supported."""
        return self._enc_key

    @property
    def enc_mode(self) -> str:
        """The encryption mode (unused)."""
        return self._enc_mode

    @property
    def exception_save(self) -> bool:
        """Whether a checkpoint is saved when training raises."""
        return self._exception_save

    def get_checkpoint_policy(self) -> dict[str, int]:
        """Return the saving and keeping policy as a dict."""
        return {
            "save_checkpoint_steps": self._save_checkpoint_steps,
            "save_checkpoint_seconds": self._save_checkpoint_seconds,
            "keep_checkpoint_max": self._keep_checkpoint_max,
            "keep_checkpoint_per_n_minutes": self._keep_checkpoint_per_n_minutes,
        }


class ModelCheckpoint(Callback):
    """Save checkpoints during training as ``{directory}/{prefix}-{epoch}_{step_in_epoch}.pt``.

    Parameters
    ----------
    prefix : str, default="CKP"
        File name prefix; may not contain "/".
    directory : str or os.PathLike, default=None
        Where files go (created when the first file is saved); None: the current directory.
    config : CheckpointConfig, default=None
        The policy; None: ``CheckpointConfig()``.

    Notes
    -----
    A name already taken gets ``_1``, ``_2``, ... appended (as MindSpore does). At
    ``end`` the last step is saved unless it already was.
    """

    def __init__(self, prefix: str = "CKP", directory: str | os.PathLike | None = None,
                 config: CheckpointConfig | None = None) -> None:
        c = "ModelCheckpoint"
        check_param("prefix", prefix, ["nonempty_str"], caller=c)
        if "/" in prefix or os.sep in prefix:
            raise InvalidParameterError(
                f"The 'prefix' parameter of ModelCheckpoint must not contain '/'. Got {prefix!r} instead."
            )
        check_param("directory", directory, [None, "path"], caller=c)
        if directory is not None:
            check_directory("directory", directory, caller=c)
        check_param("config", config, [None, InstanceOf(CheckpointConfig)], caller=c)
        self._prefix = prefix
        self._directory = os.fspath(directory) if directory is not None else os.getcwd()
        self._config = config if config is not None else CheckpointConfig()
        self._latest_ckpt_file_name: str | None = None
        self._writer = BackgroundWriter("ModelCheckpoint")
        self._cb_params: Any = None
        self._reset()

    def _reset(self) -> None:
        self._last_saved_step: int | None = None
        self._last_time = time.monotonic()
        self._kept: list[tuple[str, float]] = []  # (path, save time) in order, for the keep policy
        self._anchor_time: float | None = None

    @property
    def latest_ckpt_file_name(self) -> str | None:
        """Path of the latest checkpoint file (None before the first save)."""
        return self._latest_ckpt_file_name

    def begin(self, run_context: RunContext) -> None:
        """Start the save-every-seconds clock."""
        self._reset()
        # Kept so that __exit__ can save a breakpoint checkpoint when training raises.
        self._cb_params = run_context.original_args()

    def step_end(self, run_context: RunContext) -> None:
        """Save when the step or seconds policy says so."""
        cb_params = run_context.original_args()
        if cb_params.get("mode", "train") != "train":
            return
        step = int(cb_params.cur_step_num)
        cfg = self._config
        if cfg.save_checkpoint_steps:
            due = step % cfg.save_checkpoint_steps == 0
        else:
            due = time.monotonic() - self._last_time >= cfg.save_checkpoint_seconds
        if due:
            self._save(cb_params)

    def end(self, run_context: RunContext) -> None:
        """Save the last step (unless already saved) and wait for background writes."""
        cb_params = run_context.original_args()
        if cb_params.get("mode", "train") == "train" and self._last_saved_step != cb_params.get("cur_step_num"):
            self._save(cb_params)
        self._writer.wait()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is not None and self._config.exception_save and self._cb_params is not None:
                self._save(self._cb_params, suffix="_breakpoint")
        finally:
            self._writer.shutdown()

    def _payload(self, cb_params: Mapping[str, Any]) -> dict[str, Any]:
        cfg = self._config
        network = cfg.saved_network if cfg.saved_network is not None else cb_params.get("network")
        if network is None:
            network = cb_params.get("train_network")
        if not isinstance(network, nn.Module):
            raise ValueError("ModelCheckpoint: the run's parameters hold no network to save "
                             f"(cb_params.network and cb_params.train_network are {network!r}).")
        payload: dict[str, Any] = {"state_dict": cpu_state_dict(unwrap_module(network))}
        optimizer = cb_params.get("optimizer")
        if cfg.saved_network is None and optimizer is not None:
            # torch's optimizer state dict holds tensors, numbers and lists: weights_only-safe.
            opt_state = optimizer.state_dict()
            payload["optimizer_state_dict"] = to_cpu(opt_state)
        info: dict[str, Any] = {}
        for item in cfg._append_info:
            if item == "epoch_num":
                info["epoch_num"] = int(cb_params.get("cur_epoch_num", 0))
            elif item == "step_num":
                info["step_num"] = int(cb_params.get("cur_step_num", 0))
            else:
                info.update(item)
        if info:
            payload["append_info"] = info
        return payload

    def _file_name(self, cb_params: Mapping[str, Any], suffix: str) -> str:
        epoch = int(cb_params.get("cur_epoch_num", 0))
        step_in_epoch = int(cb_params.get("cur_step_in_epoch", cb_params.get("cur_step_num", 0)))
        base = f"{self._prefix}-{epoch}_{step_in_epoch}{suffix}"
        path = os.path.join(self._directory, base + ".pt")
        n = 0
        known = {p for p, _ in self._kept}
        while os.path.exists(path) or path in known:
            n += 1
            path = os.path.join(self._directory, f"{base}_{n}.pt")
        return path

    def _save(self, cb_params: Mapping[str, Any], suffix: str = "") -> None:
        os.makedirs(self._directory, exist_ok=True)
        path = self._file_name(cb_params, suffix)
        payload = self._payload(cb_params)
        if self._config.async_save:
            self._writer.submit(save_file, payload, path)
        else:
            save_file(payload, path)
        self._latest_ckpt_file_name = path
        self._last_saved_step = cb_params.get("cur_step_num")
        self._last_time = time.monotonic()
        if not suffix:
            self._apply_keep_policy(path)

    def _remove(self, path: str) -> None:
        # A pending async write must land before its file can be removed.
        self._writer.wait()
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    def _apply_keep_policy(self, path: str) -> None:
        now = time.monotonic()
        cfg = self._config
        if cfg.keep_checkpoint_max:
            self._kept.append((path, now))
            while len(self._kept) > cfg.keep_checkpoint_max:
                old, _ = self._kept.pop(0)
                self._remove(old)
        elif cfg.keep_checkpoint_per_n_minutes:
            # Keep the first file of every n-minute window, plus the newest file: a file saved
            # between two window starts lives only until the next save.
            if self._kept and self._kept[-1][1] != self._anchor_time:
                self._remove(self._kept.pop()[0])
            if self._anchor_time is None or now - self._anchor_time >= 60 * cfg.keep_checkpoint_per_n_minutes:
                self._anchor_time = now
            self._kept.append((path, now))
