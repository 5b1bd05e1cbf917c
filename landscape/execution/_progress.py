"""A landscape's progress bar: points, points per second, time left (private).

One bar per landscape (tqdm: a terminal line, a notebook widget; off when the output is
not a terminal), updated as points finish, and one line with the estimated time of a long
landscape once its first points are timed -- on the bar's stream when it shows, else in the
log at INFO level.
"""

from __future__ import annotations

import logging
import time

from tqdm.auto import tqdm

__all__ = ["Progress", "ESTIMATE_AFTER_S", "ANNOUNCE_FROM_S"]
_log = logging.getLogger("landscape")

#: The estimate is made once this much evaluation has been timed (or a twentieth of the points done).
ESTIMATE_AFTER_S = 2.0
#: ... and said only for a landscape expected to take at least this long.
ANNOUNCE_FROM_S = 30.0


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """The bar of one landscape's ``total`` points to evaluate; ``update(k)`` as they finish."""

    def __init__(self, label: str, total: int, *, enabled: bool = True) -> None:
        self.label, self.total = label, total
        self.done = 0
        self.started = time.perf_counter()
        self.announced = not enabled or total == 0
        self.bar = tqdm(total=total, desc=label, unit="pt", dynamic_ncols=True, disable=None if enabled else True)

    def update(self, k: int) -> None:
        self.done += k
        self.bar.update(k)
        if not self.announced:
            elapsed = time.perf_counter() - self.started
            if elapsed >= ESTIMATE_AFTER_S or self.done * 20 >= self.total:
                self.announced = True
                left = elapsed / max(self.done, 1) * (self.total - self.done)
                if left >= ANNOUNCE_FROM_S:
                    rate = self.done / max(elapsed, 1e-9)
                    line = (f"{self.label}: about {_duration(left)} left for {self.total - self.done} of "
                            f"{self.total} points ({rate:.3g} points/s)")
                    if self.bar.disable:
                        _log.info(line)
                    else:
                        self.bar.write(line)

    def close(self) -> None:
        self.bar.close()
