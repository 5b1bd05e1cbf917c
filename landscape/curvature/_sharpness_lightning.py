"""``LightningSharpness``: :class:`SharpnessCallback` as a PyTorch Lightning callback (private)."""

from __future__ import annotations

from typing import Any

try:
    import lightning.pytorch as pl
except ImportError:  # the standalone package, where only it is installed
    try:
        import pytorch_lightning as pl
    except ImportError as exc:  # pragma: no cover - exercised only without Lightning
        raise ImportError("LightningSharpness needs PyTorch Lightning, which is not installed. "
                          "HINT: pip install lightning") from exc

from landscape.curvature._callback import SharpnessCallback

__all__ = ["LightningSharpness"]


class LightningSharpness(pl.Callback):
    """Record ``lambda_max`` (and Adam's preconditioned one) every ``every`` optimizer steps of ``Trainer.fit``.

    An adapter: it hands Lightning's optimizer steps (``trainer.global_step``) to a
    :class:`SharpnessCallback`, which measures and writes into the summary file of the
    :class:`~collector.integrations.LightningCollector` beside it (put both in ``callbacks``).
    Only global rank 0 measures.

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
    >>> trainer = pl.Trainer(max_epochs=3, callbacks=[LightningCollector("runs/lit"),   # doctest: +SKIP
    ...     LightningSharpness(every=50, data=loader, loss_fn=torch.nn.CrossEntropyLoss())])
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.sharpness = SharpnessCallback(*args, **kwargs)
        self._last_step = 0

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """Where the steps start (a resumed fit continues its numbers)."""
        self._last_step = int(trainer.global_step)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        """Write what waited from the step before."""
        self.sharpness.flush()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Measure when ``trainer.global_step`` moved (an optimizer step) to a step ``every`` selects."""
        step = int(trainer.global_step)
        if not trainer.is_global_zero or step == self._last_step:
            return
        self._last_step = step
        optimizers = trainer.optimizers
        self.sharpness.step(pl_module, optimizers[0] if optimizers else None, step=step)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        """Write what waited."""
        self.sharpness.flush()
