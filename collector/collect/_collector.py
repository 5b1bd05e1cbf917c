"""``SummaryCollector``: the callback that collects summaries, lineage and landscape checkpoints."""

from __future__ import annotations

import importlib.util
import logging
import math
import numbers
import os
import re
import time
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from collector.collect._dataset_graph import dataset_graph
from collector.collect._landscape import LandscapeCollector
from collector.collect._params import (
    check_custom_lineage,
    check_export_options,
    check_specified,
)
from collector.collect._plain_loop import PlainLoopMixin
from collector.collect._plan import collection_kind, tensor_collect_range
from collector.common import (
    InstanceOf,
    Interval,
    Options,
    check_directory,
    check_param,
    unwrap_module,
)
from collector.lineage import _build as lineage
from collector.lineage import checkpoint_path
from collector.summary import SummaryRecord, discard_pending
from collector.train import Callback, CallbackParams, RunContext, run_network
from collector.trajectory import CHECKPOINT_FORMATS, CKPT_DIR

__all__ = ["SummaryCollector"]

logger = logging.getLogger(__name__)

_HISTOGRAM_DEFAULT_COUNT = 5
_FLUSH_EVERY_S = 10.0  # at epoch ends, so MindInsight sees a running job's data


def _first_output(outputs: Any) -> Any:
    return outputs[0] if isinstance(outputs, (tuple, list)) else outputs


def _loss_value(loss: Any) -> float:
    """``float(loss.float().mean())``: the loss as a number, its elements averaged in float32."""
    if not isinstance(loss, torch.Tensor):
        return float(loss)
    if loss.numel() == 1 and loss.dtype in (torch.float32, torch.float16, torch.bfloat16):
        # One element that float32 holds exactly: the mean is the element (no kernels to run).
        return loss.item()
    return float(loss.detach().float().mean())


def _tensors_only(plugin: str) -> bool:
    return plugin == "tensor"


def _no_tensors(plugin: str) -> bool:
    return plugin != "tensor"


#: The ``plugin_filter`` of ``SummaryRecord.record`` for each collection kind.
_PLUGIN_FILTERS = {"all": None, "tensor": _tensors_only, "other": _no_tensors}


