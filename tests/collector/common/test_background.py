"""BackgroundWriter's byte budget: make_room waits for the jobs holding memory, and only for them."""

import threading
import time

from collector.common import BackgroundWriter


def test_make_room_waits_until_the_jobs_holding_bytes_end():
    writer = BackgroundWriter("test", max_pending_bytes=100)
    release = threading.Event()
    writer.submit(release.wait, 10, nbytes=80)
    assert writer.make_room(20) < 0.05  # 80 + 20 fit
    waited = []
    t = threading.Thread(target=lambda: waited.append(writer.make_room(30)))
    t.start()
    t.join(0.2)
    assert t.is_alive()  # 80 + 30 do not fit while the job runs
    release.set()
    t.join(10)
    assert waited and waited[0] >= 0.15
    writer.shutdown()


def test_a_job_larger_than_the_budget_waits_only_for_an_empty_writer():
    writer = BackgroundWriter("test", max_pending_bytes=10)
    assert writer.make_room(1000) < 0.05  # nothing held: never refused
    writer.submit(time.sleep, 0.2, nbytes=1000)
    start = time.monotonic()
    writer.make_room(1000)
    assert time.monotonic() - start >= 0.1
    writer.shutdown()


def test_a_failed_job_frees_its_bytes_and_jobs_without_bytes_never_wait():
    writer = BackgroundWriter("test", max_pending_bytes=10)

    def fail():
        raise RuntimeError("disk full")

    writer.submit(fail, nbytes=50)
    writer.join()
    assert writer.make_room(50) < 0.05
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
