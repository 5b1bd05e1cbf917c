"""The interactive report: runs' scalars, landscapes and lineage as one self-contained HTML file.

Above :mod:`viz.io` (it reads runs with the loaders): :func:`report` writes a page that
holds plotly's script and every value, so it opens offline from disk. Needs the optional
``plotly`` package (``pip install 'torch-landscape[report]'``), imported when this loads.
"""

from viz.html._report import report

__all__ = ["report"]
