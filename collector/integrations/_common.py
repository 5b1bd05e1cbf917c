"""What the framework callbacks share: one SummaryCollector, built on the writing process only.

A framework callback (Lightning's, Hugging Face's) is an adapter: it turns the
framework's hooks into the plain-loop calls of a :class:`SummaryCollector`
(``begin_train`` / ``step`` / ``epoch_end`` / ``end`` / ``log_eval`` / ``log_loss``), which
does all the collecting. Under data parallelism only global rank 0 writes: the other
processes never build the collector, so they create no file or folder.
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch

from collector.collect import SummaryCollector

__all__ = ["CollectorAdapter", "launch_rank", "first_tensor", "scalar_metrics"]


def launch_rank() -> int:
    """The global rank the launcher gave this process (0 without one), read from the environment.

    The keys Lightning and torchrun set, in Lightning's order (``RANK`` first: SLURM may
    set ``SLURM_PROCID`` without managing the processes).
    """
    for key in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"):
        value = os.environ.get(key)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return 0


def first_tensor(batch: Any) -> torch.Tensor | None:
    """The network input of a batch: the batch itself or its first item, when a tensor (else None)."""
    if isinstance(batch, torch.Tensor):
        return batch
    if isinstance(batch, (tuple, list)) and batch and isinstance(batch[0], torch.Tensor):
        return batch[0]
    return None


def scalar_metrics(metrics: Any) -> dict[str, float]:
    """The metrics that are one number (a float, an int or a one-element tensor), as floats."""
    out: dict[str, float] = {}
    for name, value in dict(metrics or {}).items():
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                continue
            value = value.detach().float().item()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[str(name)] = float(value)
    return out


class CollectorAdapter:
    """Holds the :class:`SummaryCollector` arguments and the collector of the writing process.

    The arguments are validated when the adapter is made, by building the collector
    there when this process is global rank 0 by its launcher (``launch_rank``), so a
    wrong argument fails before training. A copy sent to another process (pickled, as
    Lightning's ``ddp_spawn`` does) carries only the arguments; :meth:`collector`
    builds the collector again where it is asked for.
    """

    def __init__(
        self,
        summary_dir: str | os.PathLike,
        collect_freq: int = 10,
        collect_specified_data: dict[str, Any] | None = None,
        keep_default_action: bool = True,
        custom_lineage_data: dict[str, str | int | float] | None = None,
        collect_tensor_freq: int | None = None,
        max_file_size: int | None = None,
        export_options: dict[str, Any] | None = None,
        *,
        tensorboard_dir: str | os.PathLike | None = None,
        checkpoint_format: str = "torch",
    ) -> None:
        # SummaryCollector's arguments (num_process aside: the framework runs the training)
        self._collector_args: dict[str, Any] = dict(
            summary_dir=summary_dir, collect_freq=collect_freq, collect_specified_data=collect_specified_data,
            keep_default_action=keep_default_action, custom_lineage_data=custom_lineage_data,
            collect_tensor_freq=collect_tensor_freq, max_file_size=max_file_size, export_options=export_options,
            tensorboard_dir=tensorboard_dir, checkpoint_format=checkpoint_format)
        self._sc: SummaryCollector | None = SummaryCollector(**self._collector_args) if launch_rank() == 0 else None
        self._training = False  # between the framework's train-begin and train-end hooks

    def collector(self) -> SummaryCollector:
        """The SummaryCollector of this process, built on first use."""
        if self._sc is None:
            self._sc = SummaryCollector(**self._collector_args)
        return self._sc

    @property
    def summary_dir(self) -> str:
        """The absolute summary directory."""
        return os.path.realpath(os.fspath(self._collector_args["summary_dir"]))

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """Keep what is usable when training raised (the metadata of the complete intervals); close the files."""
        self._training = False
        if self._sc is not None:
            self._sc.__exit__(exc_type, exc, tb)

    def __getstate__(self) -> dict[str, Any]:
        # The collector holds threads, locks and open files: a copy rebuilds its own.
        state = dict(self.__dict__)
        state["_sc"] = None
        return state
