"""What every layer and package shares: parameter validation, atomic writes, a writer thread.

This subpackage imports nothing else of the project, so ``landscape`` and ``viz`` use it
without loading the summary format or torch.
"""

from collector.common._validation import (
    Constraint,
    InstanceOf,
    Interval,
    InvalidParameterError,
    Options,
    Predicate,
    check_param,
    validate_params,
)

__all__ = ["InvalidParameterError", "Interval", "Options", "InstanceOf", "Predicate", "Constraint",
           "check_param", "validate_params"]
