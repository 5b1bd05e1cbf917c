"""BackgroundWriter's byte budget: make_room waits for the jobs holding memory, and only for them.

Whether make_room waited is read from a spy on its condition's ``wait`` (never from a clock), and
that it waited for a job from the order of events: the job marks its end before make_room returns."""

import threading
import time

from collector.common import BackgroundWriter

#: Only so that a broken make_room fails the test instead of hanging it; never reached when it works.
HANG = 30
#: A pause while a job holds its bytes (not a measurement: a slow machine only makes it longer), after which
#: make_room must still be waiting: one that gave up after a while would have returned.
PAUSE = 0.5


def _spied(writer: BackgroundWriter) -> threading.Event:
    """An Event set when ``writer.make_room`` starts waiting for bytes to be freed."""
    cond, waiting = writer._bytes_freed, threading.Event()
    real = cond.wait

    def wait(timeout=None):
        waiting.set()
        return real(timeout)

    cond.wait = wait
    return waiting


def _blocked_job():
    """A job that runs until ``release`` is set and marks its end in ``ended``."""
    release, ended = threading.Event(), threading.Event()

    def job():
        release.wait(HANG)
        ended.set()

    return job, release, ended


def _make_room_in_a_thread(writer: BackgroundWriter, nbytes: int, ended: threading.Event):
    """make_room(nbytes) on a thread; the list gets whether ``ended`` was set when it returned."""
    seen: list[bool] = []
    t = threading.Thread(target=lambda: (writer.make_room(nbytes), seen.append(ended.is_set())))
    t.start()
    return t, seen


def test_make_room_waits_until_the_jobs_holding_bytes_end():
    writer = BackgroundWriter("test", max_pending_bytes=100)
    waiting = _spied(writer)
    job, release, ended = _blocked_job()
    writer.submit(job, nbytes=80)
    writer.make_room(20)  # 80 + 20 fit: returns while the job still holds its 80
    assert not waiting.is_set() and not ended.is_set()
    t, seen = _make_room_in_a_thread(writer, 30, ended)  # 80 + 30 do not fit while the job runs
    assert waiting.wait(HANG)
    t.join(PAUSE)
    assert t.is_alive() and not ended.is_set()
    release.set()
    t.join(HANG)
    assert seen == [True]  # it returned only after the job ended
    writer.shutdown()


def test_a_job_larger_than_the_budget_waits_only_for_an_empty_writer():
    writer = BackgroundWriter("test", max_pending_bytes=10)
    waiting = _spied(writer)
    writer.make_room(1000)  # nothing held: never refused, never waits
    assert not waiting.is_set()
    job, release, ended = _blocked_job()
    writer.submit(job, nbytes=1000)
    t, seen = _make_room_in_a_thread(writer, 1000, ended)
    assert waiting.wait(HANG)
    t.join(PAUSE)
    assert t.is_alive() and not ended.is_set()
    release.set()
    t.join(HANG)
    assert seen == [True]
    writer.shutdown()


def test_a_failed_job_frees_its_bytes_and_jobs_without_bytes_never_wait():
    writer = BackgroundWriter("test", max_pending_bytes=10)
    waiting = _spied(writer)

    def fail():
        raise RuntimeError("disk full")

    writer.submit(fail, nbytes=50)
    writer.join()
    writer.make_room(50)  # the failed job's 50 bytes were freed: nothing to wait for
    assert not waiting.is_set()
    unlimited = BackgroundWriter("test2")
    unlimited.submit(time.sleep, 0.3, nbytes=1 << 40)
    assert unlimited.make_room(1 << 40) == 0.0
    unlimited.stop()
    try:
        writer.shutdown()
    except RuntimeError as exc:
        assert "disk full" in str(exc)
    else:
        raise AssertionError("the job's error was not raised")
