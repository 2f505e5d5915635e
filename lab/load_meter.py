"""How busy the machine was while something was timed (layer 1): the CPU time other processes used during the
block, beside the 1-minute load average, so that a timing taken on a busy machine says so.

A speed measured while another program competes for the cores is too low, and by different amounts for methods
run at different moments. The 1-minute load average alone cannot tell: it counts the timing's own threads too,
and lags by a minute. :class:`LoadMeter` reads the kernel's count of busy CPU time (``/proc/stat`` on Linux) at
the start and end of the block and subtracts this process's own CPU time (``time.process_time``, every thread):
what is left is the work of other processes, in cores. Only the CPUs this process may run on count
(``os.sched_getaffinity``, where the system has it: a container or ``taskset`` may give it fewer than the machine
has), both in the busy time (the per-CPU lines of ``/proc/stat``) and in the number of cores the share is taken of.
A CPU quota without an affinity (cgroup ``cpu.max``) is not seen: there every CPU of the machine counts.
"""
from __future__ import annotations

import os
import time
from numbers import Integral

__all__ = ["LoadMeter", "BUSY_SHARE", "SPIN_SHARE", "BUSY_WARNING", "busy_threshold", "thread_advice"]

BUSY_SHARE = 0.25
"""Other processes kept more than this share of the cores busy, on average over the block: the timing is flagged
(on 2 cores, half a core of other work)."""

SPIN_SHARE = 0.1
"""The share of the cores of other work that flags a timing while torch runs a thread on every core this process may
use: its threads then wait on each other whenever another program takes a core from one of them. Cores that torch
leaves free are added to it (:func:`busy_threshold`). In a learner's run (2026-12-07, 2-core AMD EPYC, 2 threads)
other programs used 0.29 of a core, under BUSY_SHARE's half core, and autoregressive decoding ran at 13.3 tokens/s
against 25.1-25.6 on the quiet machine."""

BUSY_WARNING = ("WARNING: the machine was busy, so these speeds are low and uneven; close other programs and time "
                "again")
"""The sentence :meth:`LoadMeter.note` ends with when the timing was flagged (followed by :func:`thread_advice`);
tests look for it in committed outputs."""


def thread_advice() -> str:
    """What to add to :data:`BUSY_WARNING` while torch runs more than one thread: that one thread avoids its threads
    waiting on each other (``lab.models.fit_threads`` sets that while the machine is busy); "" when torch already
    uses one, or is not loaded (this module does not import it)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or torch.get_num_threads() <= 1:
        return ""
    return (f" (torch runs {torch.get_num_threads()} threads, which wait on each other while other programs hold "
            "cores: torch.set_num_threads(1) or lab.models.fit_threads() in Python, OMP_NUM_THREADS=1 before a "
            "command)")


def busy_threshold(cores: int, threads: int | None = None) -> float:
    """How many cores other processes may keep busy before a timing on ``cores`` cores is flagged:
    :data:`BUSY_SHARE` of them; while torch runs several ``threads``, also no more than :data:`SPIN_SHARE` of them
    plus the cores torch leaves free (so the threshold is lower only when torch leaves almost no core free: on 2
    cores with 2 threads, 0.2 instead of 0.5). A single thread has no other thread to wait for: the quarter stands.
    ``threads``: torch's thread count; None reads it from torch when torch is loaded (this module does not import
    it), else 1. Raises ``ValueError`` for ``cores`` or ``threads`` that is not an integer >= 1 (``cores`` None
    included)."""
    if cores is None:
        raise ValueError("cores must be an integer >= 1 (the machine's cores: os.cpu_count()), got None")
    for name, value in (("cores", cores), ("threads", threads)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, Integral) or value < 1):
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if threads is None:
        import sys

        torch = sys.modules.get("torch")
        threads = torch.get_num_threads() if torch is not None else 1
    if threads <= 1:
        return BUSY_SHARE * cores
    return min(BUSY_SHARE * cores, max(0, cores - threads) + SPIN_SHARE * cores)


def _usable_cpus() -> frozenset | None:
    """The CPUs this process may run on (``os.sched_getaffinity(0)``) when ``/proc/stat`` has a line for each, so
    that their busy time can be read; None where the system cannot say (macOS, Windows) or a CPU has no line (the
    meter then counts every CPU, with ``os.cpu_count()`` cores, so the busy time and the core count agree)."""
    try:
        cpus = frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    try:
        with open("/proc/stat", encoding="ascii") as f:
            names = {line.split()[0] for line in f if line.startswith("cpu")}
    except OSError:
        return cpus
    return cpus if all(f"cpu{i}" in names for i in cpus) else None


def _busy_cpu_seconds(cpus: frozenset | None = None) -> float | None:
    """Seconds of CPU time spent not idle since boot (user, nice, system, irq, softirq, steal from ``/proc/stat``)
    by the CPUs numbered in ``cpus`` (their ``cpuN`` lines), or by every CPU (the aggregate ``cpu`` line) when
    ``cpus`` is None or a CPU of it has no line; None where the file does not exist (macOS, Windows)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = [line.split() for line in f if line.startswith("cpu")]
    except OSError:
        return None
    rows = {fields[0]: fields for fields in lines}
    wanted = ["cpu"] if cpus is None or any(f"cpu{i}" not in rows for i in cpus) else [f"cpu{i}" for i in cpus]
    if any(name not in rows for name in wanted):
        return None
    ticks = 0
    for name in wanted:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in rows[name][1:9])
        ticks += user + nice + system + irq + softirq + steal
    return ticks / os.sysconf("SC_CLK_TCK")


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):  # Windows has no load average
        return None


