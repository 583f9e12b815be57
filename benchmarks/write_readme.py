"""Writes the tables of one `make bench` run into benchmarks/README.md.

Usage:
  python benchmarks/write_readme.py [bench_results.json] [--readme benchmarks/README.md]

Everything between the README's "<!-- make bench: begin -->" and "<!-- make bench: end
-->" lines is replaced by: the run's header (date, CPU model, cores, fp32/bf16 matmul
peaks, load average, mode), one table per benchmark (rows in run order; a row whose peer
did not run or is degenerate on this CPU says so), the wins against other implementations
(ours/peer >= 1; bounds, fractions, degenerate peers, unjudged bf16 rows and rows that
compare two paths of our own left out) and the run's notes. The rest of the README is kept.
"""
import argparse
import json
import os
import sys

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
BEGIN, END = "<!-- make bench: begin -->", "<!-- make bench: end -->"
# bench_util's notes, repeated: this script runs without importing TensorFlow.
DEGENERATE_NOTE = "peer degenerate on this CPU"
BF16_NOT_JUDGED_NOTE = "bf16 not judged on this CPU"


def _fmt(value):
    if value is None:
        return "—"
    if isinstance(value, float):
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-2):
            return "%.3g" % value
        return "%.3f" % value if abs(value) < 10 else "%.1f" % value
    return str(value)


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
    """A degenerate peer, or a bf16 row on a CPU without bf16 matrix units."""
    return str(r.get("note") or "").startswith((DEGENERATE_NOTE, BF16_NOT_JUDGED_NOTE))


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
    if machine.get("bf16"):  # bench_util.mark_unjudged_bf16's line
        lines[0] += " " + machine["bf16"] + "."
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
    left_out = "".join("; %d rows left out as %s" % (len(group), what)
                       for group, what in ((degenerate, DEGENERATE_NOTE),
                                           (unjudged, BF16_NOT_JUDGED_NOTE)) if group)
    lines.append("Against other implementations: ahead (ours / peer >= 1) on %d of %d rows "
                 "(bounds and fractions aside)%s%s." % (
                     len(wins), len(wins) + len(behind), left_out,
                     "; behind: " + "; ".join("%s, %s (%s)" % (r["measure"], r["config"],
                                                               _fmt(r["ratio"]))
                                              for r in behind) if behind else ""))
    if own:
        lines.append("")
        lines.append("%d rows compare two paths of our own (a flag's cost or gain: "
                     "the peer column is ours); they are not counted." % len(own))
    for note in machine.get("notes", []):
        lines.append("- %s" % note)
    return "\n".join(lines).rstrip() + "\n"


def update(readme_text, tables):
    """The README with the text between the markers replaced (markers appended if absent)."""
    if BEGIN in readme_text and END in readme_text:
        head, rest = readme_text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        return head + BEGIN + "\n" + tables + END + tail
    return readme_text.rstrip() + "\n\n" + BEGIN + "\n" + tables + END + "\n"


def main(argv=None):
    """Rewrites the result tables of benchmarks/README.md from a results file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="?", default="bench_results.json")
    parser.add_argument("--readme", default=os.path.join(BENCH_DIR, "README.md"))
    args = parser.parse_args(argv)
    with open(args.results, encoding="utf-8") as f:
        tables = render(json.load(f))
    with open(args.readme, encoding="utf-8") as f:
        text = update(f.read(), tables)
    with open(args.readme + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(args.readme + ".tmp", args.readme)
    print("wrote the tables of %s into %s" % (args.results, args.readme))


if __name__ == "__main__":
    sys.exit(main())
