"""``LightningCollector``: SummaryCollector as a PyTorch Lightning callback."""

from __future__ import annotations

import logging
import math
from typing import Any

import torch

try:
    import lightning.pytorch as pl
except ImportError:  # the standalone package, where only it is installed
    try:
        import pytorch_lightning as pl
    except ImportError as exc:  # pragma: no cover - exercised only without Lightning
        raise ImportError("LightningCollector needs PyTorch Lightning, which is not installed. "
                          "HINT: pip install lightning") from exc

from collector.integrations._common import CollectorAdapter, first_tensor, scalar_metrics

__all__ = ["LightningCollector"]

logger = logging.getLogger(__name__)


class LightningCollector(CollectorAdapter, pl.Callback):
    """Collect what :class:`~collector.SummaryCollector` collects from ``Trainer.fit``.

    Loss, parameter histograms, input images, the network's graph, train lineage, eval
    lineage from the validation metrics, and with ``collect_landscape`` the interval
    checkpoints and ``ckpt_dir/train_metadata.json`` that
    :class:`~landscape.SummaryLandscape` reads: the files a SummaryCollector writes,
    in the same format (MindInsight reads them). The hooks only translate Lightning's
    loop into SummaryCollector's plain-loop calls.

    Parameters
    ----------
    summary_dir : str or os.PathLike
        Where summaries and ``ckpt_dir/`` go.
    collect_freq, collect_specified_data, keep_default_action, custom_lineage_data, \
collect_tensor_freq, max_file_size, export_options, tensorboard_dir, checkpoint_format
        As for :class:`~collector.SummaryCollector` (validated when the callback is
        made).

    Notes
    -----
    - A *step* is an optimizer step (``trainer.global_step``), as in Lightning: with
      ``accumulate_grad_batches=k`` one step spans k batches and its loss is their
      mean. Steps and epochs are numbered from 1; ``collect_landscape`` intervals and
      ``collect_freq`` count these steps (``unit="step"``) or completed epochs
      (``unit="epoch"``; an epoch cut short by ``max_steps`` saves no checkpoint).
    - The checkpoints hold the LightningModule's ``state_dict``, named after its class
      (``ckpt_dir/{LitModel}_{n}_{unit}.pt``): for landscapes, ``callback_fn`` returns a
      fresh instance of the same LightningModule as the network (its ``forward`` is
      what gets evaluated).
    - Under DDP (or any multi-process strategy) only global rank 0 writes; the loss is
      rank 0's. Other processes never create a file or folder.
    - Validation (not the sanity check) records an eval lineage with the scalar
      ``trainer.callback_metrics``; so do ``trainer.validate`` and ``trainer.test``.
    - A fit resumed with ``ckpt_path=`` continues the step and epoch numbers where the
      checkpoint left them, and the interval checkpoints saved before count for the
      intervals. A fit that raises (or is interrupted) still writes
      ``train_metadata.json`` with the complete intervals.
    - The loss-function class in the lineage is the module's ``loss_fn`` attribute,
      when it has one.

    Examples
    --------
    >>> import lightning.pytorch as pl                                         # doctest: +SKIP
    >>> from collector.integrations import LightningCollector                  # doctest: +SKIP
    >>> trainer = pl.Trainer(max_epochs=10, callbacks=[LightningCollector(     # doctest: +SKIP
    ...     "runs/lit", collect_specified_data={"collect_landscape": {
    ...         "unit": "epoch", "intervals": [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]}})])
    >>> trainer.fit(LitMLP(), digits_loader(64))                               # doctest: +SKIP
    """

    # the step's accumulators, between two optimizer steps (reset at each fit's start; see _reset_step)
    _loss_sum: Any = None
    _loss_n = 0
    _inputs: Any = None
    _last_global_step = 0
    _last_batch_idx = -1

    def _reset_step(self) -> None:
        self._loss_sum = None  # the micro-batch losses since the last optimizer step
        self._loss_n = 0
        self._inputs = None
        self._last_global_step = 0
        self._last_batch_idx = -1

    # ------------------------------------------------------------------ fit
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """Start the run: hyper-parameters for the lineage, steps per epoch, where a resumed fit is."""
        if not trainer.is_global_zero:
            return
        sc = self.collector()
        accumulate = max(1, int(trainer.accumulate_grad_batches))
        batches = trainer.num_training_batches
        # Lightning steps the optimizer at the end of an epoch also when fewer than k batches are left.
        per_epoch = math.ceil(batches / accumulate) if isinstance(batches, int) and batches > 0 else None
        total = math.inf
        if per_epoch is not None and trainer.max_epochs is not None and trainer.max_epochs >= 0:
            total = per_epoch * trainer.max_epochs
        if trainer.max_steps is not None and trainer.max_steps >= 0:
            total = min(total, trainer.max_steps)
        epochs = math.ceil(total / per_epoch) if per_epoch and math.isfinite(total) else None
        loader = trainer.train_dataloader
        optimizers = trainer.optimizers
        self._reset_step()
        self._last_global_step = int(trainer.global_step)
        sc.begin_train(network=pl_module, optimizer=optimizers[0] if optimizers else None,
                       loss_fn=getattr(pl_module, "loss_fn", None), train_dataset=loader,
                       epoch_num=max(1, epochs) if epochs is not None else None, batch_num=per_epoch,
                       batch_size=_batch_size(loader), initial_step=int(trainer.global_step),
                       initial_epoch=int(trainer.current_epoch))
        self._training = True

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Count an optimizer step when ``trainer.global_step`` moved; its loss is its batches' mean."""
        if not self._training:
            return
        self._last_batch_idx = batch_idx
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor):
            if pl_module.automatic_optimization and trainer.accumulate_grad_batches > 1:
                # Lightning hands back the loss divided by accumulate_grad_batches (what was backpropagated).
                loss = loss.detach() * trainer.accumulate_grad_batches
            self._loss_sum = loss.detach() if self._loss_sum is None else self._loss_sum + loss.detach()
            self._loss_n += 1
        if self._inputs is None:
            self._inputs = first_tensor(batch)
        step = int(trainer.global_step)
        if step == self._last_global_step:
            return  # gradients accumulate: no optimizer step yet
        self._last_global_step = step
        mean = None
        if self._loss_sum is not None:
            mean = self._loss_sum if self._loss_n == 1 else self._loss_sum / self._loss_n
        self.collector().step(mean, inputs=self._inputs)
        self._loss_sum, self._loss_n, self._inputs = None, 0, None

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        """Close the epoch (``unit="epoch"`` checkpoints), unless ``max_steps`` cut it short."""
        if not self._training:
            return
        batches = trainer.num_training_batches
        if isinstance(batches, int) and self._last_batch_idx + 1 < batches:
            logger.info("LightningCollector: epoch %d stopped after %d of %d batches; it is not counted as an "
                        "epoch (no epoch checkpoint).", trainer.current_epoch + 1, self._last_batch_idx + 1, batches)
            return
        self._last_batch_idx = -1
        self.collector().epoch_end()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        """Train lineage and ``train_metadata.json``; close the files."""
        if not self._training:
            return
        self._training = False
        self.collector().end()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """Keep what is usable: the metadata of the complete intervals, the files closed."""
        if self._sc is None:
            return
        self._training = False
        self._sc.__exit__(type(exception), exception, exception.__traceback__)

    # ------------------------------------------------------------------ evaluation
    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        """An eval lineage from the validation metrics (not for the sanity check)."""
        if trainer.is_global_zero and not trainer.sanity_checking:
            self._log_eval(trainer, trainer.val_dataloaders)

    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        """An eval lineage from the test metrics."""
        if trainer.is_global_zero:
            self._log_eval(trainer, trainer.test_dataloaders)

    def _log_eval(self, trainer: Any, loaders: Any) -> None:
        metrics = scalar_metrics(trainer.callback_metrics)
        if isinstance(loaders, (list, tuple)):
            loaders = loaders[0] if len(loaders) == 1 else None
        self.collector().log_eval(metrics, valid_dataset=loaders)


def _batch_size(loader: Any) -> int | None:
    size = getattr(loader, "batch_size", None)
    return size if isinstance(size, int) else None
