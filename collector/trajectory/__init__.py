"""The training trajectory on disk: interval checkpoints and ``train_metadata.json``.

The one owner of both formats: the collector writes them through this subpackage and
``landscape`` reads them through it.
"""

__all__: list[str] = []
