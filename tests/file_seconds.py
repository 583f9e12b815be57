"""Writes tests/file_seconds.json (conftest's order of the files under pytest-xdist) from
the --junitxml report of a full run:

  pytest tests -n 2 --dist loadfile --junitxml=/tmp/junit.xml
  python tests/file_seconds.py /tmp/junit.xml

Each file's seconds: the sum of its tests' (setup, call and teardown), rounded to 0.1 s.
"""
import json
import pathlib
import sys
import xml.etree.ElementTree as ET


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


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: python tests/file_seconds.py JUNIT.xml")
    out = pathlib.Path(__file__).with_name("file_seconds.json")
    out.write_text(json.dumps(file_seconds(argv[1]), indent=1) + "\n", encoding="utf-8")
    print("wrote %s" % out)


if __name__ == "__main__":
    main(sys.argv)
