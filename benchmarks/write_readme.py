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

Each kind's run of record is also kept as data: rendering a block writes that run's
bench_results.json to benchmarks/results/<kind>.json beside the README ("amd.json",
"intel.json", "amd-avx2.json": `results_path`), committed with the README, so a later
reader has the rows, not only their markdown. From every stored kind, each render
regenerates the summary between "<!-- make bench: begin by vendor -->" and its end marker
(`vendor_summary`): one line per counted row, its ratio on each kind and where it holds.

  python benchmarks/write_readme.py --import-block KIND [--readme ...]

reads the KIND block already rendered in the README back into rows and machine facts
(`parse_block`) and stores them as that kind's JSON: for runs whose bench_results.json is
gone. It refuses when the rows read back do not render the very same block.
"""
import argparse
import json
import os
import re
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
                 machine.get("date") or "?", machine.get("mode") or "?",
                 machine.get("seconds") or 0, machine.get("cpu") or "?",
                 machine.get("cores") or "?", _fmt(machine.get("fp32_peak_gflops")),
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
    cpu = machine.get("cpu") or "?"
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
            verdict = note.split(": ", 1)[1].split(" (")[0].split(",")[0].split(";")[0]
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


# ---------------------------------------------------------------------------
# Each kind's run of record as data, and the summary across the kinds
# ---------------------------------------------------------------------------

SUMMARY_KIND = "by vendor"  # its markers: markers(SUMMARY_KIND); no CPU vendor is named so
# Printed in a serving row's config at batch 1: measured, so it differs between runs; and
# the CPU's instruction sets some rows end their config with ("; ISA: ...",
# bench_runtime_doors.py), which differ between machine kinds by design.
_MEASURED_IN_CONFIG = re.compile(r" \(batch-1 latency [^)]*\)|; ISA: .*$")


def results_path(results_dir, kind):
    """The stored run of record of machine `kind`: "AMD AVX2" -> <results_dir>/amd-avx2.json."""
    return os.path.join(results_dir, kind.lower().replace(" ", "-") + ".json")


def _write_json(path, data):
    """`data` as JSON at path, written whole beside it, then renamed over it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(path + ".tmp", path)


def store_run(results, kind, results_dir):
    """Keeps `results` (a bench_results.json) as the run of record of `kind`; its path."""
    path = results_path(results_dir, kind)
    _write_json(path, dict(results, kind=kind))
    return path


def stored_runs(results_dir):
    """{kind: results} of every stored run of record, in file name order."""
    runs = {}
    if os.path.isdir(results_dir):
        for name in sorted(os.listdir(results_dir)):
            if name.endswith(".json"):
                with open(os.path.join(results_dir, name), encoding="utf-8") as f:
                    results = json.load(f)
                runs[results.get("kind") or name[:-len(".json")]] = results
    return runs


def row_key(r):
    """What matches a row across runs: its measure and config, less the measured numbers
    some configs print (a serving row's batch-1 latencies)."""
    return r["measure"], _MEASURED_IN_CONFIG.sub("", r["config"])


def row_goal(r):
    """The speed goal of a row with a goal note ("goal >= 1.6x: met" -> 1.6), else None."""
    match = re.match(re.escape(GOAL_NOTE) + r" ([0-9.]+)x", str(r.get("note") or ""))
    return float(match.group(1)) if match else None


def counted(r):
    """A row the summary judges per kind: a judged row (is_judged), or a row with a speed
    goal measured on this CPU (the bf16 goals against our own fp32 among them)."""
    return is_judged(r) or (row_goal(r) is not None and r.get("ratio") is not None
                            and not _left_out(r))


def holds(r):
    """A counted row holds: ours / peer reaches its goal, or 1 when it has none."""
    return r["ratio"] >= (row_goal(r) or 1.0)


def _cell(r):
    """A kind's cell of the summary: its ratio, or why the row is not judged there."""
    if r is None:
        return "—"
    if counted(r):
        return _fmt(r["ratio"])
    note = str(r.get("note") or "")
    why = next((n for n in (DEGENERATE_NOTE, BF16_NOT_JUDGED_NOTE, NOT_MEASURABLE_NOTE)
                if n in note), re.split(r" \(|; |: ", note)[0] or "no ratio")
    return "%s, not judged (%s)" % (_fmt(r.get("ratio")), why)


def _verdict(kinds, by_kind):
    """Where a row holds: "all", "<kind> only", "<kind>, <kind> only" or "none", and on
    which kinds it was not judged."""
    judged = [k for k in kinds if by_kind.get(k) is not None and counted(by_kind[k])]
    holding = [k for k in judged if holds(by_kind[k])]
    verdict = ("all" if len(holding) == len(kinds) else "none" if not holding
               else ", ".join(holding) + " only")
    missing = [k for k in kinds if k not in judged]
    return verdict, " (not judged on %s)" % ", ".join(missing) if missing else ""


