"""Who draws a Landscape for Jupyter: a renderer registered from above (private).

``landscape`` sits below ``viz`` (viz loads and draws landscapes), so ``Landscape`` must
not import viz. The dependency is inverted: a plotting package registers a renderer,
here ``viz`` on import (:func:`register_png_renderer`), or through the entry-point group
``landscape.renderers`` (``viz`` declares itself in ``pyproject.toml``), which is looked up
the first time a landscape is shown before anything registered. This is pandas' way of
finding plotting backends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

__all__ = ["register_png_renderer", "png_renderer", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "landscape.renderers"
_log = logging.getLogger("landscape")
_renderer: Callable[[Any], bytes] | None = None
_looked_up = False


def register_png_renderer(render: Callable[[Any], bytes]) -> None:
    """Make ``render(landscape) -> PNG bytes`` the picture Jupyter shows for a Landscape."""
    global _renderer
    _renderer = render


def png_renderer() -> Callable[[Any], bytes] | None:
    """The registered renderer, else the first of the entry-point group that loads, else None."""
    global _looked_up, _renderer
    if _renderer is None and not _looked_up:
        _looked_up = True
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            try:
                _renderer = ep.load()
                break
            except Exception as exc:
                _log.warning("landscape renderer %r could not be loaded: %s", ep.name, exc)
    return _renderer
