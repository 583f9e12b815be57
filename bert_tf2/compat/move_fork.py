"""Moves a fork of the reference to bert_tf2.tf1: `python -m bert_tf2.compat.move_fork DIR`.

In every .py file of the fork under DIR (sub-folders included), in place:
  import tensorflow as tf                 ->  import bert_tf2.tf1 as tf
  from tensorflow.contrib import crf, rnn ->  from bert_tf2.compat.contrib import crf, rnn
  from tensorflow.contrib.layers.python.layers import initializers
      ->  from bert_tf2.compat.contrib import layers as initializers
Only import statements are changed (found with the tokenize module: never a line of a
docstring or string). Each file changed is named once it is written. Named and left as they
were: every other TensorFlow import (`import tensorflow.compat.v1 as tf`, `from tensorflow
import keras`, `tensorflow.python.*` with the public name to use), every tf.contrib module or
`tf.contrib.x.y` use bert_tf2.tf1 lacks (with what to use instead).

Not the fork's and skipped with a line: virtual environments (a folder with pyvenv.cfg),
site-packages / dist-packages, vendored copies of tensorflow or bert_tf2, build/ and dist/,
hidden folders; symlinks, hard links (a file with several names: changing one would change
the others), anything not a regular file (a FIFO is never opened), read-only files.
Every file is checked and written to a temporary file beside it first; they replace the
originals only when all were written (a full disk changes nothing). --dry_run only names.
"""
import argparse
import io
import os
import re
import stat
import sys
import tokenize
import types

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
# Any other import of TensorFlow: named, left as it was.
_OTHER_TF = re.compile(rb"^[ \t]*(from[ \t]+tensorflow(\.[\w.]+)?[ \t]+import\b|"
                       rb"import[ \t]+tensorflow\b)")
_TF_PYTHON = re.compile(rb"^[ \t]*(from|import)[ \t]+tensorflow\.python\.([\w.]+)")
_COMPAT_V1 = re.compile(rb"^[ \t]*(from[ \t]+tensorflow\.compat[ \t]+import[ \t]+v1\b|"
                        rb"import[ \t]+tensorflow\.compat\.v1\b)")

# What to use for a tensorflow.python.* module, by its longest matching prefix.
_TF_PYTHON_PUBLIC = {
    "framework.graph_util": "tf.graph_util (tf.compat.v1.graph_util: "
                            "convert_variables_to_constants, extract_sub_graph, "
                            "remove_training_nodes)",
    "framework.graph_util_impl": "tf.graph_util (tf.compat.v1.graph_util)",
    "tools.freeze_graph": "tf.graph_util.convert_variables_to_constants "
                          "(tf.compat.v1.graph_util), or export_saved_model.py",
    "framework.ops": "tf.Graph / tf.Tensor / tf.get_default_graph",
    "framework.dtypes": "tf.float32 & co. (tf.dtypes)",
    "ops.init_ops": "tf.initializers (tf.compat.v1.initializers)",
    "training.moving_averages": "tf.train.ExponentialMovingAverage",
    "platform.gfile": "tf.gfile (tf.io.gfile)",
    "client.device_lib": "tf.config.list_physical_devices",
    "estimator": "tf.estimator (bert_tf2.tf1)",
}

# Folder names that hold installed or built packages, not the fork's own code.
_NOT_THE_FORKS = {"site-packages": "installed packages", "dist-packages": "installed packages",
                  "build": "a build folder", "dist": "a build folder",
                  "tensorflow": "a vendored copy of tensorflow",
                  "bert_tf2": "a vendored copy of bert_tf2", "__pycache__": None,
                  "node_modules": None}


def _tf_python_advice(module):
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        advice = _TF_PYTHON_PUBLIC.get(".".join(parts[:end]))
        if advice:
            return advice
    return "its public name in tf (tf.compat.v1)"


