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
- `readable(prefix)`: a checkpoint's prefix TensorFlow's readers take (they glob a
  prefix holding `[`: "Failed to find any matching files");
- `user_pattern(pattern)`: the reference's pattern flags (--input_file "comma-separated
  or glob"), which ARE globs: fileutil.expand_input_files alone calls it.

tests/test_path_match.py enumerates the package's calls of glob / fnmatch / tf.train's
globbing lookups: none but this module's.

Contracts with the other modules (bert_tf2/base/path_match.py): matching(literal,
pattern="") -> sorted paths (local and tf.io.gfile's file systems), name_matches(name,
pattern) -> bool, user_pattern(pattern) -> tf.io.gfile.glob(pattern),
readable(prefix) -> the prefix, or one of links to its files in a folder of
links removed at exit; latest_checkpoint(folder) -> the prefix the folder's `checkpoint` state file names when
its .index is there, else None (tf.train.latest_checkpoint without its glob).
"""
import atexit
import fnmatch
import importlib
import os
import re
import tempfile


class _TensorFlow(object):
    """TensorFlow, imported at its first use (fileutil's local-only workers never pay it)."""

    def __getattr__(self, attr):
        return getattr(importlib.import_module("tensorflow"), attr)


tf = _TensorFlow()

# The characters fnmatch reads as a pattern; each becomes a one-character class.
_SPECIAL = re.compile(r"([*?\[])")
# What a TensorFlow checkpoint reader may take for a pattern in a prefix.
_READERS_GLOB = re.compile(r"[*?\[\\]")


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


# The folders of links `readable` made, removed when the process ends.
_LINK_FOLDERS = []


def _remove_link_folders():
    # The package's one removal (links removed as links); imported here: it imports us.
    from bert_tf2 import fileutil  # pylint: disable=import-outside-toplevel
    for folder in _LINK_FOLDERS:
        try:
            fileutil.remove(folder)
        except OSError:
            pass


def readable(prefix):
    """A prefix TensorFlow's checkpoint readers (tf.train.load_checkpoint,
    Checkpoint.restore) find the checkpoint `prefix` under: `prefix` itself, or, for a
    local one holding a character they glob, links to its files in a folder of our own
    (kept while the process runs: a reader opens its data files when first read)."""
    prefix = str(prefix)
    if "://" in prefix or not _READERS_GLOB.search(prefix):
        return prefix
    files = matching(prefix, ".index") + matching(prefix, ".data-*")
    if not files:
        return prefix
    if not _LINK_FOLDERS:
        atexit.register(_remove_link_folders)
    folder = tempfile.mkdtemp(prefix="bert_tf2_checkpoint_")
    _LINK_FOLDERS.append(folder)
    for path in files:
        os.symlink(os.path.abspath(path), os.path.join(folder, "ckpt" + path[len(prefix):]))
    return os.path.join(folder, "ckpt")


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
