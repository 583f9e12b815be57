"""How the benchmark tables print a number: bench_util's text tables and write_readme's
Markdown ones (this module imports nothing, so write_readme runs without TensorFlow)."""


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