class SummaryCollector(PlainLoopMixin, Callback):
    """Collect loss, histograms, input images, lineage and landscape checkpoints while training.

    Use it as a callback of :meth:`Model.train` / :meth:`Model.eval`, or drive it from a
    plain PyTorch loop with :meth:`begin_train`, :meth:`step`, :meth:`epoch_end` and
    :meth:`end` (see Examples). Summaries go to ``summary_dir`` in MindSpore's format
    (tags ``loss/auto``, ``{parameter}/auto``, ``input_data/auto``), so MindInsight shows
    the run like a MindSpore one.

    Read more in the user guide: [Collecting](../collecting.md).

    Parameters
    ----------
    summary_dir : str or os.PathLike
        Where summaries (and ``ckpt_dir/`` for landscapes) go; created if missing.
    collect_freq : int, default=10
        Collect at every step whose number is a multiple of this; the first step is
        always collected.
    num_process : int, default=32
        Accepted for MindSpore compatibility; summaries are encoded and written in
        batches by :class:`SummaryRecord` (one background thread, and ``flush``/``close``).
    collect_specified_data : dict, default=None
        Which data to collect: ``collect_metric``, ``collect_graph``,
        ``collect_train_lineage``, ``collect_eval_lineage``, ``collect_input_data``,
        ``collect_dataset_graph`` (bools, default True; the graph is the train network's,
        written once at the first step by :class:`SummaryRecord`), ``histogram_regular`` (regex
        matched with ``re.match`` against parameter names; None: the first five
        parameters) and ``collect_landscape`` (dict, default None: no landscape
        checkpoints; keys ``landscape_size`` 3..256 (40), ``unit`` "step"/"epoch"
        ("step"), ``create_landscape`` {"train": bool, "result": bool} (both True),
        ``num_samples`` >= 1 (2048, or the training dataset's size when smaller: see
        Notes) and the required ``intervals``, a list of lists of at least three step or
        epoch numbers).
    keep_default_action : bool, default=True
        True: unspecified data are collected by default; False: only what
        ``collect_specified_data`` names.
    custom_lineage_data : dict, default=None
        str keys to str, int or float values, shown on MindInsight's lineage page.
    collect_tensor_freq : int, default=None
        Like ``collect_freq`` for tensor values (added with :meth:`add_value`). None: at
        most 20 tensor collections, never more than the other collections.
    max_file_size : int, default=None
        Largest size in bytes of each summary file; None: no limit.
    export_options : dict, default=None
        ``{"tensor_format": "npy"}`` also exports tensors as .npy files.
    tensorboard_dir : str or os.PathLike, default=None
        Also write the summaries as TensorBoard events in this directory while training
        (``tensorboard --logdir`` shows them live): scalars, histograms, images, tensors,
        and the lineage as hyper-parameters. Needs the ``tensorboard`` package. Not
        MindSpore's: a keyword of ours.
    checkpoint_format : {"torch", "safetensors"}, default="torch"
        The file format of ``collect_landscape``'s interval checkpoints: ``torch.save``'s
        (``.pt``) or safetensors (``.safetensors``, the format of Hugging Face's
        ``model.safetensors``: no pickle; reading it back needs the ``safetensors``
        package). ``train_metadata.json`` records the file names either way. Not
        MindSpore's: a keyword of ours.

    Notes
    -----
    Steps are global step numbers from 1 (``cur_step_num``), epochs count from 1. With
    ``collect_landscape``, the network's state dict is saved at every step (``unit``
    "step") or epoch end ("epoch") named in an interval, as
    ``ckpt_dir/{NetworkClass}_{n}_{unit}.pt`` (``.safetensors``), the initial weights
    before the first step as ``{NetworkClass}_0_{unit}.pt`` (in no interval), and
    ``ckpt_dir/train_metadata.json`` is written when training ends -- also when it stops
    early, then with the complete intervals only. ``num_samples`` left at its default is
    recorded as at most the training dataset's size (``len`` of the loader's dataset). The
    state is copied on the training thread and written by a background thread; for a
    network over 128 MB the next copy waits until the previous one is written, so memory
    holds the network and one copy.
    Only one SummaryCollector may be in a callback list.

    Examples
    --------
    With :class:`Model`::

        model.train(5, loader, callbacks=[SummaryCollector("runs/a", collect_freq=1)])

    In a plain PyTorch loop::

        with SummaryCollector("runs/b", collect_specified_data={"collect_landscape": {
                "unit": "epoch", "intervals": [[1, 2, 3, 4, 5]]}}) as sc:
            sc.begin_train(network=net, optimizer=opt, loss_fn=loss_fn,
                           train_dataset=loader, epoch_num=5)
            for epoch in range(5):
                for x, y in loader:
                    opt.zero_grad()
                    loss = loss_fn(net(x), y)
                    loss.backward()
                    opt.step()
                    sc.step(loss, inputs=x)   # after optimizer.step()
                sc.epoch_end()
            sc.end()
    """

    _is_summary_collector = True

    def __init__(
        self,
        summary_dir: str | os.PathLike,
        collect_freq: int = 10,
        num_process: int = 32,
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
        c = "SummaryCollector"
        check_param("summary_dir", summary_dir, ["path"], caller=c)
        if isinstance(summary_dir, str) and not summary_dir:
            check_param("summary_dir", summary_dir, ["nonempty_str"], caller=c)
        check_param("collect_freq", collect_freq, [Interval(int, 1, None)], caller=c)
        check_param("num_process", num_process, [Interval(int, 1, None)], caller=c)
        check_param("keep_default_action", keep_default_action, ["boolean"], caller=c)
        self._specified = check_specified(collect_specified_data, keep_default_action, c)
        self._custom_lineage = check_custom_lineage(custom_lineage_data, c)
        check_param("collect_tensor_freq", collect_tensor_freq, [None, Interval(int, 1, None)], caller=c)
        check_param("max_file_size", max_file_size, [None, Interval(int, 0, None)], caller=c)
        self._export_options = check_export_options(export_options, c)
        check_param("tensorboard_dir", tensorboard_dir, [None, "path"], caller=c)
        if tensorboard_dir is not None and importlib.util.find_spec("tensorboard") is None:
            raise ImportError(f"The 'tensorboard_dir' parameter of {c} needs the 'tensorboard' package, which is not "
                              "installed. HINT: pip install tensorboard, or leave tensorboard_dir None.")
        check_param("checkpoint_format", checkpoint_format, [Options(CHECKPOINT_FORMATS)], caller=c)
        if checkpoint_format == "safetensors" and importlib.util.find_spec("safetensors") is None:
            raise ImportError(f"The 'checkpoint_format' parameter of {c} is 'safetensors', and reading such "
                              "checkpoints back needs the 'safetensors' package, which is not installed. HINT: pip "
                              "install safetensors, or leave checkpoint_format='torch'.")
        check_directory("summary_dir", summary_dir, caller=c,
                        hint="pass the folder the summaries (and ckpt_dir/) go to; a file of that name is in the way.")
        # Everything is valid: only now touch the file system.
        self._summary_dir = os.path.realpath(os.fspath(summary_dir))
        os.makedirs(self._summary_dir, exist_ok=True)
        self._collect_freq = collect_freq
        self._num_process = num_process
        self._keep_default_action = keep_default_action
        self._collect_tensor_freq = collect_tensor_freq
        self._max_file_size = max_file_size
        self._tensorboard_dir = None if tensorboard_dir is None else os.path.realpath(os.fspath(tensorboard_dir))
        self._record: Any = None  # the SummaryRecord while a run is open (see _open)
        self._landscape: LandscapeCollector | None = None
        if self._specified["collect_landscape"] is not None:
            given = (collect_specified_data or {})["collect_landscape"]
            self._landscape = LandscapeCollector(os.path.join(self._summary_dir, CKPT_DIR),
                                                 self._specified["collect_landscape"], checkpoint_format,
                                                 num_samples_default="num_samples" not in given)
        self._user_values: dict[tuple[str, str], Any] = {}
        self._plain: RunContext | None = None
        self._reset_run()

    # ----------------------------------------------------------- properties
    @property
    def summary_dir(self) -> str:
        """The absolute summary directory."""
        return self._summary_dir

    @property
    def collect_specified_data(self) -> dict[str, Any]:
        """What is collected, defaults filled in."""
        return {k: v for k, v in self._specified.items() if not k.startswith("_")}

    @property
    def summary_record(self) -> SummaryRecord | None:
        """The open :class:`SummaryRecord` (None outside a run)."""
        return self._record

    # ------------------------------------------------------ resources
    def _reset_run(self) -> None:
        self._first_step = True
        self._tensor_range: range | None = None
        # Steps after _last_step and before _next_event collect and save nothing (see step_end).
        self._last_step: int | None = None
        self._next_event: int | float = 0
        self._hist_params: list[tuple[str, nn.Parameter]] | None = None
        self._initial_lr: float | None = None
        self._input_warned = False
        self._train_cb_params: CallbackParams | None = None
        self._train_ended = True
        self._last_flush = time.monotonic()
        self._logged_loss: float | None = None  # the last log_loss value

    def _open(self) -> None:
        if self._record is None:
            self._record = SummaryRecord(self._summary_dir, max_file_size=self._max_file_size,
                                         export_options=self._export_options, tensorboard_dir=self._tensorboard_dir)

    def close(self) -> None:
        """Wait for pending checkpoint writes and close the summary files."""
        record, self._record = self._record, None
        try:
            if self._landscape is not None:
                self._landscape.shutdown()
        finally:
            if record is not None:
                record.close()

    def __enter__(self) -> SummaryCollector:
        self._open()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if not self._train_ended and self._train_cb_params is not None:
                # Training raised (or was interrupted): keep what is usable.
                logger.warning("Training did not finish (%s); writing what was collected.",
                               exc_type.__name__ if exc_type else "end() not called")
                self._finish_landscape(self._train_cb_params)
                self._train_ended = True
        finally:
            self.close()

    def add_value(self, plugin: str, name: str, value: Any) -> None:
        """Buffer a value for this step, recorded if the step is collected (like a summary operator).

        ``plugin`` "tensor" values follow ``collect_tensor_freq``; "scalar", "image" and
        "histogram" values follow ``collect_freq``. Values of a step that is not
        collected are dropped at its ``step_end``.
        """
        check_param("plugin", plugin, [Options(("scalar", "image", "tensor", "histogram"))],
                    caller="SummaryCollector.add_value")
        check_param("name", name, ["nonempty_str"], caller="SummaryCollector.add_value")
        self._user_values[(plugin, name)] = value

    def log_loss(self, loss: Any, step: int | None = None) -> None:
        """Record ``loss/auto`` at ``step`` now, for a loss reported apart from the step.

        For training loops that report their loss on their own schedule (a Hugging Face
        ``Trainer`` logs the mean loss every ``logging_steps``): the loss is recorded at
        once, as its own event (``collect_freq`` does not apply), if ``collect_metric`` is
        on, and the last one logged is the final loss of the train lineage when the steps
        gave none.

        Parameters
        ----------
        loss : float or torch.Tensor
            The loss (a tensor is averaged in float32).
        step : int, default=None
            The global step it belongs to; None: the last step of the plain loop.
        """
        c = "SummaryCollector.log_loss"
        check_param("step", step, [None, Interval(int, 0, None)], caller=c)
        check_param("loss", loss, [InstanceOf(numbers.Real, description="a real number"), torch.Tensor], caller=c)
        if step is None:
            step = int(self._plain.original_args().cur_step_num) if self._plain is not None else 0
        self._logged_loss = _loss_value(loss)
        if not self._specified["collect_metric"]:
            return
        if self._record is None:
            self._open()
        self._record.add_value("scalar", "loss/auto", self._logged_loss)
        self._record.record(int(step), plugin_filter=_no_tensors)

    # ------------------------------------------------------------ hooks
    def begin(self, run_context: RunContext) -> None:
        """Open the summary files and prepare the collection plan of this run."""
        self._open()
        cb_params = run_context.original_args()
        mode = cb_params.get("mode", "train")
        self._record.set_mode(mode)
        if mode != "train":
            return
        self._reset_run()
        self._train_ended = False
        self._train_cb_params = cb_params
        optimizer = cb_params.get("optimizer")
        if optimizer is not None and getattr(optimizer, "param_groups", None):
            self._initial_lr = float(optimizer.param_groups[0]["lr"])
        if self._landscape is not None:
            self._landscape.reset()
            # A resumed run (Model.train(initial_epoch=...), begin_train(initial_step=...), an
            # integration's resumed fit) keeps the checkpoints its first part saved.
            done = (int(cb_params.get("cur_step_num") or 0) if self._landscape.unit == "step"
                    else int(cb_params.get("initial_epoch") or 0))
            network = run_network(cb_params)
            if done > 0 and network is not None:
                self._landscape.adopt_saved(network, done)
            elif network is not None:
                # before the first step: the run's true start (landscape compare --centre start)
                self._landscape.save_initial(network)

    def _total_steps(self, cb_params: Mapping[str, Any]) -> int | None:
        epochs, batches = cb_params.get("epoch_num"), cb_params.get("batch_num")
        return int(epochs) * int(batches) if epochs and batches else None

    def step_end(self, run_context: RunContext) -> None:
        """Collect at the steps ``collect_freq`` selects; save landscape checkpoints (unit step)."""
        cb_params = run_context.original_args()
        step = cb_params.get("cur_step_num")
        record = self._record
        # Most steps have nothing to do: return after a few comparisons (this runs at every step).
        if (self._last_step is not None and type(step) is int and self._last_step < step < self._next_event
                and not self._user_values and record is not None and not record.has_operator_values
                and not record.closed and cb_params.get("mode", "train") == "train"):
            self._last_step = step
            return
        if cb_params.get("mode", "train") != "train":
            return
        if self._record is None:
            self._open()
        step = int(cb_params.cur_step_num)
        if self._first_step:
            self._tensor_range = tensor_collect_range(self._total_steps(cb_params), self._collect_freq,
                                                      self._collect_tensor_freq)
            self._record_first(cb_params)
        kind = collection_kind(step, self._first_step, self._collect_freq, self._tensor_range)
        self._first_step = False
        if kind is not None:
            self._collect(cb_params, kind)
        elif self._record.has_operator_values or self._record.closed:
            # Summary operators buffer into the open record (one may be open per process, so
            # normally this one); a step that is not collected must not leak its values into
            # the next collected one. With nothing buffered there is nothing to discard.
            discard_pending()
        if self._user_values:
            self._user_values.clear()
        if self._landscape is not None and self._landscape.unit == "step":
            self._landscape.maybe_save(run_network(cb_params), step)
        self._last_step = step
        self._next_event = self._next_event_after(step)

    def _next_event_after(self, step: int) -> int | float:
        """The first step after ``step`` that collects something or saves a landscape checkpoint."""
        f = self._collect_freq
        candidates: list[int | float] = [(step // f + 1) * f]
        r = self._tensor_range
        if r is not None and len(r):
            i = max(0, (step - r.start) // r.step + 1)
            candidates.append(r[i] if i < len(r) else math.inf)
        if self._landscape is not None and self._landscape.unit == "step":
            candidates.append(self._landscape.next_wanted(step))
        return min(candidates)

    def epoch_end(self, run_context: RunContext | None = None) -> None:
        """Save a landscape checkpoint (unit epoch) and flush; in a plain loop, close the epoch."""
        if run_context is None:
            return self._plain_epoch_end()
        cb_params = run_context.original_args()
        if cb_params.get("mode", "train") != "train":
            return None
        if self._landscape is not None and self._landscape.unit == "epoch":
            self._landscape.maybe_save(run_network(cb_params),
                                       int(cb_params.cur_epoch_num))
        if self._record is not None and time.monotonic() - self._last_flush >= _FLUSH_EVERY_S:
            # Flushing writes the batched records and waits; once per epoch is too often for short epochs.
            self._record.flush()
            self._last_flush = time.monotonic()
        return None

    def end(self, run_context: RunContext | None = None) -> None:
        """Record the train or eval lineage and write ``train_metadata.json``; in a plain loop also close."""
        if run_context is None:
            return self._plain_end()
        cb_params = run_context.original_args()
        if self._record is None:
            self._open()
        step = int(cb_params.get("cur_step_num") or 0)
        train = cb_params.get("mode", "train") == "train"
        if train and self._landscape is not None:
            self._landscape.write_pending()  # written and hashed on the writer thread while the lineage is built
        if train and self._specified["collect_train_lineage"]:
            self._record.add_value("train_lineage", "train_lineage", lineage.train_lineage(
                cb_params, learning_rate=self._initial_lr, ckpt_path=checkpoint_path(cb_params)))
        elif not train and self._specified["collect_eval_lineage"]:
            self._record.add_value("eval_lineage", "eval_lineage", lineage.eval_lineage(cb_params))
        self._record.record(step)
        if train:
            self._finish_landscape(cb_params)
            self._train_ended = True
        self._record.flush()
        return None

    # ------------------------------------------------------------ collection
    def _record_first(self, cb_params: Mapping[str, Any]) -> None:
        """Once per run, before the first step's values: dataset graph and custom lineage."""
        if self._specified["collect_dataset_graph"] and cb_params.get("train_dataset") is not None:
            self._record.add_value("dataset_graph", "train_dataset", dataset_graph(cb_params["train_dataset"]))
        if self._custom_lineage:
            self._record.add_value("custom_lineage_data", "custom_lineage_data",
                                   lineage.custom_lineage(self._custom_lineage))

    def _collect(self, cb_params: Mapping[str, Any], kind: str) -> None:
        record = self._record
        if kind != "tensor":
            if self._specified["collect_input_data"]:
                self._collect_input(cb_params)
            if self._specified["collect_metric"] and cb_params.get("net_outputs") is not None:
                loss = _first_output(cb_params["net_outputs"])
                # The only host sync SummaryCollector makes, and only at collection steps.
                record.add_value("scalar", "loss/auto", _loss_value(loss))
            if self._specified["_histograms"]:
                record.add_histograms(self._histogram_params(cb_params))
        for (plugin, name), value in self._user_values.items():
            if (plugin == "tensor") == (kind == "tensor") or kind == "all":
                record.add_value(plugin, name, value)
        # The graph is built once, by the first record that gets a network.
        network = (cb_params.get("train_network") if self._specified["collect_graph"] and not record.graph_written
                   else None)
        record.record(int(cb_params["cur_step_num"]), train_network=unwrap_module(network) if network is not None
                      else None, plugin_filter=_PLUGIN_FILTERS[kind])

    def _histogram_params(self, cb_params: Mapping[str, Any]) -> list[tuple[str, nn.Parameter]]:
        """``(tag, parameter)`` of the parameters whose histograms are collected (chosen once per run)."""
        if self._hist_params is None:
            network = run_network(cb_params)
            named = list(unwrap_module(network).named_parameters()) if network is not None else []
            regular = self._specified["histogram_regular"]
            if regular is None:
                chosen = named[:_HISTOGRAM_DEFAULT_COUNT]
            else:
                chosen = [(n, p) for n, p in named if re.match(regular, n)]
                if not chosen:
                    logger.warning("histogram_regular %r matches no parameter name; no histogram collected.",
                                   regular)
            self._hist_params = [(f"{n}/auto", p) for n, p in chosen]
        return self._hist_params

    def _collect_input(self, cb_params: Mapping[str, Any]) -> None:
        element = cb_params.get("train_dataset_element")
        if element is None:
            return
        first = element[0] if isinstance(element, (tuple, list)) else element
        if isinstance(first, torch.Tensor) and first.ndim == 4 and first.shape[1] in (1, 3):
            self._record.add_value("image", "input_data/auto", first.detach())
        elif not self._input_warned:
            self._input_warned = True
            shape = tuple(first.shape) if isinstance(first, torch.Tensor) else type(first).__name__
            logger.info("collect_input_data: the first input %s is not an NCHW image with 1 or 3 channels; "
                        "input_data/auto is not collected.", shape)

    def _finish_landscape(self, cb_params: Mapping[str, Any]) -> None:
        if self._landscape is not None and not self._landscape.metadata_written:
            self._landscape.write_metadata(cb_params.get("batch_num"), cb_params.get("train_dataset"))
