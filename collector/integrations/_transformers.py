"""``HFCollector``: SummaryCollector as a Hugging Face ``transformers.TrainerCallback``."""

from __future__ import annotations

import math
from typing import Any

import torch

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - exercised only without transformers
    raise ImportError("HFCollector needs Hugging Face transformers, which is not installed. "
                      "HINT: pip install transformers accelerate") from exc

from collector.integrations._common import CollectorAdapter, scalar_metrics

__all__ = ["HFCollector"]

#: What the trainer adds to an evaluation's metrics about its speed (``speed_metrics``).
_SPEED_SUFFIXES = ("_runtime", "_samples_per_second", "_steps_per_second")


class HFCollector(CollectorAdapter, TrainerCallback):
    """Collect what :class:`~collector.SummaryCollector` collects from a Hugging Face ``Trainer``.

    The loss (from the trainer's logs), parameter histograms, train lineage, eval lineage
    from ``Trainer.evaluate``'s metrics, and with ``collect_landscape`` the interval
    checkpoints and ``ckpt_dir/train_metadata.json`` that
    :class:`~landscape.SummaryLandscape` reads (``unit`` "step" or "epoch"): the files a
    SummaryCollector writes, in the same format. The hooks only translate the
    trainer's events into SummaryCollector's plain-loop calls.

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
    - A *step* is an optimizer step (``state.global_step``); epochs count from 1; an
      epoch cut short by ``max_steps`` saves no epoch checkpoint.
    - ``loss/auto`` is the loss the trainer logs, every ``logging_steps`` (the mean
      since the previous log), at the step it was logged; ``collect_freq`` governs
      the histograms. The last logged loss is the lineage's final loss.
    - The checkpoints hold the model's ``state_dict``, named after its class
      (``ckpt_dir/GPT2LMHeadModel_{n}_step.pt``); for landscapes, ``callback_fn``
      builds the same model from its config (and a task for dict batches).
    - Only the world's process 0 writes. A resumed ``trainer.train(resume_from_checkpoint=...)``
      continues the step numbers; the interval checkpoints saved before count.
    - ``Trainer`` has no hook for a failed ``train``: use the callback as a context
      manager (``with HFCollector(...) as cb:``) to keep the metadata of the complete
      intervals and close the files when training raises.

    Examples
    --------
    >>> from transformers import Trainer, TrainingArguments                # doctest: +SKIP
    >>> from collector.integrations import HFCollector                     # doctest: +SKIP
    >>> cb = HFCollector("runs/gpt2", collect_freq=5, collect_specified_data={   # doctest: +SKIP
    ...     "collect_landscape": {"unit": "step", "intervals": [[5, 10, 15, 20]]}})
    >>> Trainer(model, TrainingArguments("out", max_steps=20, logging_steps=1),   # doctest: +SKIP
    ...         train_dataset=data, callbacks=[cb]).train()
    """

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                       train_dataloader: Any = None, **kwargs: Any) -> None:
        """Start the run: steps per epoch as the trainer counts them, where a resumed run is."""
        if not state.is_world_process_zero or model is None:
            return
        accumulate = max(1, int(args.gradient_accumulation_steps))
        try:
            batches = len(train_dataloader)
        except TypeError:
            batches = 0
        per_epoch = max(1, math.ceil(batches / accumulate)) if batches else None
        max_steps = int(state.max_steps or 0)
        epochs = math.ceil(max_steps / per_epoch) if per_epoch and max_steps > 0 else None
        step = int(state.global_step)
        inner = getattr(optimizer, "optimizer", None)
        if isinstance(inner, torch.optim.Optimizer):
            optimizer = inner  # accelerate's AcceleratedOptimizer around the trainer's own
        self.collector().begin_train(
            network=model, optimizer=optimizer, train_dataset=train_dataloader,
            epoch_num=max(1, epochs) if epochs is not None else None, batch_num=per_epoch,
            batch_size=int(args.per_device_train_batch_size), initial_step=step,
            initial_epoch=step // per_epoch if per_epoch else 0)
        self._training = True

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """One optimizer step: histograms at the collected steps, ``unit="step"`` checkpoints."""
        if self._training:
            self.collector().step(None)

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        """The trainer's logged training loss becomes ``loss/auto`` at its step."""
        if self._training and logs and isinstance(logs.get("loss"), (int, float)):
            self.collector().log_loss(float(logs["loss"]), step=int(state.global_step))

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Close a completed epoch (``unit="epoch"`` checkpoints)."""
        if self._training and state.epoch is not None and float(state.epoch).is_integer():
            self.collector().epoch_end()

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        """An eval lineage from the evaluation's metrics (not its timings, nor the epoch it ran at)."""
        if state.is_world_process_zero:
            kept = {k: v for k, v in scalar_metrics(metrics).items()
                    if k != "epoch" and not k.endswith(_SPEED_SUFFIXES)}
            self.collector().log_eval(kept, valid_dataset=kwargs.get("eval_dataloader"))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Train lineage and ``train_metadata.json``; close the files."""
        if self._training:
            self._training = False
            self.collector().end()
