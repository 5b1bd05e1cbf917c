"""``HFSharpness``: :class:`SharpnessCallback` as a Hugging Face ``TrainerCallback`` (private)."""

from __future__ import annotations

from typing import Any

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - exercised only without transformers
    raise ImportError("HFSharpness needs Hugging Face transformers, which is not installed. "
                      "HINT: pip install transformers accelerate") from exc

from landscape.curvature._callback import SharpnessCallback

__all__ = ["HFSharpness"]


class HFSharpness(TrainerCallback):
    """Record ``lambda_max`` (and AdamW's preconditioned one) every ``every`` optimizer steps of ``Trainer.train``.

    An adapter: it hands the trainer's optimizer steps (``state.global_step``) to a
    :class:`SharpnessCallback`, which measures and writes into the summary file of the
    :class:`~collector.integrations.HFCollector` beside it (put both in ``callbacks``). For
    dict batches give ``task=landscape.tasks.HuggingFace()``. Only the world's process 0
    measures.

    Parameters
    ----------
    *args, **kwargs
        :class:`SharpnessCallback`'s (``every``, ``data``, ``loss_fn`` or ``task``, ...).

    Attributes
    ----------
    sharpness : SharpnessCallback
        Its :attr:`~SharpnessCallback.history` holds every measurement.

    Examples
    --------
    >>> Trainer(model, args, train_dataset=data, callbacks=[HFCollector("runs/gpt2"),   # doctest: +SKIP
    ...     HFSharpness(every=20, data=data, task=HuggingFace())]).train()
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sharpness = SharpnessCallback(*args, **kwargs)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write what waited from the step before."""
        self.sharpness.flush()

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                    **kwargs: Any) -> None:
        """One optimizer step: measure if ``every`` selects it."""
        if state.is_world_process_zero and model is not None:
            self.sharpness.step(model, optimizer, step=int(state.global_step))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Write what waited."""
        self.sharpness.flush()
