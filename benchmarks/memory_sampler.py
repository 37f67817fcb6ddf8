#!/usr/bin/env python3
"""Memory sampler for the wispack benchmarks (Python 3 standard library only).

Polls a whole process tree (a root pid and all of its live descendants) every
--interval seconds and reads /proc/<pid>/smaps_rollup of each process. Per
tick it sums, over the processes alive at that tick:

  pss  = Pss                              (shared pages split between sharers)
  uss  = Private_Clean + Private_Dirty    (memory only this process holds)
  rss  = Rss                              (shared pages counted once per process)

and keeps the peak of each sum over the run, the root's own peak PSS, the
area under the summed-PSS curve and the achieved tick intervals. It runs as a
separate process, so its own work never shows up in the figures; it raises
its own scheduling priority when allowed (nice -10), so that busy workers do
not stretch its ticks.

Protocol (used by fork_vs_mclapply.R):
  python3 memory_sampler.py --pid PID --out SUMMARY.csv [--interval 0.01]
                            [--trace TRACE.csv] [--trace-every 0.05]
  - writes SUMMARY.csv.ready after the first tick (the caller waits for it);
  - stops when SUMMARY.csv.stop appears or the root process is gone, takes a
    final tick and writes SUMMARY.csv (one header line, one data line, MB).
Descendants are found from the parent pids in /proc/<pid>/stat (read once
per new pid), since /proc/<pid>/task/<tid>/children is not available on
every kernel. The summary also reports the sampler's own CPU seconds.
"""

import argparse
import os
import sys
import time

FIELDS = ("Rss", "Pss", "Private_Clean", "Private_Dirty")


def read_rollup(pid):
    """Return (rss, pss, uss) in kB, or None when the process is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            text = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    values = {}
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        if name in FIELDS:
            values[name] = int(rest.split()[0])
    if "Pss" not in values:  # zombies have an empty rollup
        return None
    return (values.get("Rss", 0), values["Pss"],
            values.get("Private_Clean", 0) + values.get("Private_Dirty", 0))


def read_ppid(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    # the command name may contain spaces and parentheses: split after the last ')'
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[1]) if len(fields) >= 2 else None


class Tree:
    """The root and its live descendants. A pid's parent is read from /proc/<pid>/stat
    once, when the pid first appears, so a tick costs one listdir of /proc."""

    def __init__(self, root, exclude):
        self.root, self.exclude, self.parents = root, exclude, {}

    def members(self):
        present = set()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                pid = int(entry)
                present.add(pid)
                if pid not in self.parents:
                    self.parents[pid] = read_ppid(pid)
        for pid in list(self.parents):
            if pid not in present:
                del self.parents[pid]
        children = {}
        for pid, ppid in self.parents.items():
            children.setdefault(ppid, []).append(pid)
        members, stack = [], [self.root]
        while stack:
            pid = stack.pop()
            if pid == self.exclude:
                continue
            members.append(pid)
            stack.extend(children.get(pid, ()))
        return members


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--interval", type=float, default=0.01)
    parser.add_argument("--trace")
    parser.add_argument("--trace-every", type=float, default=0.05)
    parser.add_argument("--max-seconds", type=float, default=6 * 3600)
    args = parser.parse_args()

    own = os.getpid()
    try:  # keep the 10 ms cadence when the measured workers saturate the CPUs
        os.nice(-10)
    except OSError:
        pass
    stop_file = args.out + ".stop"
    tree = Tree(args.pid, own)
    trace = open(args.trace, "w") if args.trace else None
    if trace:
        trace.write("t,procs,pss_mb,uss_mb,rss_mb,root_pss_mb\n")
    peak = {"pss": 0, "uss": 0, "rss": 0, "root_pss": 0, "procs": 0}
    first_root_pss = None
    auc_kb_s = 0.0
    intervals = []
    start = last = time.monotonic()
    last_trace = -1e9
    ticks = 0
    seen = set()
    stopping = False
    while True:
        now = time.monotonic()
        if ticks:
            intervals.append(now - last)
        members = tree.members()
        sums = [0, 0, 0]
        root_pss = None
        procs = 0
        for pid in members:
            rollup = read_rollup(pid)
            if rollup is None:
                continue
            procs += 1
            seen.add(pid)
            for i in range(3):
                sums[i] += rollup[i]
            if pid == args.pid:
                root_pss = rollup[1]
        if root_pss is None and ticks > 0 and not os.path.exists(f"/proc/{args.pid}"):
            break
        if root_pss is not None and first_root_pss is None:
            first_root_pss = root_pss
        if ticks:
            auc_kb_s += sums[1] * (now - last)
        peak["rss"] = max(peak["rss"], sums[0])
        peak["pss"] = max(peak["pss"], sums[1])
        peak["uss"] = max(peak["uss"], sums[2])
        peak["root_pss"] = max(peak["root_pss"], root_pss or 0)
        peak["procs"] = max(peak["procs"], procs)
        if trace and (now - last_trace >= args.trace_every or stopping):
            trace.write("%.3f,%d,%.1f,%.1f,%.1f,%.1f\n" % (
                now - start, procs, sums[1] / 1024, sums[2] / 1024, sums[0] / 1024,
                (root_pss or 0) / 1024))
            last_trace = now
        last = now
        ticks += 1
        if ticks == 1:
            open(args.out + ".ready", "w").close()
        if stopping or now - start > args.max_seconds:
            break
        if os.path.exists(stop_file):
            stopping = True  # one more tick, then write the summary
            continue
        time.sleep(max(0.0, args.interval - (time.monotonic() - now)))

    if trace:
        trace.close()
    intervals.sort()
    median = intervals[len(intervals) // 2] if intervals else float("nan")
    p95 = intervals[int(0.95 * (len(intervals) - 1))] if intervals else float("nan")
    longest = intervals[-1] if intervals else float("nan")
    header = ("peak_pss_mb,peak_uss_mb,peak_rss_mb,peak_root_pss_mb,root_pss_start_mb,"
              "pss_auc_mb_s,samples,interval_median_ms,interval_p95_ms,interval_max_ms,"
              "max_procs,pids_seen,sampled_s,sampler_cpu_s")
    cpu = os.times()
    row = "%.1f,%.1f,%.1f,%.1f,%.1f,%.2f,%d,%.2f,%.2f,%.2f,%d,%d,%.3f,%.3f" % (
        peak["pss"] / 1024, peak["uss"] / 1024, peak["rss"] / 1024, peak["root_pss"] / 1024,
        (first_root_pss or 0) / 1024, auc_kb_s / 1024, ticks, 1000 * median, 1000 * p95,
        1000 * longest, peak["procs"], len(seen), time.monotonic() - start,
        cpu.user + cpu.system)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(header + "\n" + row + "\n")
    os.replace(tmp, args.out)
    for suffix in (".ready", ".stop"):
        try:
            os.remove(args.out + suffix)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
