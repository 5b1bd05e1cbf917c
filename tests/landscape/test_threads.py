"""The OpenMP wait policy of the library's own processes (landscape/threads.py): passive only when
other runnable threads would share the CPUs, never over the user's own setting, set before torch
is imported in the command, handed to the workers, and never in the caller's process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from landscape import threads

CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_others_running_takes_the_fewest_reads_less_the_reader():
    reads = iter([4, 1, 3])
    assert threads.others_running(samples=3, gap=0, read=lambda: next(reads)) == 0
    reads = iter([5, 3, 4])
    assert threads.others_running(samples=3, gap=0, read=lambda: next(reads)) == 2
    assert threads.others_running(samples=3, gap=0, read=lambda: None) is None


@pytest.mark.parametrize(("ours", "others", "expected"), [
    (CPUS, 0, None),              # an idle machine: libgomp's default (spinning is faster there)
    (max(2, CPUS), 1, "PASSIVE"),  # one more runnable thread than CPUs
    (max(2, CPUS), CPUS, "PASSIVE"),
    (1, 8, None),                 # one thread never waits for another
])
def test_passive_only_when_the_cpus_are_oversubscribed(ours, others, expected):
    assert threads.wait_policy(ours, env={}, others=others) == expected


def test_libgomps_default_where_the_load_is_unknown(monkeypatch):
    # ``others=None`` measures the machine's load; this machine's real load (a busy CI runner)
    # must not decide the test, so the measurement is made to fail.
    monkeypatch.setattr(threads, "others_running", lambda: None)
    assert threads.wait_policy(max(2, CPUS), env={}, others=None) is None


@pytest.mark.parametrize("setting", [{"OMP_WAIT_POLICY": "active"}, {"GOMP_SPINCOUNT": "10000"}])
def test_the_users_own_setting_wins(setting):
    assert threads.wait_policy(CPUS + 1, env=setting, others=8) is None


def test_default_threads_follow_omp_num_threads():
    assert threads.wait_policy(None, env={"OMP_NUM_THREADS": "1"}, others=8) is None
    assert threads.wait_policy(None, env={}, others=1) == ("PASSIVE" if CPUS > 1 else None)


def test_workers_get_the_policy_and_the_callers_environment_stays(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.setattr(threads, "others_running", lambda: 1)
    env = threads.owned_env(1, CPUS)  # one thread per worker, as many workers as CPUs, one more
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.setattr(threads, "others_running", lambda: 0)
    assert "OMP_WAIT_POLICY" not in threads.owned_env(1, CPUS)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.setattr(threads, "others_running", lambda: 8)
    assert threads.owned_env(1, CPUS)["OMP_WAIT_POLICY"] == "ACTIVE"


def _python(code: str, env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True, capture_output=True,
                          text=True, timeout=120).stdout.strip()


def test_the_command_sets_it_before_torch_beside_busy_processes():
    """Real load: as many spinning processes as CPUs; the command's process chooses passive
    waiting before torch is imported (libgomp reads it then), and `import landscape.__main__`
    imports no torch."""
    env = {k: v for k, v in os.environ.items() if k not in threads.USER_SETTINGS}
    env.pop("OMP_NUM_THREADS", None)
    code = ("import sys, os; import landscape.__main__ as m; assert 'torch' not in sys.modules; "
            "from landscape.threads import set_for_command; print(set_for_command(), os.environ.get('OMP_WAIT_POLICY'))")
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(CPUS)]
    try:
        time.sleep(0.5)
        assert _python(code, env) == "PASSIVE PASSIVE"
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    # once torch is imported the policy can no longer take effect: nothing is set
    late = "import os, torch; from landscape.threads import set_for_command; print(set_for_command(), os.environ.get('OMP_WAIT_POLICY'))"
    assert _python(late, env) == "None None"