def _public_module(module, name):
    """`module.name` when the table knows it (a module imported from a package), else
    `module`."""
    full = "%s.%s" % (module, name)
    return full if full in _TF_PYTHON_PUBLIC else module


def _report_missing(line, where, report):
    """Names the tf.contrib modules of a `from tensorflow.contrib import` line we lack (Python's
    own error would only say "cannot import name")."""
    found = re.match(rb"[ \t]*from tensorflow\.contrib import \(?([\w, \t]+)", line)
    for words in [piece.split() for piece in found.group(1).decode().split(",")] if found else []:
        if words and not hasattr(contrib, words[0]):  # `rnn as r`: rnn
            report("%s: %s" % (where, contrib.explain("tf.contrib." + words[0])))


def _left_as_it_was(body, where, report):
    """Names an import of TensorFlow the tool does not change, and what to do with it."""
    text = body.decode("utf-8", "replace").strip()
    python = _TF_PYTHON.match(body)
    if python:
        module = python.group(2).decode()
        imported = re.match(rb"[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+\(?[ \t]*(\w+)", body)
        if imported:  # from tensorflow.python.framework import graph_util: its module
            module = _public_module(module, imported.group(1).decode())
        report("%s: left as it was: %s (tensorflow.python is TensorFlow's private code; "
               "use %s)" % (where, text, _tf_python_advice(module)))
    elif _COMPAT_V1.match(body):
        report("%s: left as it was: %s (change it to `import bert_tf2.tf1 as tf`: "
               "tf.compat.v1 with tf.contrib, tf.estimator and tf.layers)" % (where, text))
    else:
        report("%s: left as it was (change it by hand): %s" % (where, text))


def _resolve_contrib(path):
    """None when `tf.contrib.<path>` resolves in bert_tf2.compat.contrib, else the line
    naming what to use instead."""
    value = contrib
    walked = "tf.contrib"
    for name in path:
        if not isinstance(value, (types.ModuleType, contrib.Namespace)):
            return None  # a function or class: its attributes are its own
        walked += "." + name
        try:
            value = getattr(value, name)
        except contrib.RemovedSymbolError as error:
            return str(error)
        except AttributeError:
            return contrib.explain(walked)
    return None


def _code_lines(text):
    """(rows whose first token starts an import statement, [(row, dotted tf.contrib
    path)]) of Python source `text` (bytes), from its tokens: never inside a string."""
    imports, contrib_uses = set(), []
    tokens = list(tokenize.tokenize(io.BytesIO(text).readline))
    at_line_start = True
    for index, token in enumerate(tokens):
        if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
                          tokenize.ENCODING, tokenize.COMMENT):
            at_line_start = token.type != tokenize.COMMENT or at_line_start
            continue
        if at_line_start and token.type == tokenize.NAME and token.string in ("import", "from"):
            imports.add(token.start[0])
        at_line_start = False
        names = [t.string for t in tokens[index:index + 16]]
        if (token.type == tokenize.NAME and token.string == "tf" and names[1:4] == [
                ".", "contrib", "."] and (index == 0 or tokens[index - 1].string != ".")):
            path, at = [], index + 4
            while at < len(tokens) and tokens[at].type == tokenize.NAME:
                path.append(tokens[at].string)
                if at + 1 < len(tokens) and tokens[at + 1].string == ".":
                    at += 2
                else:
                    break
            contrib_uses.append((token.start[0], path))
    return imports, contrib_uses


