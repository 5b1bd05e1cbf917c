"""Training: MindSpore's ``Model`` over a PyTorch network, callbacks, metrics, checkpoints."""

from collector.train._callbacks import (
    Callback,
    CallbackParams,
    History,
    LambdaCallback,
    LearningRateScheduler,
    LossMonitor,
    RunContext,
    run_network,
)
from collector.train._checkpoint import CheckpointConfig, ModelCheckpoint
from collector.train._metrics import Accuracy, Loss, Metric, get_metric
from collector.train._model import Model

__all__ = ["Callback", "CallbackParams", "RunContext", "LambdaCallback", "History", "LearningRateScheduler",
           "LossMonitor", "CheckpointConfig", "ModelCheckpoint", "Model", "Accuracy", "Loss", "Metric",
           "get_metric", "run_network"]