def _host_line(kind, machine, recovered):
    """One kind's host: CPU, cores, ISA, run date; what a backfilled run could not keep."""
    line = "- **%s**: %s, %s cores, `CPU ISA: %s`; run of %s" % (
        kind, cpu_name(machine), machine.get("cores") or "?", machine.get("isa") or "unknown",
        machine.get("date") or "?")
    if recovered:
        line += " (%s)" % recovered["what"]
    return line


def vendor_summary(runs):
    """The markdown between the summary's markers, from {kind: results} of the runs of
    record: one line per counted row (counted on any kind), its ratio on each kind and where
    it holds (its goal, or ours / peer >= 1)."""
    kinds = sorted(runs)
    by_key, order = {}, []
    for kind in kinds:
        after = -1  # a row only this kind ran goes after the row it followed in its run
        for r in runs[kind]["rows"]:
            key = row_key(r)
            if key not in by_key:
                order.insert(after + 1, key)
            by_key.setdefault(key, {})[kind] = r
            after = order.index(key)
    keys = [key for key in order if any(map(counted, by_key[key].values()))]
    lines = ["Runs of record, one per machine kind (`benchmarks/results/<kind>.json`):"] + [
        _host_line(k, runs[k].get("machine") or {}, runs[k].get("recovered_from"))
        for k in kinds] + [
            "", "| measure | config | goal | %s | holds on |" % " | ".join(kinds),
            "|---|---|---|%s---|" % ("---|" * len(kinds))]
    verdicts = {}
    for key in keys:
        by_kind = by_key[key]
        goals = sorted({row_goal(r) for r in by_kind.values()} - {None})
        verdict, missing = _verdict(kinds, by_kind)
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        lines.append("| %s | %s | %s | %s | %s |" % (
            key[0], key[1], " / ".join(">= %.1fx" % g for g in goals),
            " | ".join(_cell(by_kind.get(k)) for k in kinds), verdict + missing))
    lines += ["", "%d rows counted on at least one kind (judged against another "
              "implementation, or with a speed goal); they hold on %s. A row with a goal "
              "holds where its ratio reaches it, any other where ours / peer >= 1; \"—\": "
              "that kind's run has no such row." % (len(keys), "; ".join(
                  "%s: %d" % (v, n) for v, n in sorted(verdicts.items(),
                                                        key=lambda item: -item[1])))]
    return "\n".join(lines) + "\n"


def update_summary(readme_text, summary):
    """The README with the summary between its markers; a README without them gets them
    before its first kind's tables (the summary heads them), or at its end."""
    begin, end = markers(SUMMARY_KIND)
    first = readme_text.find(BEGIN.replace(" -->", " "))
    if begin in readme_text or first < 0:
        return update(readme_text, summary, SUMMARY_KIND)
    return readme_text[:first] + begin + "\n" + summary + end + "\n\n" + readme_text[first:]


# ---------------------------------------------------------------------------
# Reading a rendered block back (runs whose bench_results.json is gone)
# ---------------------------------------------------------------------------

_HEADER = re.compile(
    r"^Run of (?P<date>.*?) \(`(?P<mode>[^`]*)` mode, (?P<seconds>[0-9.]+) s\) on (?P<cpu>.*), "
    r"(?P<cores>\S+) cores; matmul peak \(2048\^3 tf\.matmul\) fp32 (?P<fp32>\S+), "
    r"bf16 (?P<bf16>\S+) GFLOP/s; load average at the end (?P<load>.*?)\. Ratio = ours / "
    r"peer, higher is better\.(?: GEMM library: ours (?P<gemm_ours>.*?); torch "
    r"(?P<gemm_peer>.*?)\.)?(?: CPU ISA: (?P<isa>.*?)\.)?"
    r"(?: (?!Minutes per group: )(?P<bf16_line>.*?)\.)?"  # bench_util.mark_unjudged_bf16's
    r"(?: Minutes per group: (?P<minutes>.*)\.)?$")
# Words that mark a row whose peer column is another path of our own (against "ours"):
# the tables do not print `against`, the rows' configs and measures say it.
OURS_CUES = ("vs ours", "vs our ", "our serving process vs", "Predictor vs SavedModel",
             "(ours)")
RECOVERED_WHAT = ("read back from its rendered block by `--import-block`: numbers to their "
                  "printed digits, `against` from the rows' words; row fields the tables do "
                  "not print, such as max_abs_diff, are not kept")


def _number(text):
    """A table cell back into its value: None for "—", else an int or a float."""
    if text in ("—", "?"):
        return None
    return int(text) if re.fullmatch(r"-?[0-9]+", text) else float(text)


