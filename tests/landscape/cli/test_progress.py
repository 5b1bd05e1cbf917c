"""Long work shows progress wherever the output goes: ``landscape gen`` in a terminal draws a bar per
landscape (points, points/s, the time left from a moving rate); with stderr to a file or a pipe it
writes plain lines (every tenth of the points or minute)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

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
    # the bar: "landscape_[1, 3]:  40%|####      | 27/67 [00:01, 20 pt/s, about 2 s left]"
    assert re.search(r"landscape_\[1, 3\]: +\d+%\|.*\| \d+/67 \[00:\d\d, [\d.]+ pt/s, (about \d+ s|under 1 s) left\]",
                     text), text[-2000:]
    assert "landscape_[6]: 100%|" in text


def test_gen_writes_progress_lines_to_a_file(summary_dir, tmp_path):
    """``landscape gen ... 2> log``: no terminal, no bar; lines on stderr at the default verbosity."""
    env = dict(os.environ, LANDSCAPE_TEST_SLOW="0.05", LANDSCAPE_TEST_ONE_POINT="1", PYTHONPATH=ROOT)
    log = tmp_path / "stderr.log"
    with open(log, "w") as err:  # a line of 61 points, one per call, each over 0.05 s: over 3 s
        res = subprocess.run([sys.executable, "-m", "landscape", "gen", str(summary_dir), "--task",
                              "tests.landscape._gen_task:task", "--output", str(tmp_path / "out"), "--view", "line",
                              "--x=-1:1:60"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=err, text=True, timeout=300)
    text = log.read_text()
    assert res.returncode == 0, text[-2000:]
    line = re.compile(r"line_\[6\]: (\d+)/61 points, [\d.]+ points/s, (about \d+ s|under 1 s) left")
    said = [m for m in map(line.fullmatch, text.splitlines()) if m]
    assert len(said) >= 3, text  # past the first 2 s, at every tenth of the points
    done = [int(m[1]) for m in said]
    assert done == sorted(done) and 0 < done[0] and done[-1] < 61
    assert re.search(r"^line_\[6\]: 61/61 points in \d+ s$", text, re.M), text
    assert "%|" not in text and "INFO" not in text  # no bar drawn, no logging prefix
