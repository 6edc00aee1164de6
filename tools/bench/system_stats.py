#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""tools/bench/system_stats.py - the summary of tools/bench/system.sh.

    system_stats.py [-D NS] [-S NS] RUNS_TSV PROGS_TSV
    system_stats.py --self-test

Reads the runs and per-program counters system.sh recorded and prints, per
workload and configuration, the slowdown against "none" paired by round,
the unpaired Welch interval for comparison, the programs' share of the
workload's CPU time from bpf_stats, and each program's cost. The method is
in docs/benchmarks.md ("System overhead") and in the printed legend.
Standard library only: the machines it runs on have no scipy.
"""
import collections
import math
import sys


# ---- Student's t, exactly: the regularized incomplete beta function --------

def betacf(a, b, x):
    """Continued fraction of the incomplete beta function (Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-15:
            break
    return h


def betai(a, b, x):
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
           + a * math.log(x) + b * math.log(1.0 - x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t, df):
    """P(|T| > t) for Student's t with df (real, > 0) degrees of freedom."""
    return betai(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(p, df):
    """The t with P(|T| > t) = 1 - p: the two-sided p interval's multiplier.
    Bisection on the exact distribution; df may be fractional (Welch)."""
    if not df > 0:
        return float("nan")
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > 1.0 - p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_two_sided_p(mid, df) > 1.0 - p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def mean_var(x):
    n = len(x)
    m = sum(x) / n
    v = sum((a - m) ** 2 for a in x) / (n - 1) if n > 1 else float("nan")
    return m, v


def mean_ci(x):
    """Mean and its 95% t interval's half-width (n - 1 degrees of freedom)."""
    m, v = mean_var(x)
    if len(x) < 2:
        return m, float("nan")
    return m, t_quantile(0.95, len(x) - 1) * math.sqrt(v / len(x))


def ratio_ci(y, x):
    """sum(y) / sum(x) with the half-width of its 95% interval by the delta
    method (n - 1 degrees of freedom): the ratio estimator, which weighs
    each unit by its size where a mean of ratios would weigh a short run
    like a long one."""
    n = len(x)
    r = sum(y) / sum(x)
    if n < 2:
        return r, float("nan")
    xm = sum(x) / n
    v = sum((b - r * a) ** 2 for a, b in zip(x, y)) / (n - 1)
    return r, t_quantile(0.95, n - 1) * math.sqrt(v / n) / xm


def welch(x, base):
    """Slowdown mean(x) / mean(base) - 1 in %, with the half-width in % of
    Welch's 95% interval on the difference of the means over mean(base)."""
    mx, vx = mean_var(x)
    mb, vb = mean_var(base)
    if len(x) < 2 or len(base) < 2:
        return 100 * (mx / mb - 1), float("nan")
    ax, ab = vx / len(x), vb / len(base)
    se2 = ax + ab
    if not se2 > 0:
        return 100 * (mx / mb - 1), 0.0
    df = se2 ** 2 / (ax ** 2 / (len(x) - 1) + ab ** 2 / (len(base) - 1))
    return 100 * (mx / mb - 1), 100 * t_quantile(0.95, df) * math.sqrt(se2) / mb


def paired(rounds_x, rounds_base):
    """Slowdown paired by round: the mean over rounds of log(x_r / base_r)
    with its t interval, back on the ratio scale: (mid, low, high) in %."""
    d = [math.log(rounds_x[r] / rounds_base[r]) for r in rounds_x
         if r in rounds_base and rounds_x[r] > 0 and rounds_base[r] > 0]
    if not d:
        return float("nan"), float("nan"), float("nan"), 0
    m, h = mean_ci(d)
    return (100 * (math.exp(m) - 1), 100 * (math.exp(m - h) - 1),
            100 * (math.exp(m + h) - 1), len(d))


def self_test():
    # Two-sided 95% quantiles from the published tables.
    for df, want in ((1, 12.706), (2, 4.303), (5, 2.571), (10, 2.228),
                     (30, 2.042), (60, 2.000), (120, 1.980), (1e6, 1.960)):
        got = t_quantile(0.95, df)
        assert abs(got - want) < 1.5e-3, (df, got, want)
    assert abs(t_quantile(0.99, 10) - 3.169) < 1.5e-3
    # Welch: equal variances and sizes give df = 2n - 2.
    x, b = [1.0, 2.0, 3.0], [2.0, 3.0, 4.0]
    mid, h = welch(x, b)
    want = 100 * t_quantile(0.95, 4) * math.sqrt(2 / 3) / 3
    assert abs(mid + 100 / 3) < 1e-9 and abs(h - want) < 1e-9, (mid, h, want)
    # Ratio: proportional units have an empty interval; the estimate is the
    # ratio of the sums, not the mean of the ratios.
    r, h = ratio_ci([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    assert abs(r - 2) < 1e-12 and abs(h) < 1e-12
    r, h = ratio_ci([1.0, 1.0], [1.0, 3.0])
    assert abs(r - 0.5) < 1e-12 and h > 0
    # Paired: a constant 2% ratio has an empty interval.
    mid, lo, hi, n = paired({1: 1.02, 2: 2.04}, {1: 1.0, 2: 2.0})
    assert abs(mid - 2) < 1e-9 and abs(lo - 2) < 1e-9 and n == 2
    print("system_stats: self-test passed")


# ---- the summary ------------------------------------------------------------

def fmt_ci(mid, lo, hi):
    if math.isnan(lo):
        return f"{mid:+.2f}%"
    return f"{mid:+.2f}% [{lo:+.2f}, {hi:+.2f}]"


def main(argv):
    dispatch_ns, stats_ns = 18.0, 39.0
    args = []
    i = 0
    while i < len(argv):
        if argv[i] == "-D":
            dispatch_ns = float(argv[i + 1])
            i += 2
        elif argv[i] == "-S":
            stats_ns = float(argv[i + 1])
            i += 2
        elif argv[i] == "--self-test":
            self_test()
            return 0
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2

    def table(path):
        lines = [l.rstrip("\n").split("\t") for l in open(path)]
        head = lines[0]
        return [dict(zip(head, l)) for l in lines[1:] if l and l[0]]

    runs = table(args[0])
    progs = table(args[1])
    wls = list(dict.fromkeys(r["workload"] for r in runs))
    cfgs = list(dict.fromkeys(r["config"] for r in runs))
    if "none" in cfgs:
        cfgs.remove("none")
        cfgs.insert(0, "none")
    by = collections.defaultdict(list)
    for r in runs:
        by[(r["workload"], r["config"])].append(r)
    stats_runs = sum(1 for r in runs if r["bpf_stats"] == "1")

    print(f"""
Method. Per round the configurations run in a random order, each workload
-k times per configuration. slowdown = ratio to "none" - 1, paired by round:
per round the configuration's mean over that round's mean of "none", the log
ratio averaged over the rounds with Student's t 95% interval (rounds - 1
degrees of freedom, exact quantile), shown as [low, high]. welch +-: the
half-width of the unpaired Welch interval on all runs, for comparison.
wall: elapsed. cpu: the workload's user + system time (a program's run time is
charged to the task it runs in: the workload's, or a kernel thread's for block
completions, which the cpu column then leaves out). prog%: the
configuration's programs' share of the machine's busy CPU time (they run on
every event of the machine, the workload's and everyone else's): the sum over
the runs of (run time + runs x {dispatch_ns:g} ns dispatch) over the sum of the
CPU time all CPUs were busy during the runs, with its 95% interval (ratio
estimator, delta method, runs - 1 degrees of freedom); stats%: what bpf_stats itself adds
(runs x {stats_ns:g} ns) in the same terms, a part of every measured slowdown while
bpf_stats is on ({stats_runs} of {len(runs)} runs).
tool: the daemon's or tracer's own CPU seconds per run and peak RSS.""")

    for wl in wls:
        base = by.get((wl, "none"), [])
        print(f"\n{wl}")
        print(f"  {'config':<9} {'runs':>4} {'wall s':>7} {'slowdown wall':>25} {'welch+-':>7} "
              f"{'cpu s':>7} {'slowdown cpu':>25} {'welch+-':>7} {'prog%':>16} {'stats%':>6} "
              f"{'tool s':>6} {'MiB':>6}")
        for cfg in cfgs:
            x = by.get((wl, cfg))
            if not x:
                continue
            wall = [float(r["wall_s"]) for r in x]
            cpu = [float(r["cpu_s"]) for r in x]
            cells = {}
            for col, vals in (("wall", wall), ("cpu", cpu)):
                cells[col] = ("-", "-")
                if cfg != "none" and base:
                    bvals = [float(r[col + "_s"]) for r in base]
                    rx = collections.defaultdict(list)
                    rb = collections.defaultdict(list)
                    for r, v in zip(x, vals):
                        rx[r["round"]].append(v)
                    for r, v in zip(base, bvals):
                        rb[r["round"]].append(v)
                    mid, lo, hi, n = paired({k: sum(v) / len(v) for k, v in rx.items()},
                                            {k: sum(v) / len(v) for k, v in rb.items()})
                    wm, wh = welch(vals, bvals)
                    cells[col] = (fmt_ci(mid, lo, hi), f"{wh:.2f}")
                    print(f"slowdown {wl} {cfg} {col} {fmt_ci(mid, lo, hi)} paired over {n} "
                          f"rounds; welch +-{wh:.2f}", file=sys.stderr)
            on = [r for r in x if r["bpf_stats"] == "1" and float(r["busy_s"]) > 0]
            pc = ss = "-"
            if on and cfg != "none":
                busy = [float(r["busy_s"]) * 1e9 for r in on]
                m, h = ratio_ci([float(r["bpf_run_ns"]) + float(r["bpf_run_cnt"]) * dispatch_ns
                                 for r in on], busy)
                pc = f"{100 * m:.3f}+-{100 * h:.3f}" if not math.isnan(h) else f"{100 * m:.3f}"
                ss = f"{100 * stats_ns * sum(float(r['bpf_run_cnt']) for r in on) / sum(busy):.3f}"
                print(f"progshare {wl} {cfg} {pc}% of the busy CPU; bpf_stats adds "
                      f"{ss}%", file=sys.stderr)
            tool = sum(float(r["tool_cpu_s"]) for r in x) / len(x)
            hwm = max(float(r["tool_hwm_kb"]) for r in x) / 1024
            print(f"  {cfg:<9} {len(x):>4} {mean_var(wall)[0]:>7.3f} {cells['wall'][0]:>25} "
                  f"{cells['wall'][1]:>7} {mean_var(cpu)[0]:>7.3f} {cells['cpu'][0]:>25} "
                  f"{cells['cpu'][1]:>7} {pc:>16} {ss:>6} {tool:>6.3f} {hwm:>6.1f}")

    # Per program: which program costs what, per workload run.
    nruns = collections.Counter((r["workload"], r["config"]) for r in runs
                                if r["bpf_stats"] == "1")
    cpu_sum = collections.defaultdict(float)
    for r in runs:
        if r["bpf_stats"] == "1":
            cpu_sum[(r["workload"], r["config"])] += float(r["busy_s"])
    stat_keys = {(r["round"], r["config"], r["workload"], r["rep"]) for r in runs
                 if r["bpf_stats"] == "1"}
    per = collections.defaultdict(lambda: [0.0, 0.0])
    for p in progs:
        # "none" loads nothing: what appeared while it "started" is another
        # user's.
        if p["config"] == "none":
            continue
        if (p["round"], p["config"], p["workload"], p["rep"]) not in stat_keys:
            continue
        acc = per[(p["workload"], p["config"], p["prog"])]
        acc[0] += float(p["run_ns"])
        acc[1] += float(p["run_cnt"])
    if per:
        print("\nPer program (bpf_stats on): runs and run time per workload run, ns per "
              "program run, share of the machine's busy CPU time (run time + dispatch).")
        for wl in wls:
            for cfg in cfgs:
                rows = [(k[2], v) for k, v in per.items() if k[0] == wl and k[1] == cfg
                        and v[1] > 0]
                if not rows:
                    continue
                n = nruns[(wl, cfg)]
                cs = cpu_sum[(wl, cfg)]
                rows.sort(key=lambda kv: -kv[1][0])
                print(f"  {wl} {cfg}:")
                for name, (ns, cnt) in rows:
                    print(f"    {name:<22} {cnt / n:>10.0f} runs {ns / n / 1e6:>8.3f} ms "
                          f"{ns / cnt:>7.0f} ns/run {100 * (ns + cnt * dispatch_ns) / (cs * 1e9):>7.3f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
