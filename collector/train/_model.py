"""``Model``: MindSpore's high-level train/eval/predict API over a PyTorch network."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn

from collector.common import (
    InstanceOf,
    Interval,
    InvalidParameterError,
    check_param,
)
from collector.train._callbacks import (
    Callback,
    CallbackParams,
    RunContext,
    _CallbackList,
)
from collector.train._metrics import get_metric

__all__ = ["Model"]

logger = logging.getLogger(__name__)


def _device_of(network: nn.Module) -> torch.device:
    for param in network.parameters():
        return param.device
    for buffer in network.buffers():
        return buffer.device
    return torch.device("cpu")


def _to_device(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=True) if obj.device != device else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_device(v, device) for k, v in obj.items()}
    return obj


def _split_batch(batch: Any) -> tuple[tuple[Any, ...], Any]:
    """(network inputs, label): the last element of a tuple/list batch is the label."""
    if isinstance(batch, (tuple, list)):
        if len(batch) == 1:
            return (batch[0],), None
        return tuple(batch[:-1]), batch[-1]
    return (batch,), None


def _batch_size_of(dataset: Any) -> int | None:
    size = getattr(dataset, "batch_size", None)
    return size if isinstance(size, int) else None


def _len_or_none(dataset: Any) -> int | None:
    try:
        return len(dataset)
    except TypeError:
        return None


def _parallel_info() -> tuple[str, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return "data_parallel", torch.distributed.get_world_size()
    return "stand_alone", 1


class Model:
    """Train, evaluate and predict with a network, calling MindSpore-style callbacks.

    Parameters
    ----------
    network : torch.nn.Module
        The network. With ``loss_fn=None`` it must return the loss itself when called
        with a whole batch (``network(*batch)``).
    loss_fn : callable, default=None
        ``loss_fn(outputs, labels) -> loss`` (a ``torch.nn`` loss module, for example).
    optimizer : torch.optim.Optimizer, default=None
        Required by :meth:`train`.
    metrics : dict or set, default=None
        ``{name: metric}`` (objects with ``clear``/``update``/``eval``) or a set of names
        among ``"accuracy"``/``"acc"``/``"loss"``. Required by :meth:`eval`.
    eval_network : torch.nn.Module, default=None
        Used by :meth:`eval` instead of ``network`` (same call convention).

    Attributes
    ----------
    network, loss_fn, optimizer, metrics, eval_network
        As given (``metrics`` as a dict); the landscape engine reads ``loss_fn`` and
        ``network``.

    Notes
    -----
    Batches are tuples ``(inputs..., labels)`` (a DataLoader or any iterable); every
    tensor is moved to the network's device. The run-context arguments carry
    ``train_network``, ``network``, ``optimizer``, ``loss_fn``, ``epoch_num``,
    ``batch_num``, ``cur_epoch_num``, ``cur_step_num``, ``cur_step_in_epoch``,
    ``initial_epoch`` (training), ``net_outputs`` (the loss tensor, not synchronised to the host), ``mode``,
    ``train_dataset`` / ``valid_dataset``, ``train_dataset_element`` (the current
    batch's inputs), ``list_callback``, ``batch_size``, ``device_number`` and
    ``parallel_mode`` ("stand_alone", or "data_parallel" under torch.distributed).
    """

    def __init__(
        self,
        network: nn.Module,
        loss_fn: Any = None,
        optimizer: torch.optim.Optimizer | None = None,
        metrics: Mapping[str, Any] | set | None = None,
        eval_network: nn.Module | None = None,
    ) -> None:
        c = "Model"
        check_param("network", network, [InstanceOf(nn.Module)], caller=c)
        check_param("loss_fn", loss_fn, [None, "callable"], caller=c)
        check_param("optimizer", optimizer, [None, InstanceOf(torch.optim.Optimizer)], caller=c)
        check_param("metrics", metrics, [None, InstanceOf(dict, set, list, tuple)], caller=c)
        check_param("eval_network", eval_network, [None, InstanceOf(nn.Module)], caller=c)
        self.network = network
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.metrics = self._check_metrics(metrics)
        self.eval_network = eval_network

    @staticmethod
    def _check_metrics(metrics: Any) -> dict[str, Any]:
        if metrics is None:
            return {}
        if not isinstance(metrics, dict):
            return {str(name): get_metric(name) for name in metrics}
        for name, metric in metrics.items():
            for attr in ("clear", "update", "eval"):
                if not callable(getattr(metric, attr, None)):
                    raise InvalidParameterError(
                        f"The 'metrics[{name!r}]' parameter of Model must be an object with clear(), "
                        f"update() and eval(). Got {metric!r} instead."
                    )
        return dict(metrics)

    # ------------------------------------------------------------------ train
    def _base_params(self, mode: str, dataset: Any, callbacks: _CallbackList) -> CallbackParams:
        parallel_mode, device_number = _parallel_info()
        return CallbackParams(
            train_network=self.network,
            network=self.network,
            optimizer=self.optimizer,
            loss_fn=self.loss_fn,
            mode=mode,
            list_callback=callbacks.callbacks,
            batch_num=_len_or_none(dataset),
            batch_size=_batch_size_of(dataset),
            device_number=device_number,
            parallel_mode=parallel_mode,
            net_outputs=None,
            train_dataset_element=None,
            cur_step_in_epoch=0,
        )

    def _forward_loss(self, network: nn.Module, inputs: tuple, labels: Any) -> tuple[Any, torch.Tensor]:
        if self.loss_fn is None:
            args = inputs if labels is None else (*inputs, labels)
            loss = network(*args)
            return None, loss
        outputs = network(*inputs)
        return outputs, self.loss_fn(outputs, labels)

    def train(
        self,
        epoch: int,
        train_dataset: Iterable[Any],
        callbacks: Callback | list[Callback] | None = None,
        dataset_sink_mode: bool = False,
        initial_epoch: int = 0,
    ) -> None:
        """Train for epochs ``initial_epoch + 1`` to ``epoch``.

        Parameters
        ----------
        epoch : int
            The last epoch number (total epochs, counting those before ``initial_epoch``).
        train_dataset : iterable
            Batches ``(inputs..., labels)``; re-iterated every epoch.
        callbacks : Callback or list of Callback, default=None
            At most one SummaryCollector.
        dataset_sink_mode : bool, default=False
            MindSpore's device-side data sinking has no PyTorch counterpart; True is
            accepted, logged, and trains step by step.
        initial_epoch : int, default=0
            Epochs already done (step and epoch numbers continue from there).
        """
        c = "Model.train"
        check_param("epoch", epoch, [Interval(int, 1, None)], caller=c)
        check_param("dataset_sink_mode", dataset_sink_mode, ["boolean"], caller=c)
        check_param("initial_epoch", initial_epoch, [Interval(int, 0, epoch - 1)], caller=c,
                    hint="initial_epoch counts epochs already trained, so it must be below epoch.")
        if not isinstance(train_dataset, Iterable):
            check_param("train_dataset", train_dataset, [InstanceOf(Iterable, description="an iterable of batches")],
                        caller=c)
        if self.optimizer is None:
            raise InvalidParameterError("Model.train needs an optimizer; Model was built with optimizer=None.")
        if dataset_sink_mode:
            logger.info("dataset_sink_mode=True has no PyTorch counterpart; training step by step.")
        cbs = _CallbackList(callbacks, caller=c)
        cb_params = self._base_params("train", train_dataset, cbs)
        cb_params.update(train_dataset=train_dataset, epoch_num=epoch, cur_epoch_num=initial_epoch,
                         initial_epoch=initial_epoch,
                         cur_step_num=initial_epoch * (cb_params.batch_num or 0))
        run_context = RunContext(cb_params)
        network, optimizer, device = self.network, self.optimizer, _device_of(self.network)
        with cbs:
            network.train()
            cbs.begin(run_context)
            for epoch_index in range(initial_epoch, epoch):
                cb_params.cur_epoch_num = epoch_index + 1
                cb_params.cur_step_in_epoch = 0
                cbs.epoch_begin(run_context)
                for batch in train_dataset:
                    inputs, labels = _split_batch(_to_device(batch, device))
                    if cb_params.batch_size is None and isinstance(inputs[0], torch.Tensor) and inputs[0].ndim:
                        cb_params.batch_size = int(inputs[0].shape[0])
                    cb_params.cur_step_num += 1
                    cb_params.cur_step_in_epoch += 1
                    cb_params.train_dataset_element = inputs
                    cbs.step_begin(run_context)
                    optimizer.zero_grad(set_to_none=True)
                    _, loss = self._forward_loss(network, inputs, labels)
                    loss.backward()
                    optimizer.step()
                    cb_params.net_outputs = loss.detach()
                    cbs.step_end(run_context)
                    if run_context.get_stop_requested():
                        break
                if cb_params.batch_num is None:
                    # An unsized iterable: its first full epoch tells the steps per epoch.
                    cb_params.batch_num = cb_params.cur_step_in_epoch
                cbs.epoch_end(run_context)
                if run_context.get_stop_requested():
                    logger.info("Training stopped on request at epoch %d, step %d.",
                                cb_params.cur_epoch_num, cb_params.cur_step_num)
                    break
            cbs.end(run_context)

    # ------------------------------------------------------------------- eval
    def eval(self, valid_dataset: Iterable[Any], callbacks: Callback | list[Callback] | None = None,
             dataset_sink_mode: bool = False) -> dict[str, Any]:
        """Evaluate the metrics over ``valid_dataset`` and return ``{name: value}``.

        The network runs in eval mode under ``torch.no_grad()`` and is put back in the
        mode it had. Callbacks get ``begin``, ``step_begin``/``step_end`` per batch and
        ``end`` (no epoch hooks), with ``mode="eval"`` and, at ``end``, ``metrics``.
        """
        c = "Model.eval"
        check_param("dataset_sink_mode", dataset_sink_mode, ["boolean"], caller=c)
        if not self.metrics:
            raise InvalidParameterError("Model.eval needs metrics; Model was built with metrics=None.")
        network = self.eval_network if self.eval_network is not None else self.network
        needs_loss = any(getattr(m, "metric_inputs", "pred_label") == "loss" for m in self.metrics.values())
        if needs_loss and self.loss_fn is None and self.eval_network is None:
            raise InvalidParameterError("A Loss metric needs Model(loss_fn=...).")
        cbs = _CallbackList(callbacks, caller=c)
        cb_params = self._base_params("eval", valid_dataset, cbs)
        cb_params.update(valid_dataset=valid_dataset, cur_step_num=0, cur_epoch_num=1, epoch_num=1)
        run_context = RunContext(cb_params)
        for metric in self.metrics.values():
            metric.clear()
        device, was_training = _device_of(network), network.training
        with cbs:
            network.eval()
            try:
                cbs.begin(run_context)
                with torch.no_grad():
                    for batch in valid_dataset:
                        inputs, labels = _split_batch(_to_device(batch, device))
                        cb_params.cur_step_num += 1
                        cb_params.cur_step_in_epoch += 1
                        cb_params.train_dataset_element = inputs
                        cbs.step_begin(run_context)
                        outputs = network(*inputs)
                        loss = self.loss_fn(outputs, labels) if self.loss_fn is not None else None
                        for metric in self.metrics.values():
                            if getattr(metric, "metric_inputs", "pred_label") == "loss":
                                metric.update(loss if loss is not None else outputs)
                            else:
                                metric.update(outputs, labels)
                        cb_params.net_outputs = loss if loss is not None else outputs
                        cbs.step_end(run_context)
                        if run_context.get_stop_requested():
                            break
                cb_params.batch_num = cb_params.batch_num or cb_params.cur_step_num
                cb_params.metrics = {name: m.eval() for name, m in self.metrics.items()}
                cbs.end(run_context)
            finally:
                network.train(was_training)
        return dict(cb_params.metrics)

    def predict(self, *predict_data: Any) -> Any:
        """Run the network in eval mode without gradients on ``predict_data``."""
        network, device = self.network, _device_of(self.network)
        was_training = network.training
        network.eval()
        try:
            with torch.no_grad():
                return network(*_to_device(predict_data, device))
        finally:
            network.train(was_training)
