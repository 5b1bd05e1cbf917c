"""``TrainLineage`` / ``EvalLineage`` callbacks and the lineage exceptions (``mindinsight.lineagemgr``).

The callbacks write LineageEvents (see ``shared/spec/summary-format.md``) either through
a :class:`~collector.SummaryRecord` (its ``..._lineage`` file) or, given a directory, into
lineage files of their own (``lineage.out.events.summary.{seconds}.{host}_lineage``, one
per training or evaluation, written at ``end``), so they can run beside a SummaryCollector,
which owns the one SummaryRecord a process may have open. The message content is built by
``collector.lineage._build``, the same code SummaryCollector uses.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections.abc import Mapping
from typing import Any

import torch

from collector import proto
from collector.common import (
    InstanceOf,
    InvalidParameterError,
    Predicate,
    check_param,
)
from collector.lineage import _build as build
from collector.summary import VERSION, EventFile, SummaryRecord, lineage_filename
from collector.train import Callback, RunContext

__all__ = [
    "checkpoint_path",
    "LineageError",
    "MindInsightException",
    "LineageParamTypeError",
    "LineageParamValueError",
    "LineageParamSummaryPathError",
    "LineageSearchConditionParamError",
    "LineageFileNotFoundError",
    "LineageQuerySummaryDataError",
    "LineageSummaryParseException",
    "LineageLogError",
    "TrainLineage",
    "EvalLineage",
]

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------- errors
class LineageError(Exception):
    """Base class of every lineage error (MindInsight's ``MindInsightException``)."""


#: The seed's name for the base class, kept so code written for MindInsight catches the same errors.
MindInsightException = LineageError


class LineageParamTypeError(LineageError, InvalidParameterError):
    """A lineage parameter has the wrong type (also an ``InvalidParameterError``)."""


class LineageParamValueError(LineageError, InvalidParameterError):
    """A lineage parameter has a wrong value (also an ``InvalidParameterError``)."""


class LineageParamSummaryPathError(LineageParamValueError):
    """``summary_dir`` / ``summary_base_dir`` is not a usable directory path."""


class LineageSearchConditionParamError(LineageError, InvalidParameterError):
    """``search_condition`` of :func:`filter_summary_lineage` is invalid."""


class LineageFileNotFoundError(LineageError, FileNotFoundError):
    """No lineage file (``*.summary.<seconds>.*_lineage``) where one was expected."""


class LineageQuerySummaryDataError(LineageError):
    """Lineage files exist but reading or querying them failed."""


class LineageSummaryParseException(LineageError):
    """A run's lineage files hold no train, evaluation or dataset-graph lineage."""


class LineageLogError(LineageError, RuntimeError):
    """Writing lineage information failed."""


def _checked(name: str, value: Any, constraints: list[Any], caller: str) -> Any:
    """``check_param`` raising :class:`LineageParamTypeError` (still an ``InvalidParameterError``)."""
    try:
        return check_param(name, value, constraints, caller=caller)
    except InvalidParameterError as exc:
        raise LineageParamTypeError(str(exc)) from None


# ------------------------------------------------------------------------------------- callbacks
_TIMESTAMP = re.compile(r"summary\.(\d+)")
_LINEAGE_FIELD = {"train_lineage": "train_lineage", "eval_lineage": "evaluation_lineage",
                  "dataset_graph": "dataset_graph"}


def _version_payload() -> bytes:
    return proto.LineageEvent(wall_time=time.time(), step=0, version=VERSION).SerializeToString()


class _LineageCallback(Callback):
    """Shared part: where lineage goes, and the ``raise_exception`` policy."""

    _caller = "Lineage"

    def __init__(self, summary_record: SummaryRecord | str | os.PathLike, raise_exception: bool = False) -> None:
        c = self._caller
        _checked("raise_exception", raise_exception, ["boolean"], c)
        _checked("summary_record", summary_record,
                 [InstanceOf(SummaryRecord, description="a collector.SummaryRecord"),
                  Predicate(lambda v: isinstance(v, (str, os.PathLike)) and len(os.fspath(v)) > 0,
                            "a non-empty directory path (str or os.PathLike)")], c)
        self.raise_exception = raise_exception
        self._record: SummaryRecord | None = None
        if isinstance(summary_record, SummaryRecord):
            self._record = summary_record
            self.lineage_log_dir = summary_record.log_dir
        else:
            path = os.path.realpath(os.fspath(summary_record))
            if os.path.exists(path) and not os.path.isdir(path):
                raise LineageParamSummaryPathError(
                    f"The 'summary_record' parameter of {c} must be a SummaryRecord or a directory path. "
                    f"Got {os.fspath(summary_record)!r}, an existing file, instead."
                )
            self.lineage_log_dir = path

    # -- writing
    def _write(self, messages: list[tuple[str, Any]], step: int) -> None:
        """Write lineage messages now; :class:`LineageLogError` when they cannot be written.

        Through a SummaryRecord: ``add_value`` and ``record(step)``. To a directory: a new
        lineage file holding just these events, named with a timestamp later than every
        summary file already there, so readers (MindInsight included), which fold lineage
        files in timestamp order, apply it after what a SummaryCollector wrote before it.
        """
        plugin = messages[-1][0]
        try:
            if self._record is not None:
                for name, message in messages:
                    self._record.add_value(name, name, message)
                ok = self._record.record(step)
                self._record.flush()
                if not ok:
                    raise LineageLogError(f"{self._caller}: the SummaryRecord did not write the {plugin} "
                                          "(is it closed?).")
                return
            file = self._new_file()
            try:
                for name, message in messages:
                    event = proto.LineageEvent(wall_time=time.time(), step=int(step))
                    getattr(event, _LINEAGE_FIELD[name]).CopyFrom(message)
                    file.write(event.SerializeToString())
            finally:
                file.close()
        except LineageLogError:
            raise
        except (OSError, RuntimeError, ValueError, TypeError) as exc:
            raise LineageLogError(f"{self._caller}: writing the {plugin} lineage to "
                                  f"{self.lineage_log_dir!r} failed: {exc}") from exc

    def _new_file(self) -> EventFile:
        os.makedirs(self.lineage_log_dir, exist_ok=True)
        seconds = int(time.time())
        stamps = [int(m.group(1)) for n in os.listdir(self.lineage_log_dir) if (m := _TIMESTAMP.search(n))]
        seconds = max([seconds] + [t + 1 for t in stamps])
        # Prefix "lineage": never the name a SummaryRecord in the same folder has chosen.
        name = lineage_filename("lineage", seconds, socket.gethostname() or "localhost")
        return EventFile(os.path.join(self.lineage_log_dir, name), None, _version_payload)

    def _handle(self, hook: str, func: Any, run_context: Any) -> None:
        """Run a hook; log errors, and re-raise them when ``raise_exception`` is True."""
        try:
            if not isinstance(run_context, RunContext):
                raise LineageParamTypeError(
                    f"The 'run_context' parameter of {self._caller}.{hook} must be a collector.RunContext. "
                    f"Got {type(run_context).__name__} instead."
                )
            func(run_context.original_args())
        except Exception as exc:
            logger.error("%s.%s: %s", self._caller, hook, exc)
            if self.raise_exception:
                raise


def _check_args(args: Mapping[str, Any], caller: str, *, train: bool) -> None:
    """The run-context arguments a lineage needs, with the type each must have."""
    module = InstanceOf(torch.nn.Module, description="a torch.nn.Module")
    if train:
        network = args.get("network") if args.get("network") is not None else args.get("train_network")
        _checked("run_context.original_args()['train_network']", network, [module], caller)
        _checked("run_context.original_args()['optimizer']", args.get("optimizer"),
                 [None, InstanceOf(torch.optim.Optimizer, description="a torch.optim.Optimizer")], caller)
        _checked("run_context.original_args()['epoch_num']", args.get("epoch_num"),
                 [Predicate(lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                            "an int >= 1")], caller)
    else:
        _checked("run_context.original_args()['metrics']", args.get("metrics"),
                 [InstanceOf(Mapping, description="a dict of metric name to value")], caller)


def _learning_rate(optimizer: Any) -> float | None:
    groups = getattr(optimizer, "param_groups", None)
    if groups and groups[0].get("lr") is not None:
        lr = groups[0]["lr"]
        return float(lr.item() if isinstance(lr, torch.Tensor) else lr)
    return None


def checkpoint_path(args: Mapping[str, Any]) -> str | None:
    """The latest checkpoint a ModelCheckpoint (anything with ``latest_ckpt_file_name``) wrote."""
    for cb in args.get("list_callback") or []:
        path = getattr(cb, "latest_ckpt_file_name", None)
        if path:
            return os.path.realpath(path)
    return None


class TrainLineage(_LineageCallback):
    """Collect the lineage of a training job: dataset graph at ``begin``, train lineage at ``end``.

    Recorded: optimizer class and initial learning rate, loss function class, epochs,
    batch size, device count, parallel mode, train dataset path (when the dataset has
    one) and size, network class, final loss, model size in bytes, and the checkpoint
    path when a ModelCheckpoint ran (``{"ckpt": path}`` as MindSpore writes it).

    Parameters
    ----------
    summary_record : SummaryRecord or str or os.PathLike
        Write through this SummaryRecord (its lineage file), or into a lineage file of
        the callback's own in this directory (created if missing). Use a directory
        when a SummaryCollector runs too: a process may have one SummaryRecord open.
    raise_exception : bool, default=False
        If True, errors in ``begin``/``end`` are raised; if False they are logged and
        training continues.

    Raises
    ------
    MindInsightException
        (:class:`LineageParamTypeError`) if a parameter is invalid; always raised.
    LineageLogError
        If recording lineage fails (from ``end``, only with ``raise_exception=True``).

    Examples
    --------
    >>> import tempfile
    >>> import torch
    >>> from collector import Model
    >>> from collector.lineage import TrainLineage
    >>> net = torch.nn.Linear(4, 2)
    >>> model = Model(net, torch.nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1))
    >>> data = [(torch.randn(8, 4), torch.randint(0, 2, (8,)))] * 3
    >>> model.train(2, data, callbacks=[TrainLineage(tempfile.mkdtemp())])
    """

    _caller = "TrainLineage"

    def __init__(self, summary_record: SummaryRecord | str | os.PathLike, raise_exception: bool = False) -> None:
        super().__init__(summary_record, raise_exception)
        self.initial_learning_rate: float | None = None
        self._graph: Any = None  # the dataset graph, held until end in directory mode

    def begin(self, run_context: RunContext) -> None:
        """Remember the initial learning rate and record the train dataset graph."""
        self._handle("begin", self._begin, run_context)

    def end(self, run_context: RunContext) -> None:
        """Record the train lineage when training ends."""
        self._handle("end", self._end, run_context)

    def _begin(self, args: Mapping[str, Any]) -> None:
        self.initial_learning_rate = _learning_rate(args.get("optimizer"))
        dataset = args.get("train_dataset")
        self._graph = build.dataset_graph(dataset) if dataset is not None else None
        if self._graph is not None and self._record is not None:
            self._write([("dataset_graph", self._graph)], int(args.get("cur_step_num") or 0))
            self._graph = None

    def _end(self, args: Mapping[str, Any]) -> None:
        _check_args(args, self._caller, train=True)
        lr = self.initial_learning_rate if self.initial_learning_rate is not None else _learning_rate(
            args.get("optimizer"))
        message = build.train_lineage(args, learning_rate=lr, ckpt_path=checkpoint_path(args))
        # In directory mode the dataset graph taken at begin goes into the same file as the train lineage.
        graph, self._graph = self._graph, None
        self._write(([("dataset_graph", graph)] if graph is not None else []) + [("train_lineage", message)],
                    int(args.get("cur_step_num") or 0))
        logger.info("TrainLineage: train lineage recorded in %s", self.lineage_log_dir)


class EvalLineage(_LineageCallback):
    """Collect the lineage of an evaluation: metrics (as JSON), valid dataset path and size.

    Parameters
    ----------
    summary_record : SummaryRecord or str or os.PathLike
        As for :class:`TrainLineage`.
    raise_exception : bool, default=False
        If True, errors in ``end`` are raised; if False they are logged.

    Raises
    ------
    MindInsightException
        (:class:`LineageParamTypeError`) if a parameter is invalid.
    LineageLogError
        If recording lineage fails (only with ``raise_exception=True``).
    """

    _caller = "EvalLineage"

    def end(self, run_context: RunContext) -> None:
        """Record the evaluation lineage when the evaluation ends."""
        self._handle("end", self._end, run_context)

    def _end(self, args: Mapping[str, Any]) -> None:
        _check_args(args, self._caller, train=False)
        self._write([("eval_lineage", build.eval_lineage(args))], int(args.get("cur_step_num") or 0))
        logger.info("EvalLineage: evaluation lineage recorded in %s", self.lineage_log_dir)
