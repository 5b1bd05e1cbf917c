"""The evaluation engine: the loss (and metrics) at many points of a plane, on one device."""

__all__: list[str] = []
