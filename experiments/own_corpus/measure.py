"""Running a command while measuring it: wall time, the peak memory of its whole process tree
(a parallel ``prepare-data`` forks workers; their memory counts too), and killing it midway."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence

import psutil

MB = 1024 * 1024


def _high_water_mark(pid: int) -> int:
    """The kernel's peak RSS of process ``pid`` so far (``VmHWM``), bytes; 0 when unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tree_memory(root: psutil.Process) -> Dict[str, int]:
    """Of ``root`` and all its descendants now: ``rss``, the bytes resident in all of them (pages
    that forked workers share with their parent count once per process: an upper bound), and
    ``hwm``, the largest single process's peak RSS so far (kernel ``VmHWM``). Zeros once gone."""
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return {"rss": 0, "hwm": 0}
    rss = hwm = 0
    for proc in procs:
        try:
            rss += proc.memory_info().rss
        except psutil.Error:
            continue
        hwm = max(hwm, _high_water_mark(proc.pid))
    return {"rss": rss, "hwm": hwm}


def _log_says(log_path: Path, text: str) -> bool:
    try:
        return text in log_path.read_text(errors="replace")
    except OSError:
        return False


def run_measured(cmd: Sequence[str], log_path: Path, env: Optional[Mapping[str, str]] = None,
                 timeout: float = 3600, interval: float = 0.2,
                 kill_after: Optional[float] = None,
                 kill_when: Optional[str] = None) -> Dict[str, Any]:
    """Run ``cmd`` (output to ``log_path``), polling its process tree's memory every
    ``interval`` seconds. ``kill_after`` seconds in, or as soon as its output contains
    ``kill_when``, SIGKILL its whole process group (a crash or an OOM kill, as far as the files
    on disk can tell).

    Returns ``wall_s``, ``returncode``, ``killed``, ``peak_rss_mb`` (the process tree's peak
    sum of RSS, polled) and ``largest_process_mb`` (the peak RSS of its largest single process,
    from the kernel's high-water marks: exact, unless a process lived between two polls)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    peak = largest = 0
    killed = False
    with open(log_path, "w") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT,
                                env=dict(env) if env is not None else None,
                                start_new_session=True)          # its own group: kill them all
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            now = tree_memory(root)
            peak, largest = max(peak, now["rss"]), max(largest, now["hwm"])
            elapsed = time.perf_counter() - start
            killed = ((kill_after is not None and elapsed >= kill_after)
                      or (kill_when is not None and _log_says(log_path, kill_when)))
            if killed or elapsed >= timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                if not killed:
                    raise TimeoutError(f"{' '.join(cmd[:4])} ... still running after "
                                       f"{timeout:.0f} s; killed (log: {log_path})")
                break
            time.sleep(interval)
    wall = time.perf_counter() - start
    if killed:  # the workers may outlive their killed parent for a moment
        _wait_group_gone(proc.pid)
    return {"wall_s": wall, "returncode": proc.returncode, "killed": killed,
            "peak_rss_mb": peak / MB, "largest_process_mb": largest / MB}


def _wait_group_gone(pgid: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def check_ok(result: Mapping[str, Any], cmd: Sequence[str], log_path: Path) -> None:
    """RuntimeError with the log's tail when a run that should have succeeded did not."""
    if result["returncode"] != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {result['returncode']}:\n{tail}")
