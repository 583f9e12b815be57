"""Writes tests/file_seconds.json (conftest's order of the files under pytest-xdist) from
the --junitxml report(s) of a run:

  make file-seconds        # the whole suite as `make test` runs it, then this script
  # or by hand:
  pytest tests -n 2 --dist loadfile --junitxml=/tmp/junit.xml
  python tests/file_seconds.py /tmp/junit.xml [more.xml ...]

Each file's seconds: the sum of its tests' (setup, call and teardown), rounded to 0.1 s; a
file in several reports takes the last one's. The file lists every tests/test_*.py: one that
no report measured keeps its seconds from the json written before, and one never measured is
named on stderr (conftest then counts it as long as the median file) and the exit status is 1.
"""
import json
import pathlib
import sys
import xml.etree.ElementTree as ET

TESTS = pathlib.Path(__file__).resolve().parent
OUT = TESTS / "file_seconds.json"


def file_seconds(report):
    """{"tests/test_x.py": seconds} of a junit XML report."""
    totals = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        while module and not module[-1].startswith("test_"):
            module.pop()  # a test class's name after its module's
        if not module:
            continue
        path = "/".join(module) + ".py"
        totals[path] = totals.get(path, 0.0) + float(case.get("time") or 0)
    return {path: round(seconds, 1) for path, seconds in sorted(totals.items())}


def test_files():
    """Every test file of the suite, as "tests/test_x.py"."""
    return sorted("tests/" + path.name for path in TESTS.glob("test_*.py"))


def merged(reports, before):
    """(seconds of every test file, the files no report nor `before` measured)."""
    measured = {}
    for report in reports:
        measured.update(file_seconds(report))
    seconds, missing = {}, []
    for path in test_files():
        if path in measured:
            seconds[path] = measured[path]
        elif path in before:
            seconds[path] = before[path]
        else:
            missing.append(path)
    return seconds, missing


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: python tests/file_seconds.py JUNIT.xml [JUNIT.xml ...]")
    try:
        before = json.loads(OUT.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        before = {}
    seconds, missing = merged(argv[1:], before)
    OUT.write_text(json.dumps(seconds, indent=1) + "\n", encoding="utf-8")
    print("wrote %s: %d files, %.0f s in all" % (OUT, len(seconds), sum(seconds.values())))
    if missing:
        sys.stderr.write("not measured (run them and pass their report): %s\n"
                         % " ".join(missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
