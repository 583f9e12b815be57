"""Writes docs/flags/<script>.md: every flag of each root script, from its define_flags.

  python docs/tools/flag_pages.py [--reference_dir DIR] [--check]

Each page lists the flags the script registers (name, default, help as --helpfull prints
them: an enum's choices lead it), the reference's flags first, then the ones this port added. Which
flags the reference has is read from its own .py files (google-research/bert, by default
../shared/reference/bert beside the repository). --check writes nothing and exits 1 naming
the pages that differ from what would be written (tests/test_docs.py runs it that way).
"""
import argparse
import importlib
import os
import re
import sys

from absl import flags

DOCS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(DOCS_DIR)
FLAGS_DIR = os.path.join(DOCS_DIR, "flags")

MKDOCS = os.path.join(REPO_ROOT, "mkdocs.yml")


def _nav_pages(nav):
    """[(title, page)] of a mkdocs nav, in its order (sections walked into)."""
    for item in nav:
        entries = item.items() if isinstance(item, dict) else [(None, item)]
        for title, value in entries:
            if isinstance(value, list):
                yield from _nav_pages(value)
            else:
                yield title, value


def manual_page(script, nav):
    """(page, title) of a script's page of the manual, from the site's nav `nav` ([(title,
    page)]): the page whose title names SCRIPT.py, else the one whose text runs it (`python
    SCRIPT.py`) most, the first in the nav on a tie; ValueError when no page runs it."""
    manual = [(title, page) for title, page in nav if title and not page.startswith("flags/")]
    named = [(page, title) for title, page in manual if script + ".py" in title]
    if named:
        return named[0]
    runs = re.compile(r"python %s\.py\b" % re.escape(script))
    counts = []
    for title, page in manual:
        with open(os.path.join(DOCS_DIR, page), encoding="utf-8") as f:
            counts.append(len(runs.findall(f.read())))
    if not any(counts):
        raise ValueError("%s.py: no page of %s's nav runs it (`python %s.py`) or names it in "
                         "its title" % (script, MKDOCS, script))
    title, page = manual[counts.index(max(counts))]
    return page, title


def scripts():
    """{script: (its page of the manual, its title there)} of every root face
    (bert_tf2.root_modules.faces: no list here), in the order of their flag pages in the
    nav (a face not there yet after them, by name)."""
    import yaml  # pylint: disable=import-outside-toplevel
    sys.path.insert(0, REPO_ROOT)
    from bert_tf2 import root_modules  # pylint: disable=import-outside-toplevel
    with open(MKDOCS, encoding="utf-8") as f:
        nav = list(_nav_pages(yaml.safe_load(f)["nav"]))
    listed = [page[len("flags/"):-len(".md")] for _, page in nav if page.startswith("flags/")]
    faces = root_modules.faces(REPO_ROOT)
    ordered = [f for f in listed if f in faces] + [f for f in faces if f not in listed]
    return {script: manual_page(script, nav) for script in ordered}


# script -> (its page of the manual, its title there), found (scripts()).
SCRIPTS = scripts()
_DEFINE = re.compile(r"flags\.DEFINE_\w+\(\s*[\"'](\w+)[\"']")


def reference_flags(reference_dir, script):
    """The flag names the reference's SCRIPT.py defines; None when it has no such script."""
    path = os.path.join(reference_dir, script + ".py")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return set(_DEFINE.findall(f.read()))


def _cell(text):
    """Text for one cell of a Markdown table: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(flag):
    if flag.default is None:
        return "None"
    if isinstance(flag.default, bool):
        return "true" if flag.default else "false"
    if isinstance(flag.default, (list, tuple)):
        return ",".join(str(v) for v in flag.default)
    return str(flag.default)


def _table(fv, names):
    rows = ["| flag | default | help |", "|---|---|---|"]
    for name in names:
        flag = fv[name]
        rows.append("| `--%s` | `%s` | %s |" % (name, _cell(_default(flag)) or " ",
                                               _cell(flag.help or "")))
    return rows


def page(script, reference_dir):
    """The Markdown of docs/flags/SCRIPT.md."""
    fv = flags.FlagValues()
    importlib.import_module(script).define_flags(fv)
    names = sorted(name for name in fv if fv[name].name == name)
    ours, title = SCRIPTS[script]
    known = reference_flags(reference_dir, script)
    lines = ["# %s.py: its flags" % script, "",
             "Generated from the script's `define_flags` by `python docs/tools/flag_pages.py`; "
             "tests/test_docs.py fails when this page and the flags differ. `python %s.py "
             "--help` prints the same. What the flags do, with examples, defaults in context "
             "and errors: [%s](../%s)." % (script, title, ours), ""]
    if known is None:
        lines += ["The reference has no %s.py: every flag here is new." % script, ""]
        lines += _table(fv, names)
    else:
        theirs = [n for n in names if n in known]
        new = [n for n in names if n not in known]
        lines += ["## The reference's flags", "",
                  "Same names, defaults and meaning as google-research/bert's %s.py." % script,
                  ""] + _table(fv, theirs)
        lines += ["", "## New in this port", ""] + _table(fv, new)
        dropped = sorted(known - set(names))
        if dropped:
            lines += ["", "Flags of the reference's %s.py not defined here: %s." %
                      (script, ", ".join("`--%s`" % n for n in dropped))]
    return "\n".join(lines) + "\n"


def index_page():
    """docs/flags/index.md: one link per script."""
    lines = ["# Flags of every script", "",
             "One page per script, generated from its flags (`python docs/tools/flag_pages.py`). "
             "What they have in common (errors, progress, console commands): "
             "[the scripts](../scripts.md).", "", "| script | flags | manual |", "|---|---|---|"]
    for script, (ours, title) in SCRIPTS.items():
        lines.append("| `%s.py` | [flags](%s.md) | [%s](../%s) |" % (script, script, title, ours))
    return "\n".join(lines) + "\n"


def pages(reference_dir):
    """{path: text} of every generated page."""
    out = {os.path.join(FLAGS_DIR, "index.md"): index_page()}
    for script in SCRIPTS:
        out[os.path.join(FLAGS_DIR, script + ".md")] = page(script, reference_dir)
    return out


def _default_reference_dir():
    shared = os.environ.get("BERT_TF2_SHARED") or os.path.join(os.path.dirname(REPO_ROOT),
                                                               "shared")
    return os.path.join(shared, "reference", "bert")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference_dir", default=_default_reference_dir())
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a page differs")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.reference_dir):
        parser.error("--reference_dir=%s: no such folder (google-research/bert's files)" %
                     args.reference_dir)
    sys.path.insert(0, REPO_ROOT)
    stale = []
    for path, text in pages(args.reference_dir).items():
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old == text:
            continue
        stale.append(os.path.relpath(path, REPO_ROOT))
        if not args.check:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    if stale:
        print("%s: %s" % ("out of date" if args.check else "written", ", ".join(stale)))
    return 1 if (stale and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
