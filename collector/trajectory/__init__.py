"""The training trajectory on disk: interval checkpoints and ``train_metadata.json``.

The one owner of both formats: the collector writes them through this subpackage and
``landscape`` reads them through it (``_checkpoints`` for checkpoint files,
``_metadata`` for ``train_metadata.json`` and the ``collect_landscape`` keys it records).
Integrity (``_integrity``): every checkpoint's SHA-256 and size are recorded as it is
written, and every failure to use a checkpoint is a :class:`CheckpointError`.

Checkpoint files are torch's (``_checkpoints``) or safetensors (``_safetensors``); both
are loaded, whole or in blocks of rows, and checked against a network by ``_loading``.

The checkpoint functions (``_checkpoints``, ``_loading``: torch) load on first use (PEP 562),
so that the metadata and the digests can be read without torch (``landscape gen``
recognises a finished run before importing it).
"""

from typing import Any

from collector.trajectory._integrity import (
    CheckpointError,
    CheckpointNotFoundError,
    FileDigest,
    file_digest,
    verify_checkpoint_file,
)
from collector.trajectory._metadata import (
    CHECKPOINT_FORMATS,
    CKPT_DIR,
    DIGEST_KEY,
    LANDSCAPE_DEFAULTS,
    LANDSCAPE_SIZES,
    METADATA_FILE,
    TrainMetadata,
    checkpoint_file_name,
    read_train_metadata,
    recorded_digest,
    validate_collect_landscape,
)

__all__ = ["cpu_state_dict", "save_file", "load_checkpoint", "to_cpu", "IN_MEMORY_SAVE_BYTES", "CheckpointReader",
           "CHECKPOINT_FORMATS",
           "verify_checkpoint_file", "check_state_dict", "check_checkpoints", "CheckpointError",
           "CheckpointNotFoundError", "FileDigest", "file_digest", "TrainMetadata", "read_train_metadata",
           "recorded_digest", "validate_collect_landscape", "checkpoint_file_name", "LANDSCAPE_DEFAULTS",
           "LANDSCAPE_SIZES", "METADATA_FILE", "CKPT_DIR", "DIGEST_KEY"]

_LAZY = {"IN_MEMORY_SAVE_BYTES", "cpu_state_dict", "save_file", "to_cpu"}
_LAZY_LOADING = {"check_checkpoints", "check_state_dict", "load_checkpoint", "CheckpointReader"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from collector.trajectory import _checkpoints  # torch: only when a checkpoint function is used

        return getattr(_checkpoints, name)
    if name in _LAZY_LOADING:
        from collector.trajectory import _loading  # torch: only when a checkpoint is loaded

        return getattr(_loading, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
