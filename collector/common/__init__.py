"""What every layer and package shares: parameter validation, atomic writes, a writer thread.

This subpackage imports nothing else of the project, and not torch until a torch helper
(``unwrap_module``, ``strip_wrapper_prefixes``) is asked for, so ``viz`` uses it cheaply.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from collector.common._background import BackgroundWriter
from collector.common._files import atomic_path, fsync_path, temporary_name
from collector.common._validation import (
    Constraint,
    InstanceOf,
    Interval,
    InvalidDirectoryError,
    InvalidParameterError,
    Options,
    Predicate,
    check_directory,
    check_param,
    validate_params,
)

__all__ = ["InvalidParameterError", "InvalidDirectoryError", "Interval", "Options", "InstanceOf", "Predicate",
           "Constraint", "check_param", "check_directory", "validate_params", "atomic_path", "temporary_name",
           "fsync_path", "BackgroundWriter", "unwrap_module", "strip_wrapper_prefixes", "WRAPPER_PREFIXES"]

_TORCH_HELPERS = ("unwrap_module", "strip_wrapper_prefixes", "WRAPPER_PREFIXES")


def __getattr__(name: str) -> Any:
    if name in _TORCH_HELPERS:
        value = getattr(importlib.import_module("collector.common._torch"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'collector.common' has no attribute {name!r}")


if TYPE_CHECKING:
    from collector.common._torch import (
        WRAPPER_PREFIXES,
        strip_wrapper_prefixes,
        unwrap_module,
    )
