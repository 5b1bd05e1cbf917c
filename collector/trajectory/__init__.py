"""The training trajectory on disk: interval checkpoints and ``train_metadata.json``.

The one owner of both formats: the collector writes them through this subpackage and
``landscape`` reads them through it (``_checkpoints`` for checkpoint files,
``_metadata`` for ``train_metadata.json`` and the ``collect_landscape`` keys it records).
"""

from collector.trajectory._checkpoints import (
    IN_MEMORY_SAVE_BYTES,
    cpu_state_dict,
    load_checkpoint,
    save_file,
    to_cpu,
)
from collector.trajectory._metadata import (
    CKPT_DIR,
    LANDSCAPE_DEFAULTS,
    METADATA_FILE,
    TrainMetadata,
    checkpoint_file_name,
    read_train_metadata,
    validate_collect_landscape,
)

__all__ = ["cpu_state_dict", "save_file", "load_checkpoint", "to_cpu", "IN_MEMORY_SAVE_BYTES",
           "TrainMetadata", "read_train_metadata", "validate_collect_landscape", "checkpoint_file_name",
           "LANDSCAPE_DEFAULTS", "METADATA_FILE", "CKPT_DIR"]
