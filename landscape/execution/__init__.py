"""Spreading chunks of points over devices: worker processes, joblib backends, torch.distributed."""

__all__: list[str] = []
