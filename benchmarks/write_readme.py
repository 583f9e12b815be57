"""Writes the tables of one `make bench` run into benchmarks/README.md.

Usage:
  python benchmarks/write_readme.py [bench_results.json] [--readme benchmarks/README.md]

The README keeps one set of tables per machine kind (CPU vendor, and "AVX2" after it for a
CPU without AVX-512: `machine_kind`): a run on an AMD CPU with AVX-512 replaces what is
between "<!-- make bench: begin AMD -->" and "<!-- make bench: end AMD -->", one on an
AVX2-only AMD CPU the "AMD AVX2" block, one on an Intel CPU the "Intel" block, and so on (a
block is appended when its kind has none). It is replaced by: the run's header (date, CPU
vendor and model, cores, the GEMM library of each side, fp32/bf16 matmul peaks, load
average, mode), one table per benchmark (rows in run order; a row whose peer did not run or
is degenerate on this CPU says so), the wins against other implementations (ours/peer >= 1;
bounds, fractions, degenerate peers, unjudged bf16 rows and rows that compare two paths of
our own left out), the rows behind their peer on that CPU and the run's notes. The rest of
the README is kept.
"""
import argparse
import json
import os
import sys

from bench_format import format_number

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
BEGIN, END = "<!-- make bench: begin -->", "<!-- make bench: end -->"
# bench_util's notes, repeated: this script runs without importing TensorFlow.
DEGENERATE_NOTE = "peer degenerate on this CPU"
BF16_NOT_JUDGED_NOTE = "bf16 not judged on this CPU"
NOT_MEASURABLE_NOTE = "not measurable on this CPU"
GOAL_NOTE = "goal >="


def _fmt(value):
    return format_number(value, missing="—")


def _groups(rows):
    """[(stage, rows)] in run order: consecutive rows whose measures start with the same
    word (pretraining, inference, fine-tuning, packing, ...) make one table."""
    groups = []
    for r in rows:
        family = r["measure"].split()[0].rstrip(":")
        if groups and groups[-1][0] == family:
            groups[-1][1].append(r)
        else:
            groups.append((family, [r]))
    return groups


def _left_out(r):
    """A degenerate peer, a bf16 row on a CPU without avx512_bf16 or AMX, or a row whose goal
    is not measurable on this CPU."""
    note = str(r.get("note") or "")
    return note.startswith((DEGENERATE_NOTE, BF16_NOT_JUDGED_NOTE)) or NOT_MEASURABLE_NOTE in note


def is_judged(r):
    """A row measured against another implementation that counts: a ratio, not a bound or
    a fraction, not a degenerate peer or an unjudged bf16 row, not ours against ours."""
    return (r.get("ratio") is not None and r.get("unit") != "fraction"
            and "bound" not in r["measure"] and not _left_out(r)
            and r.get("against", "peer") != "ours")


def is_win(r):
    """ours/peer >= 1 on a judged row (see is_judged)."""
    return is_judged(r) and r["ratio"] >= 1.0


def render(results):
    """The markdown between the markers."""
    machine, rows = (results.get("machine", {}), results["rows"]) if isinstance(
        results, dict) else ({}, results)
    load = machine.get("load")
    lines = ["Run of %s (`%s` mode, %.0f s) on %s, %s cores; matmul peak (2048^3 tf.matmul) "
             "fp32 %s, bf16 %s GFLOP/s; load average at the end %s. Ratio = ours / peer, "
             "higher is better." % (
                 machine.get("date", "?"), machine.get("mode", "?"),
                 machine.get("seconds") or 0, machine.get("cpu", "?"),
                 machine.get("cores", "?"), _fmt(machine.get("fp32_peak_gflops")),
                 _fmt(machine.get("bf16_peak_gflops")),
                 " / ".join(str(x) for x in load) if load else "?")]
    gemm = machine.get("gemm") or {}
    if gemm:
        lines[0] += " GEMM library: ours %s; torch %s." % (gemm.get("ours") or "?",
                                                          gemm.get("peer") or "not run")
    if machine.get("isa"):  # bert_tf2.machine.isa_summary(), as `make bench` prints it first
        lines[0] += " CPU ISA: %s." % machine["isa"]
    if machine.get("bf16"):  # bench_util.mark_unjudged_bf16's line
        lines[0] += " " + machine["bf16"] + "."
    if machine.get("group_seconds"):  # run_all: each group's wall time
        lines[0] += " Minutes per group: %s." % ", ".join(
            "%s %.1f" % (name, seconds / 60) for name, seconds in machine["group_seconds"])
    lines.append("")
    for family, group in _groups(rows):
        lines += ["**%s**" % family, "",
                  "| measure | config | ours | peer | unit | ours / peer | note |",
                  "|---|---|---|---|---|---|---|"]
        lines += ["| %s | %s | %s | %s | %s | %s | %s |" % (
            r["measure"], r["config"], _fmt(r["ours"]), _fmt(r["peer"]), r["unit"],
            _fmt(r.get("ratio")), r.get("note") or "") for r in group]
        lines.append("")
    wins = [r for r in rows if is_win(r)]
    behind = [r for r in rows if is_judged(r) and not is_win(r)]
    own = [r for r in rows if r.get("against") == "ours" and r.get("ratio") is not None]
    degenerate = [r for r in rows if str(r.get("note") or "").startswith(DEGENERATE_NOTE)]
    unjudged = [r for r in rows if str(r.get("note") or "").startswith(BF16_NOT_JUDGED_NOTE)]
    unmeasurable = [r for r in rows if NOT_MEASURABLE_NOTE in str(r.get("note") or "")]
    left_out = "".join("; %d rows left out as %s" % (len(group), what)
                       for group, what in ((degenerate, DEGENERATE_NOTE),
                                           (unjudged, BF16_NOT_JUDGED_NOTE),
                                           (unmeasurable, NOT_MEASURABLE_NOTE)) if group)
    lines.append("Against other implementations on %s: ahead (ours / peer >= 1) on %d of %d "
                 "rows (bounds and fractions aside)%s." % (
                     cpu_name(machine), len(wins), len(wins) + len(behind), left_out))
    lines.append(behind_line(machine, rows))
    goals = goal_line(rows)
    if goals:
        lines.append(goals)
    if own:
        lines.append("")
        lines.append("%d rows compare two paths of our own (a flag's cost or gain: "
                     "the peer column is ours); they are not counted." % len(own))
    for note in machine.get("notes", []):
        lines.append("- %s" % note)
    return "\n".join(lines).rstrip() + "\n"