class LoadMeter:
    """A context manager that measures how much CPU other processes used while its block ran.

    ``with LoadMeter() as meter: ...`` then read:

    - ``seconds``: wall time of the block;
    - ``other_cores``: average number of cores other processes kept busy (float, >= 0), or None where the kernel's
      counters cannot be read (outside Linux);
    - ``load_average``: the 1-minute load average ``(before, after)`` (either may be None);
    - ``cores``: the CPUs this process may run on (``len(os.sched_getaffinity(0))``; ``os.cpu_count()`` where the
      system cannot say), and whose busy time is counted;
    - ``busy``: True when ``other_cores`` exceeded :func:`busy_threshold` (:data:`BUSY_SHARE` of the cores, less
      while torch runs a thread on nearly every core; None when unknown);
    - :meth:`summary` (a dict for JSON) and :meth:`note` (one sentence, with a warning when busy).

    The kernel counts CPU time in ticks of 10 ms, so blocks under a second read roughly. A GPU run spends little CPU
    time of its own; other processes competing for the CPU still slow its Python side, and are reported alike.
    """

    def __init__(self):
        self._cpus = _usable_cpus()
        self.cores = len(self._cpus) if self._cpus else os.cpu_count() or 1
        self.seconds = None
        self.other_cores = None
        self.load_average = (None, None)
        self.busy = None
        self._start = None

    def __enter__(self) -> "LoadMeter":
        self._threshold = busy_threshold(self.cores)  # torch's threads while the block runs
        self._start = (time.perf_counter(), time.process_time(), _busy_cpu_seconds(self._cpus), _load_average())
        return self

    def __exit__(self, *exc) -> None:
        wall0, own0, busy0, load0 = self._start
        busy1 = _busy_cpu_seconds(self._cpus)
        own = time.process_time() - own0
        self.seconds = time.perf_counter() - wall0
        self.load_average = (load0, _load_average())
        if busy0 is not None and busy1 is not None and self.seconds > 0:
            # other = everything busy minus our own threads; tick rounding can make it slightly negative
            self.other_cores = max(0.0, (busy1 - busy0 - own) / self.seconds)
            self.busy = self.other_cores > self._threshold

    def summary(self) -> dict:
        """``{"seconds", "cores", "other_cores", "load_average", "busy"}`` (rounded; None where unknown)."""
        other = None if self.other_cores is None else round(self.other_cores, 2)
        seconds = None if self.seconds is None else round(self.seconds, 2)
        return {"seconds": seconds, "cores": self.cores, "other_cores": other,
                "load_average": list(self.load_average), "busy": self.busy}

    def note(self, advice: str | None = None) -> str:
        """One sentence for a timing's output: the other processes' share, the load average, and a warning to rerun
        when the machine was busy, followed by :func:`thread_advice`, or by ``advice`` when given (a caller whose
        user has no Python cell to run, such as the race dashboard, says what to do instead). Raises
        ``RuntimeError`` before the block has ended."""
        if self.seconds is None:
            raise RuntimeError("LoadMeter.note() needs the measured block to have ended (use it after the with block)")
        before, after = self.load_average
        load = "" if before is None else f"; 1-minute load average {before} before, {after} after"
        if self.other_cores is None:
            return f"other processes' CPU use could not be read on this system{load}"
        text = (f"other processes kept {self.other_cores:.2f} of {self.cores} cores busy during the timing{load}")
        if self.busy:
            text += ". " + BUSY_WARNING + (thread_advice() if advice is None else advice)
        return text
