"""Tasks: the loss of a model on a batch, for any batch structure and model output.

A task is ``task(model, batch) -> loss``, a 0-d tensor, the mean over the batch's
samples. Give one to ``compute_landscape(network, data=..., task=...)`` or as the fifth
item of ``SummaryLandscape``'s ``callback_fn`` result when batches are not
``(inputs, labels)`` pairs or the model's output is not what the loss takes.

Examples
--------
A Hugging Face model whose batches are dicts with ``labels``:

>>> from landscape.tasks import HuggingFace
>>> task = HuggingFace()                        # model(**batch).loss

Batches ``(image, mask, target)`` for a model called ``model(image, mask)``, whose
output is ``(logits, aux)``:

>>> import torch
>>> from landscape.tasks import Supervised
>>> task = Supervised(torch.nn.CrossEntropyLoss(), inputs=lambda b: (b[0], b[1]), targets=2, output=0)

Any function works; a metric of the same shape (``metric(model, batch)``) says so with
``metric_inputs = "batch"``:

>>> def accuracy(model, batch):
...     x, y = batch
...     return (model(x).argmax(1) == y).float().mean()
>>> accuracy.metric_inputs = "batch"
"""

from landscape.tasks._task import (
    ELEMENTWISE_LOSSES,
    HuggingFace,
    NotOneNumber,
    Supervised,
    Task,
    as_task,
    batch_size,
    broadcast_mismatch,
    classification,
    map_tensors,
    mean_loss,
    regression,
    slice_batch,
    tensors_in,
    to_device,
)

# The public home of tasks (users import them from here); as_task, mean_loss and map_tensors are
# what the engine and curvature take from it.
__all__ = ["Task", "Supervised", "HuggingFace", "classification", "regression", "to_device", "batch_size",
           "slice_batch", "as_task", "mean_loss", "map_tensors", "tensors_in", "NotOneNumber", "ELEMENTWISE_LOSSES",
           "broadcast_mismatch"]
