"""How the benchmark tables print a number and a speed goal's note: bench_util's text
tables and write_readme's Markdown ones (this module imports nothing, so write_readme and
the tokenizer bench run it without TensorFlow)."""

# A row with a speed goal notes it first: "goal >= 1.6x: met" (write_readme's summary
# reads the bound back from it).
GOAL_NOTE = "goal"
NOT_MEASURABLE_NOTE = "not measurable on this CPU"


def goal_note(ratio, goal, measurable=True, why_not="no avx512_bf16 or AMX"):
    """The note of a row with a speed goal: "goal >= 1.6x: met" / "missed" / "not
    measurable on this CPU (why_not)" / "not judged, a side did not run"."""
    what = "%s >= %.1fx" % (GOAL_NOTE, goal)
    if not measurable:
        return "%s: %s (%s)" % (what, NOT_MEASURABLE_NOTE, why_not)
    if ratio is None:
        return "%s: not judged, a side did not run" % what
    return "%s: %s" % (what, "met" if ratio >= goal else "missed")


def format_number(value, missing):
    """`value` for a table cell: `missing` for None, three significant digits for a float
    far from 1 (>= 1e5 or below 0.01), else 3 decimals below 10 and 1 from 10 up."""
    if value is None:
        return missing
    if isinstance(value, float):
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-2):
            return "%.3g" % value
        return "%.3f" % value if abs(value) < 10 else "%.1f" % value
    return str(value)