def _machine_of(header, notes, kind):
    """The machine dict a block's header line was rendered from (render's first line)."""
    match = _HEADER.match(header)
    if not match:
        raise ValueError("the %s block's first line is not a run's header: %.80s" % (
            kind, header))
    m = match.groupdict()
    vendor = next((v.group(1) for v in (re.match(r"CPU: .* \((\w+)\), ", n) for n in notes)
                   if v), kind.split()[0])
    machine = {"date": None if m["date"] == "?" else m["date"],
               "mode": None if m["mode"] == "?" else m["mode"],
               "seconds": float(m["seconds"]), "cpu": None if m["cpu"] == "?" else m["cpu"],
               "cpu_vendor": vendor, "cores": _number(m["cores"]), "isa": m["isa"],
               "fp32_peak_gflops": _number(m["fp32"]), "bf16_peak_gflops": _number(m["bf16"]),
               "load": None if m["load"] == "?" else [float(x) for x in m["load"].split(" / ")],
               "bf16": m["bf16_line"], "notes": notes, "gemm": None, "group_seconds": None}
    if m["gemm_ours"] is not None:
        machine["gemm"] = {"ours": None if m["gemm_ours"] == "?" else m["gemm_ours"],
                           "peer": None if m["gemm_peer"] == "not run" else m["gemm_peer"]}
    if m["minutes"]:
        machine["group_seconds"] = [[name, float(minutes) * 60] for name, minutes in (
            part.rsplit(" ", 1) for part in m["minutes"].split(", "))]
    return machine


def parse_block(block, kind):
    """{"machine", "rows"} read back from a block render() wrote: each table line's measure,
    config, ours, peer, unit, ratio and note, `against` "ours" where OURS_CUES say so, and
    the header's machine facts. ValueError names what does not parse."""
    lines = block.splitlines()
    rows, notes, after_tables = [], [], False
    for number, line in enumerate(lines[1:], 2):
        if line.startswith("| measure |") or line.startswith("|---"):
            continue
        if line.startswith("| "):
            cells = [c.strip() for c in line[2:-2].split(" | ")]
            if len(cells) != 7:
                raise ValueError("line %d of the %s block has %d cells, not 7: %.80s" % (
                    number, kind, len(cells), line))
            measure, config, ours, peer, unit, ratio, note = cells
            text = measure + ", " + config
            rows.append({"measure": measure, "config": config, "ours": _number(ours),
                         "peer": _number(peer), "unit": unit, "ratio": _number(ratio),
                         "against": "ours" if any(c in text for c in OURS_CUES) else "peer",
                         "note": note or None})
        elif line.startswith("Against other implementations on "):
            after_tables = True
        elif after_tables and line.startswith("- "):
            notes.append(line[2:])
    return {"machine": _machine_of(lines[0] if lines else "", notes, kind), "rows": rows}


def import_block(readme_text, kind):
    """The results of the `kind` block of the README, checked: render() of them gives the
    block back character for character (ValueError naming the first line that differs)."""
    begin, end = markers(kind)
    if begin not in readme_text or end not in readme_text:
        raise ValueError("the README has no %s block (%s ... %s)" % (kind, begin, end))
    block = readme_text.split(begin, 1)[1].split(end, 1)[0].lstrip("\n")
    results = parse_block(block, kind)
    again = render(results)
    if again != block:
        number, old, new = next(
            (i, a, b) for i, (a, b) in enumerate(
                zip(block.splitlines() + [""], again.splitlines() + [""]), 1) if a != b)
        raise ValueError("the %s block does not render back the same from the rows read "
                         "from it: its line %d %r, rendered %r" % (kind, number, old[:120],
                                                                    new[:120]))
    results["recovered_from"] = {"block": kind, "what": RECOVERED_WHAT}
    return results


def main(argv=None):
    """Rewrites the result tables of benchmarks/README.md from a results file (or, with
    --import-block, stores a block already there as its kind's data), keeps the run as its
    kind's JSON and regenerates the summary across the kinds."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="?", default="bench_results.json")
    parser.add_argument("--readme", default=os.path.join(BENCH_DIR, "README.md"))
    parser.add_argument("--results-dir", help="where each kind's run of record is kept "
                        "(default: results/ beside the README)")
    parser.add_argument("--import-block", metavar="KIND", help="read the README's KIND block "
                        "back into rows and store them as KIND's run of record (a run whose "
                        "bench_results.json is gone); the results file is not read")
    args = parser.parse_args(argv)
    results_dir = args.results_dir or os.path.join(os.path.dirname(os.path.abspath(
        args.readme)), "results")
    with open(args.readme, encoding="utf-8") as f:
        text = f.read()
    if args.import_block:
        kind, source = args.import_block, "the %s block of %s" % (args.import_block,
                                                                   args.readme)
        try:
            results = import_block(text, kind)
        except ValueError as e:
            raise SystemExit("write_readme.py --import-block %s: %s" % (kind, e))
    else:
        with open(args.results, encoding="utf-8") as f:
            results = json.load(f)
        source = args.results
        kind = machine_kind(results.get("machine") or {}) if isinstance(results,
                                                                          dict) else None
        text = update(text, render(results), kind)
    runs = stored_runs(results_dir)
    if kind:
        runs[kind] = dict(results, kind=kind)
    if runs:
        text = update_summary(text, vendor_summary(runs))
    if kind:  # the data first: a README naming a run whose JSON was not written is worse
        print("kept the rows of %s as %s" % (source, store_run(results, kind, results_dir)))
    with open(args.readme + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(args.readme + ".tmp", args.readme)
    print("wrote the tables of %s into %s" % (source, args.readme))


if __name__ == "__main__":
    sys.exit(main())
