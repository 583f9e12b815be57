"""A path the user names is never a pattern: the one place the package matches file names.

A folder may be named `exp[1]`, `runs/[bs32]/out`, `a*b` or `what?`: tf.io.gfile.glob,
glob.glob and tf.train's checkpoint lookups read those characters as a pattern (`exp[1]/x`
matches `exp1/x`, never itself; `a*b/x` matches `axb/x` too), so a lookup in such a folder
finds nothing, or another folder's files. Here a path we compose from the user's is
listed, level by level, and only the part we add is matched, by fnmatch's rules (`*`, `?`,
`[...]` within one name; `/` between names).

- `matching(literal, pattern)`: the paths that are `literal`, every character itself,
  followed by a text matching `pattern` (ours);
- `name_matches(name, pattern)`: a name (relative path) against one of our patterns;
- `user_pattern(pattern)`: the reference's pattern flags (--input_file "comma-separated
  or glob"), which ARE globs: fileutil.expand_input_files alone calls it.

tests/test_path_match.py enumerates the package's calls of glob / fnmatch / tf.train's
globbing lookups: none but this module's.

Contracts with the other modules (bert_tf2/base/path_match.py): matching(literal,
pattern="") -> sorted paths (local and tf.io.gfile's file systems), name_matches(name,
pattern) -> bool, user_pattern(pattern) -> tf.io.gfile.glob(pattern),
latest_checkpoint(folder) -> the prefix the folder's `checkpoint` state file names when
its .index is there, else None (tf.train.latest_checkpoint without its glob).
"""
import fnmatch
import importlib
import os
import re


class _TensorFlow(object):
    """TensorFlow, imported at its first use (fileutil's local-only workers never pay it)."""

    def __getattr__(self, attr):
        return getattr(importlib.import_module("tensorflow"), attr)


tf = _TensorFlow()

# The characters fnmatch reads as a pattern; each becomes a one-character class.
_SPECIAL = re.compile(r"([*?\[])")


def escape(text):
    """`text` as an fnmatch pattern matching itself alone."""
    return _SPECIAL.sub(r"[\1]", text)


def name_matches(name, pattern):
    """Whether `name` matches our `pattern` (fnmatch's rules, case-sensitive)."""
    return fnmatch.fnmatchcase(name, pattern)


def _listed(folder):
    """The names in `folder` ("" is the current folder); none when it is not a folder."""
    try:
        if not tf.io.gfile.isdir(folder or "."):
            return []
        return [name.rstrip("/") for name in tf.io.gfile.listdir(folder or ".")]
    except (tf.errors.OpError, OSError):
        return []


def matching(literal, pattern=""):
    """The paths that are `literal` (a path as given: `[`, `*`, `?` and `\\` are themselves)
    followed by a text matching `pattern` (fnmatch's, "/" between names), sorted.

    matching(folder + "/", "*.index"), matching(prefix, ".data-*"), matching(path, ".*").
    """
    literal = str(literal)
    folder, start = os.path.split(literal)
    if literal.endswith("/") and not start:
        folder = literal.rstrip("/") or "/"
    found = [folder]
    for part in (escape(start) + pattern).split("/"):
        found = [os.path.join(base, name) if base else name
                 for base in found for name in sorted(_listed(base))
                 if name_matches(name, part)]
    return sorted(found)


def user_pattern(pattern):
    """The files a pattern the user gave AS a pattern matches (the reference's glob
    flags): tf.io.gfile.glob."""
    return tf.io.gfile.glob(pattern)


def latest_checkpoint(folder):
    """The checkpoint prefix the state file of `folder` names, when its .index is there;
    None otherwise (tf.train.latest_checkpoint, which globs the folder's path)."""
    folder = str(folder)
    if not tf.io.gfile.isdir(folder):
        return None
    state = tf.train.get_checkpoint_state(folder)
    if state is None or not state.model_checkpoint_path:
        return None
    prefix = state.model_checkpoint_path  # joined to `folder` when relative
    return prefix if tf.io.gfile.exists(prefix + ".index") else None
