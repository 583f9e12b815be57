"""Our root modules (modeling, tokenization, ...) for `from bert import X`, by their file.

A top-level `import tokenization` gives whichever tokenization.py comes first on
sys.path: with a user's own file of that name in the current folder (sys.path[0]),
theirs. `bert.X` always gives bert-tf2's X, the file installed beside the
bert_tf2 package (the repository root, or site-packages):

- when the top-level module X is ours (the usual case), `bert.X` is that very
  module: one copy, never two;
- otherwise ours is loaded from its file, with our files first for the root
  modules it imports in turn (run_classifier's `import modeling`), and every
  top-level name is then left as it was: a user's own `import tokenization`
  still gives their file, before and after.

faces() names the root's command faces (the scripts with flags), found on disk by what they
define: the flag pages and the tests list the scripts from there.
"""
import ast
import contextlib
import importlib
import importlib.abc
import importlib.util
import os
import sys

# The folder holding the root modules: bert_tf2's parent, in the repository and when installed.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The root modules `bert.` offers (bert-tensorflow's names); the others import only these.
NAMES = ("modeling", "tokenization", "optimization", "create_pretraining_data",
         "run_pretraining", "run_classifier", "run_squad", "extract_features")


# What a root command face defines at its top level (bert_tf2/cli.py runs the three).
FACE_FUNCTIONS = ("define_flags", "run", "main")


def faces(root=ROOT):
    """The root's runners and command faces, found on disk: the names (sorted) of the root's
    modules (its *.py less setup.py) whose top level defines every FACE_FUNCTIONS. What
    lists the scripts (the flag pages, the tests) reads them here, never a hand list."""
    found = []
    for name in sorted(os.listdir(root)):
        if not name.endswith(".py") or name == "setup.py":
            continue
        with open(os.path.join(root, name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        if set(FACE_FUNCTIONS) <= defined:
            found.append(name[:-len(".py")])
    return found


def path_of(name):
    """The file of our root module `name`."""
    return os.path.join(ROOT, name + ".py")


def is_ours(module, name):
    """Whether `module` (or None) was loaded from our file of root module `name`."""
    path = getattr(module, "__file__", None)
    return path is not None and os.path.realpath(path) == os.path.realpath(path_of(name))


def resolves_to_ours(name):
    """Whether a plain `import name` (not yet imported) would load our file."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    origin = getattr(spec, "origin", None)
    return origin is not None and os.path.realpath(origin) == os.path.realpath(path_of(name))


class _OurFilesFirst(importlib.abc.MetaPathFinder):
    """Finds our file for any root module in NAMES, before sys.path is searched."""

    def find_spec(self, fullname, path=None, target=None):
        """Our file's spec for a root module in NAMES; None (not ours to find) otherwise."""
        del path, target
        if fullname not in NAMES or not os.path.exists(path_of(fullname)):
            return None
        return importlib.util.spec_from_file_location(fullname, path_of(fullname))


@contextlib.contextmanager
def _our_files_first():
    """Within: `import X` of a root module loads our file. After: the top-level names are
    as before, plus those of our modules a plain import would have loaded anyway."""
    before = {name: sys.modules.get(name) for name in NAMES}
    for name, module in before.items():
        if module is not None and not is_ours(module, name):
            del sys.modules[name]  # a user's module: put back below
        loaded_before = sys.modules.get("bert." + name)
        if not is_ours(module, name) and is_ours(loaded_before, name):
            sys.modules[name] = loaded_before  # ours, loaded by an earlier `from bert import`
    finder = _OurFilesFirst()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name, module in before.items():
            loaded = sys.modules.get(name)
            if loaded is not None and is_ours(loaded, name):
                # Later `from bert import name` gives this same object.
                sys.modules.setdefault("bert." + name, loaded)
            if module is not None:
                sys.modules[name] = module
            elif loaded is not None:
                del sys.modules[name]  # find_spec would answer from sys.modules
                if resolves_to_ours(name):
                    sys.modules[name] = loaded


def load(name):
    """bert-tf2's root module `name`, whatever files come first on sys.path.

    Args:
      name: one of NAMES.

    Returns:
      The top-level module `name` when it is ours, else ours loaded from its file.
    """
    if name not in NAMES:
        raise ValueError("not a root module of bert-tf2: %s" % name)
    current = sys.modules.get(name)
    if is_ours(current, name):
        return current
    with _our_files_first():
        module = importlib.import_module(name)
    return module
