"""Long work shows progress: ``landscape gen`` in a terminal draws a bar per landscape (points,
points/s, time left), and a long landscape's estimate is said once its first points are timed."""

from __future__ import annotations

import fcntl
import logging
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time

from landscape.execution import _progress

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_gen_in_a_terminal_draws_a_bar_with_rate_and_time_left(summary_dir, tmp_path):
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a 120-column terminal
    env = dict(os.environ, LANDSCAPE_TEST_SLOW="0.005", LANDSCAPE_TEST_ONE_POINT="1", TERM="xterm")
    proc = subprocess.Popen([sys.executable, "-m", "landscape", "gen", str(summary_dir), "--task",
                             "tests.landscape._gen_task:task", "--output", str(tmp_path / "out"), "--size", "8"],
                            cwd=ROOT, env=env, stdin=follower, stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    seen = b""
    deadline = time.time() + 240
    while time.time() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the command ended
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=60)
    os.close(leader)
    text = seen.decode(errors="replace")
    assert proc.returncode == 0, text[-2000:]
    # tqdm's line: "landscape_[1, 3]:  40%|####      | 27/67 [00:01<00:01, 20.1pt/s]"
    assert "landscape_[1, 3]:" in text and "pt/s" in text and "<" in text and "%|" in text
    assert "landscape_[6]: 100%|" in text


def test_a_long_landscape_says_its_estimate_once_after_its_first_points(monkeypatch, caplog):
    """Without a terminal (no bar) the estimate goes to the log, once."""
    clock = [100.0]
    monkeypatch.setattr(_progress.time, "perf_counter", lambda: clock[0])
    caplog.set_level(logging.INFO, logger="landscape")
    bar = _progress.Progress("landscape_[1, 5]", 400)
    assert bar.bar.disable  # pytest's output is not a terminal
    clock[0] += 1.0
    bar.update(5)  # 1 s for 5 points: not yet timed long enough, and not a twentieth
    assert "left" not in caplog.text
    clock[0] += 1.5
    bar.update(5)  # 2.5 s for 10 points: 97.5 s left, said in minutes
    said = [r.getMessage() for r in caplog.records if "left" in r.getMessage()]
    assert said == ["landscape_[1, 5]: about 2 min left for 390 of 400 points (4 points/s)"]
    clock[0] += 10.0
    bar.update(100)
    assert len([r for r in caplog.records if "left" in r.getMessage()]) == 1  # said once
    bar.close()

    short = _progress.Progress("line_[6]", 40)
    clock[0] += 0.1
    short.update(4)  # a twentieth done, 0.9 s left: nothing to announce
    assert len([r for r in caplog.records if "left" in r.getMessage()]) == 1
    short.close()