def cpu_name(machine):
    """"<vendor> CPU <model>" of a run's machine header (what a table's claims hold on)."""
    vendor = machine.get("cpu_vendor")
    cpu = machine.get("cpu", "?")
    return "%s CPU %s" % (vendor, cpu) if vendor and vendor not in cpu else cpu


def behind_line(machine, rows):
    """One line naming, for this run's CPU, every counted row behind its peer."""
    behind = [r for r in rows if is_judged(r) and not is_win(r)]
    return "Behind their peer on %s: %s." % (
        cpu_name(machine), "; ".join("%s, %s (%s)" % (r["measure"], r["config"],
                                                      _fmt(r["ratio"])) for r in behind)
        if behind else "none")


def goal_line(rows):
    """One line counting the rows with a speed goal (bench_util.goal_note) by verdict, None
    when no row has one."""
    verdicts = {}
    for r in rows:
        note = str(r.get("note") or "")
        if note.startswith(GOAL_NOTE):
            verdict = note.split(": ", 1)[1].split(" (")[0].split(",")[0]
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
    if not verdicts:
        return None
    return "Speed goals: %s." % ", ".join("%d %s" % (n, v) for v, n in sorted(verdicts.items()))


def machine_kind(machine):
    """The kind of a run's machine whose tables it replaces: its CPU vendor, "<vendor> AVX2"
    when its ISA line says it has no AVX-512 (the kernels, and so the ratios, differ), None
    when the vendor is unknown."""
    vendor = machine.get("cpu_vendor")
    if not vendor or vendor == "unknown":
        return None
    return vendor + " AVX2" if "AVX-512 no" in (machine.get("isa") or "") else vendor


def markers(kind):
    """The (begin, end) markers of the tables of one machine kind ("AMD", "Intel", ...)."""
    return BEGIN.replace(" -->", " %s -->" % kind), END.replace(" -->", " %s -->" % kind)


def update(readme_text, tables, kind=None):
    """The README with the text between the markers of machine `kind` replaced (the
    unnamed markers when kind is None; markers appended if absent): one table per
    machine kind, each replaced only by a run on that kind."""
    begin, end = markers(kind) if kind else (BEGIN, END)
    if begin in readme_text and end in readme_text:
        head, rest = readme_text.split(begin, 1)
        tail = rest.split(end, 1)[1]
        return head + begin + "\n" + tables + end + tail
    return readme_text.rstrip() + "\n\n" + begin + "\n" + tables + end + "\n"


def main(argv=None):
    """Rewrites the result tables of benchmarks/README.md from a results file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="?", default="bench_results.json")
    parser.add_argument("--readme", default=os.path.join(BENCH_DIR, "README.md"))
    args = parser.parse_args(argv)
    with open(args.results, encoding="utf-8") as f:
        results = json.load(f)
    tables = render(results)
    kind = machine_kind(results.get("machine") or {}) if isinstance(results, dict) else None
    with open(args.readme, encoding="utf-8") as f:
        text = update(f.read(), tables, kind)
    with open(args.readme + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(args.readme + ".tmp", args.readme)
    print("wrote the tables of %s into %s" % (args.results, args.readme))


if __name__ == "__main__":
    sys.exit(main())
