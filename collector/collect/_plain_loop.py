"""The plain-PyTorch-loop API of SummaryCollector (no :class:`Model`).

``begin_train`` builds the run-context arguments :class:`Model` would pass; ``step``,
``epoch_end`` and ``end`` advance them and call the collector's own hooks, so both
ways of training collect exactly the same data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from collector.common import InstanceOf, Interval, check_param
from collector.train import CallbackParams, RunContext

__all__ = ["PlainLoopMixin"]


class PlainLoopMixin:
    """``begin_train`` / ``step`` / ``epoch_end()`` / ``end()`` / ``log_eval`` for SummaryCollector."""

    _plain: RunContext | None = None

    if TYPE_CHECKING:  # what SummaryCollector, the class this mixes into, provides
        _record: Any
        _logged_loss: float | None

        def begin(self, run_context: RunContext) -> None: ...
        def step_end(self, run_context: RunContext) -> None: ...
        def epoch_end(self, run_context: RunContext) -> None: ...
        def end(self, run_context: RunContext) -> None: ...
        def close(self) -> None: ...

    def begin_train(
        self,
        network: nn.Module,
        optimizer: torch.optim.Optimizer | None = None,
        loss_fn: Any = None,
        train_dataset: Iterable[Any] | None = None,
        epoch_num: int | None = None,
        batch_num: int | None = None,
        batch_size: int | None = None,
        *,
        initial_step: int = 0,
        initial_epoch: int = 0,
    ) -> None:
        """Start collecting in a plain PyTorch loop (no :class:`Model`).

        Parameters
        ----------
        network : torch.nn.Module
            The trained network (histograms, landscape checkpoints, lineage).
        optimizer, loss_fn : optional
            For lineage (optimizer class and learning rate, loss class).
        train_dataset : iterable, optional
            For the dataset graph and lineage; its ``len`` gives ``batch_num``.
        epoch_num : int, optional
            Total epochs (lineage, and the tensor-collection plan).
        batch_num, batch_size : int, optional
            Steps per epoch and samples per batch when the dataset does not tell.
        initial_step, initial_epoch : int, default=0
            Steps and epochs trained before, when a run resumes from a checkpoint: the
            first :meth:`step` is step ``initial_step + 1`` of epoch ``initial_epoch + 1``,
            and the landscape checkpoints the earlier part saved (up to that step or
            epoch, still in ``ckpt_dir``) count for the intervals.
        """
        c = "SummaryCollector.begin_train"
        check_param("network", network, [InstanceOf(nn.Module)], caller=c)
        check_param("initial_step", initial_step, [Interval(int, 0, None)], caller=c)
        check_param("initial_epoch", initial_epoch, [Interval(int, 0, None)], caller=c)
        check_param("epoch_num", epoch_num, [None, Interval(int, 1, None)], caller=c)
        check_param("batch_num", batch_num, [None, Interval(int, 1, None)], caller=c)
        check_param("batch_size", batch_size, [None, Interval(int, 1, None)], caller=c)
        if batch_num is None and train_dataset is not None:
            try:
                batch_num = len(train_dataset)  # type: ignore[arg-type]
            except TypeError:
                batch_num = None
        if batch_size is None:
            size = getattr(train_dataset, "batch_size", None)
            batch_size = size if isinstance(size, int) else None
        parallel_mode, device_number = (("data_parallel", torch.distributed.get_world_size())
                                        if torch.distributed.is_available() and torch.distributed.is_initialized()
                                        else ("stand_alone", 1))
        params = CallbackParams(
            train_network=network, network=network, optimizer=optimizer, loss_fn=loss_fn, mode="train",
            train_dataset=train_dataset, epoch_num=epoch_num, batch_num=batch_num, batch_size=batch_size,
            cur_epoch_num=initial_epoch + 1, cur_step_num=initial_step, initial_epoch=initial_epoch,
            cur_step_in_epoch=max(0, initial_step - initial_epoch * batch_num) if batch_num else 0,
            net_outputs=None, train_dataset_element=None,
            list_callback=[self], device_number=device_number, parallel_mode=parallel_mode,
        )
        self._plain = RunContext(params)
        self.begin(self._plain)

    def _plain_context(self, what: str) -> RunContext:
        if self._plain is None:
            raise RuntimeError(f"SummaryCollector.{what}() needs begin_train() first (plain-loop use).")
        return self._plain

    def step(self, loss: Any, inputs: Any = None) -> None:
        """One training step done (call after ``optimizer.step()``): collect if due.

        Parameters
        ----------
        loss : torch.Tensor or float
            The step's loss; converted to a number only at collection steps.
        inputs : torch.Tensor, optional
            The step's network input, for ``input_data/auto`` when image-like.
        """
        ctx = self._plain_context("step")
        params = ctx.original_args()
        params.cur_step_num += 1
        params.cur_step_in_epoch += 1
        params.net_outputs = loss
        params.train_dataset_element = None if inputs is None else (inputs,)
        if params.batch_size is None and isinstance(inputs, torch.Tensor) and inputs.ndim:
            params.batch_size = int(inputs.shape[0])
        self.step_end(ctx)

    def _plain_epoch_end(self) -> None:
        ctx = self._plain_context("epoch_end")
        params = ctx.original_args()
        if params.batch_num is None:
            params.batch_num = params.cur_step_in_epoch
        self.epoch_end(ctx)
        params.cur_epoch_num += 1
        params.cur_step_in_epoch = 0

    def _plain_end(self) -> None:
        ctx = self._plain_context("end")
        params = ctx.original_args()
        if params.cur_step_in_epoch == 0 and params.cur_epoch_num > 1:
            params.cur_epoch_num -= 1  # the last epoch_end() already moved past the final epoch
        if params.epoch_num is None:
            params.epoch_num = params.cur_epoch_num
        if params.net_outputs is None and self._logged_loss is not None:
            params.net_outputs = self._logged_loss  # the loss came through log_loss only
        try:
            self.end(ctx)
        finally:
            self._plain = None
            self.close()

    def log_eval(self, metrics: Mapping[str, Any], valid_dataset: Iterable[Any] | None = None) -> None:
        """Record an evaluation's lineage from a plain loop (metrics as computed by the user)."""
        check_param("metrics", metrics, [InstanceOf(Mapping, description="a dict")],
                    caller="SummaryCollector.log_eval")
        batch_size = getattr(valid_dataset, "batch_size", None)
        try:
            batch_num = len(valid_dataset)  # type: ignore[arg-type]
        except TypeError:
            batch_num = None
        params = CallbackParams(mode="eval", metrics=dict(metrics), valid_dataset=valid_dataset,
                                batch_size=batch_size if isinstance(batch_size, int) else None,
                                batch_num=batch_num, cur_step_num=0, list_callback=[self])
        opened_here = self._record is None
        mode = None if opened_here else self._record.mode
        ctx = RunContext(params)
        self.begin(ctx)
        try:
            self.end(ctx)
        finally:
            if opened_here:
                self.close()
            elif mode is not None and self._record is not None:
                self._record.set_mode(mode)  # back to training when evaluating between epochs
