"""lab.load_meter: the CPU time other processes used during a timed block, from the kernel's busy count minus this
process's own CPU time, and the warning a busy machine gets."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

import lab.load_meter as load_meter
from lab.load_meter import BUSY_SHARE, LoadMeter


def _fake_clocks(monkeypatch, busy, wall=(0.0, 2.0), own=(0.0, 1.0), cores=2):
    """Make the meter read fixed counters: kernel busy seconds ``busy``, wall and own CPU time as given."""
    busy, wall, own = iter(busy), iter(wall), iter(own)
    monkeypatch.setattr(load_meter, "_busy_cpu_seconds", lambda cpus=None: next(busy))
    monkeypatch.setattr(load_meter, "time", SimpleNamespace(perf_counter=lambda: next(wall),
                                                            process_time=lambda: next(own)))
    monkeypatch.setattr(load_meter, "_usable_cpus", lambda: frozenset(range(cores)))


def test_other_processes_are_the_busy_time_minus_our_own(monkeypatch):
    # 3 s of busy CPU over 2 s of wall time, 1 s of it ours: others kept 1 core busy on a 2-core machine
    _fake_clocks(monkeypatch, busy=(100.0, 103.0))
    with LoadMeter() as meter:
        pass
    assert meter.seconds == 2.0 and meter.other_cores == pytest.approx(1.0)
    assert meter.busy is True and 1.0 > BUSY_SHARE * 2
    assert "1.00 of 2 cores" in meter.note() and "WARNING" in meter.note()
    assert meter.summary()["other_cores"] == 1.0 and meter.summary()["busy"] is True


def test_a_quiet_machine_gets_no_warning(monkeypatch):
    _fake_clocks(monkeypatch, busy=(100.0, 101.3))   # 0.3 s others over 2 s = 0.15 cores, under a tenth of 2
    with LoadMeter() as meter:
        pass
    assert meter.other_cores == pytest.approx(0.15) and meter.busy is False
    assert "WARNING" not in meter.note()


def test_tick_rounding_never_gives_negative_load(monkeypatch):
    _fake_clocks(monkeypatch, busy=(100.0, 100.9))   # counted less than our own 1 s: ticks of 10 ms
    with LoadMeter() as meter:
        pass
    assert meter.other_cores == 0.0 and meter.busy is False


def test_without_kernel_counters_the_load_is_unknown(monkeypatch):
    _fake_clocks(monkeypatch, busy=(None, None))
    with LoadMeter() as meter:
        pass
    assert meter.other_cores is None and meter.busy is None
    assert "could not be read" in meter.note()


def test_note_needs_the_block_to_have_ended():
    with pytest.raises(RuntimeError, match="after the with block"):
        LoadMeter().note()


@pytest.mark.skipif(load_meter._busy_cpu_seconds() is None, reason="no /proc/stat on this system")
def test_real_counters_read_a_plausible_load():
    with LoadMeter() as meter:
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:   # our own busy loop must not count as other processes' load
            pass
    assert 0.0 <= meter.other_cores < meter.cores
    assert meter.seconds >= 0.3
    assert all(isinstance(value, float) and value >= 0 for value in meter.load_average), meter.load_average
    assert meter.cores == len(os.sched_getaffinity(0))


STAT = """cpu  1000 0 500 9000 0 0 0 0 0 0
cpu0 100 0 50 900 0 0 0 0 0 0
cpu1 200 0 100 800 0 0 0 0 0 0
cpu2 300 0 150 700 0 0 0 0 0 0
cpu3 400 0 200 600 0 0 0 0 0 0
intr 1 2 3
"""


def test_only_the_cpus_this_process_may_use_are_counted(monkeypatch):
    """On a machine of 8 CPUs of which this process may use 2 (a container, taskset), the share is of those 2, and
    their busy time is read from their own lines of /proc/stat: other processes on the other CPUs do not compete."""
    import io

    monkeypatch.setattr(load_meter.os, "sched_getaffinity", lambda pid: {0, 3}, raising=False)
    monkeypatch.setattr(load_meter.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(load_meter, "open", lambda *a, **k: io.StringIO(STAT), raising=False)
    tick = os.sysconf("SC_CLK_TCK")
    assert LoadMeter().cores == 2
    assert load_meter._busy_cpu_seconds(frozenset({0, 3})) == (150 + 600) / tick   # cpu0 and cpu3: user + system
    assert load_meter._busy_cpu_seconds(None) == 1500 / tick                      # every CPU: the aggregate line
    assert load_meter._busy_cpu_seconds(frozenset({0, 7})) == 1500 / tick         # no line for cpu7: the aggregate
    monkeypatch.setattr(load_meter.os, "sched_getaffinity", lambda pid: {0, 7}, raising=False)
    assert LoadMeter().cores == 8 and LoadMeter()._cpus is None  # counted like the aggregate line: every CPU
    monkeypatch.delattr(load_meter.os, "sched_getaffinity")                        # macOS: no affinity to read
    assert LoadMeter().cores == 8


def test_the_busy_warning_advises_one_thread_only_while_torch_runs_more():
    """A learner's busy race said "torch.set_num_threads(1) avoids..." after fit_threads had already cut torch to one
    thread: the advice follows the thread count now."""
    import torch

    from lab.load_meter import BUSY_WARNING, LoadMeter, thread_advice

    before = torch.get_num_threads()
    meter = LoadMeter()
    meter.seconds, meter.other_cores, meter.load_average, meter.busy = 10.0, 1.6, (5.1, 6.0), True
    try:
        torch.set_num_threads(2)
        assert meter.note().endswith(BUSY_WARNING + thread_advice()) and "torch runs 2 threads" in meter.note()
        torch.set_num_threads(1)
        assert thread_advice() == "" and meter.note().endswith(BUSY_WARNING)
    finally:
        torch.set_num_threads(before)


def test_the_threshold_is_lower_while_torch_has_a_thread_on_every_core(monkeypatch):
    """A quarter of the cores, or a tenth plus the cores torch leaves free, whichever is lower: 2 threads on 2 cores
    stall on 0.29 of a core of other work (a learner's run: decoding at half speed, with no warning before)."""
    from lab.load_meter import SPIN_SHARE, busy_threshold

    assert busy_threshold(2, threads=2) == pytest.approx(SPIN_SHARE * 2) == pytest.approx(0.2)
    assert busy_threshold(2, threads=1) == BUSY_SHARE * 2            # a core to spare: half a core, as before
    assert busy_threshold(8, threads=4) == BUSY_SHARE * 8 and busy_threshold(8, threads=8) == pytest.approx(0.8)
    assert busy_threshold(1, threads=1) == BUSY_SHARE  # one thread waits for no other: a 1-core machine as before
    import torch

    before = torch.get_num_threads()
    try:
        for threads, busy in ((2, True), (1, False)):
            torch.set_num_threads(threads)
            _fake_clocks(monkeypatch, busy=(100.0, 101.58))  # 0.58 s of others over 2 s: 0.29 of a core
            with LoadMeter() as meter:
                pass
            assert meter.other_cores == pytest.approx(0.29) and meter.busy is busy, threads
            assert ("WARNING" in meter.note()) is busy
    finally:
        torch.set_num_threads(before)


def test_busy_threshold_refuses_counts_below_one():
    """A tester's busy_threshold(-1) returned -0.25 and threads=0 was taken."""
    from lab.load_meter import busy_threshold

    for cores, threads in ((-1, 1), (0, 1), (2, 0), (2.0, 1), (True, 1)):
        with pytest.raises(ValueError, match="must be an integer >= 1"):
            busy_threshold(cores, threads)
    assert busy_threshold(2, 1) == 0.5 and busy_threshold(2, 2) == pytest.approx(0.2)


def test_busy_threshold_takes_any_integer():
    import numpy as np

    from lab.load_meter import busy_threshold

    assert busy_threshold(np.int64(4), np.int64(1)) == 1.0


def test_busy_threshold_names_missing_cores():
    """None raised "unsupported operand type(s) for *: 'float' and 'NoneType'"."""
    with pytest.raises(ValueError, match=r"cores must be an integer >= 1 \(the machine's cores: os.cpu_count\(\)\), "
                                         "got None"):
        load_meter.busy_threshold(None)
    assert load_meter.busy_threshold(4, 1) == BUSY_SHARE * 4
