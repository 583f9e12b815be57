"""Moves a fork of the reference to bert_tf2.tf1: `python -m bert_tf2.compat.move_fork DIR`.

In every .py file under DIR (sub-folders included), in place:
  import tensorflow as tf                 ->  import bert_tf2.tf1 as tf
  from tensorflow.contrib import crf, rnn ->  from bert_tf2.compat.contrib import crf, rnn
  from tensorflow.contrib.layers.python.layers import initializers
      ->  from bert_tf2.compat.contrib import layers as initializers
Each file changed is named; other `tensorflow.contrib` imports are named with their line,
left for you, and so are the contrib modules bert_tf2.tf1 lacks, with what to use instead.
Files with nothing to change are not touched. --dry_run only names them.
"""
import argparse
import os
import re
import sys

from bert_tf2 import fileutil
from bert_tf2.compat import contrib

_REWRITES = (
    (re.compile(rb"^([ \t]*)import tensorflow as tf([ \t]*(#.*)?)$"),
     rb"\1import bert_tf2.tf1 as tf\2"),
    (re.compile(rb"^([ \t]*)from tensorflow\.contrib import "),
     rb"\1from bert_tf2.compat.contrib import "),
    # contrib's initializers module: its functions are in contrib.layers.
    (re.compile(rb"^([ \t]*)from tensorflow\.contrib\.layers\.python\.layers import "
                rb"initializers([ \t]*(#.*)?)$"),
     rb"\1from bert_tf2.compat.contrib import layers as initializers\2"),
)
_OTHER_CONTRIB = re.compile(rb"^[ \t]*(from|import)[ \t]+tensorflow\.contrib")


def _report_missing(line, where, report):
    """Names the tf.contrib modules of a `from tensorflow.contrib import` line we lack (Python's
    own error would only say "cannot import name")."""
    found = re.match(rb"[ \t]*from tensorflow\.contrib import \(?([\w, \t]+)", line)
    for words in [piece.split() for piece in found.group(1).decode().split(",")] if found else []:
        if words and not hasattr(contrib, words[0]):  # `rnn as r`: rnn
            report("%s: %s" % (where, contrib.explain("tf.contrib." + words[0])))


def rewrite(text, path, report):
    """`text` (bytes) with the import lines changed; report(line) for those left as they were."""
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines, 1):
        body = line.rstrip(b"\r\n")
        for pattern, replacement in _REWRITES:
            if pattern.match(body):
                lines[number - 1] = pattern.sub(replacement, body, count=1) + line[len(body):]
                _report_missing(body, "%s:%d" % (path, number), report)
                break
        else:
            if _OTHER_CONTRIB.match(body):
                report("%s:%d: left as it was (change it by hand): %s" % (
                    path, number, body.decode("utf-8", "replace").strip()))
    return b"".join(lines)


def python_files(folder):
    """Every .py file under `folder`, sorted, hidden folders skipped."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [os.path.join(root, name) for name in sorted(files) if name.endswith(".py")]
    return found


def move_fork(folder, dry_run=False, report=print):
    """Rewrites the .py files under `folder`; returns the paths changed (or to change)."""
    if not os.path.isdir(folder):
        raise ValueError("move_fork: %s is not a folder" % folder)
    changed = []
    for path in python_files(folder):
        with open(path, "rb") as f:
            text = f.read()
        new = rewrite(text, path, report)
        if new == text:
            continue
        changed.append(path)
        report("%s %s" % ("would change" if dry_run else "changed", path))
        if not dry_run:
            mode = os.stat(path).st_mode
            with fileutil.atomic_open(path, "wb") as f:
                f.write(new)
            os.chmod(path, mode)
    return changed


def main(argv=None):
    """The command line: move_fork DIR [--dry_run]."""
    parser = argparse.ArgumentParser(prog="python -m bert_tf2.compat.move_fork",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("folder", help="the fork's folder (its .py files are changed)")
    parser.add_argument("--dry_run", action="store_true",
                        help="name the files that would change; change nothing")
    args = parser.parse_args(argv)
    try:
        move_fork(args.folder, args.dry_run)
    except (ValueError, OSError) as error:
        print(str(error), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