def rewrite(text, path, report):
    """`text` (bytes) with the import lines changed; report(line) for those left as they
    were and for the tf.contrib uses bert_tf2.tf1 lacks. A file tokenize cannot read is
    a ValueError."""
    try:
        imports, contrib_uses = _code_lines(text)
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError) as error:
        raise ValueError("%s: not Python that tokenize reads (%s): left as it was"
                         % (path, error)) from None
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines, 1):
        if number not in imports:
            continue
        body = line.rstrip(b"\r\n")
        where = "%s:%d" % (path, number)
        for pattern, replacement in _REWRITES:
            if pattern.match(body):
                lines[number - 1] = pattern.sub(replacement, body, count=1) + line[len(body):]
                _report_missing(body, where, report)
                break
        else:
            if _OTHER_TF.match(body):
                _left_as_it_was(body, where, report)
    for number, dotted in contrib_uses:
        problem = _resolve_contrib(dotted)
        if problem:
            report("%s:%d: %s" % (path, number, problem))
    return b"".join(lines)


def _skipped_folder(root, name):
    """Why the folder `name` in `root` is not the fork's own code, or None."""
    full = os.path.join(root, name)
    if name.startswith("."):
        return ""  # hidden: skipped without a line, as before
    if os.path.islink(full):
        return "a symlink"
    if os.path.isfile(os.path.join(full, "pyvenv.cfg")):
        return "a virtual environment"
    if name in _NOT_THE_FORKS:
        return _NOT_THE_FORKS[name] or ""
    return None


def _skipped_file(path):
    """Why the file at `path` is left alone, or None (a plain file this tool may change)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return "a symlink (change the file it points to, %s)" % os.path.realpath(path)
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_nlink > 1:
        return ("a hard link (%d names for one file: changing it would change the others)"
                % info.st_nlink)
    if not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(
            path, os.W_OK):  # no write bit (root may write it all the same)
        return "read-only"
    return None


def python_files(folder, report=lambda line: None):
    """Every .py file of the fork under `folder`, sorted; what is skipped is reported."""
    found = []
    for root, dirs, files in os.walk(folder):
        kept = []
        for name in sorted(dirs):
            why = _skipped_folder(root, name)
            if why is None:
                kept.append(name)
            elif why:
                report("skipped %s: %s" % (os.path.join(root, name), why))
        dirs[:] = kept
        found += [os.path.join(root, name) for name in sorted(files) if name.endswith(".py")]
    return found


def move_fork(folder, dry_run=False, report=print):
    """Rewrites the .py files of the fork under `folder`; returns the paths changed (or to
    change). Nothing is replaced until every new file is written."""
    if not os.path.isdir(folder):
        raise ValueError("move_fork: %s is not a folder" % folder)
    planned = []
    for path in python_files(folder, report):
        why = _skipped_file(path)
        if why:
            report("skipped %s: %s" % (path, why))
            continue
        with open(path, "rb") as f:
            text = f.read()
        try:
            new = rewrite(text, path, report)
        except ValueError as error:
            report(str(error))
            continue
        if new != text:
            planned.append((path, new))
    if dry_run:
        for path, _ in planned:
            report("would change %s" % path)
        return [path for path, _ in planned]
    temps = []
    try:
        for path, new in planned:
            temp = fileutil.temp_name(path)
            temps.append(temp)
            with open(temp, "xb") as f:
                f.write(new)
            os.chmod(temp, stat.S_IMODE(os.lstat(path).st_mode))
    except OSError as error:
        for temp in temps:
            fileutil.remove(temp)
        raise OSError("move_fork: writing %s failed (%s): no file was changed"
                      % (temps[-1] if temps else folder, error)) from None
    for (path, _), temp in zip(planned, temps):
        os.replace(temp, path)
        report("changed %s" % path)
    return [path for path, _ in planned]


def main(argv=None):
    """The command line: move_fork DIR [--dry_run]."""
    parser = argparse.ArgumentParser(prog="python -m bert_tf2.compat.move_fork",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("folder", help="the fork's folder (its .py files are changed)")
    parser.add_argument("--dry_run", action="store_true",
                        help="name the files that would change and every use of a removed "
                             "symbol; change nothing")
    args = parser.parse_args(argv)
    try:
        move_fork(args.folder, args.dry_run)
    except (ValueError, OSError) as error:
        print(str(error), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
