"""Where the tree still decides by a head's name instead of asking the head (issue 70).

Counted in the source (the root faces and bert_tf2/, not tests or docs), by reading each
file's syntax tree, outside the head registry and the heads' own modules (head_modules):

  names: comparisons with a model type, runner or head name (`head == "classifier"`,
    `x in ("tagger", ...)`, a `for` over such names), the names read from the registry
    (type_names: every entry's name, runner and heads), and any string compared with a
    head's name or runner (`head.name == "ranker"`, `entry.runner != "x"`: _NAME_SIDE),
    registered or not;
  signatures: comparisons with a serving signature kind (`signature == "words"`);
  sub_kinds: comparisons with a classifier sub-kind ("regression", "multilabel", ...);
  tables: dict literals keyed by those names, and tuples listing two or more of them;
  variable_detection: a head told from its checkpoint's variable names (`"tagger/..."
    in names`, `name.startswith("bilstm_")`);
  flag_branches: branches on a registry entry's booleans (`if head.word_tags:`,
    `x if entry.class_labels else y`): no name, but still one door deciding per head;
  doc_stride_checks (every file): `doc_stride < 1`-style checks of a --doc_stride
    setting (a tagger's, a long text's);
  tagger_windows (every file): places holding the tagger's window rule: the window
    loop over input_pipeline.doc_spans in a tagger module, the graph's twin, and each
    place reading run_ner's --doc_stride default (ner_data.DEFAULT_DOC_STRIDE) to
    resolve a missing one (run_ner.py's flag definition is not counted).

`python tests/head_name_counts.py [REVISION]` prints the counts per category and file (of
the tree, or of a git revision: `main` for a before / after);
tests/test_head_registry.py pins them so that none grows.

What stays, and why:
  tables (1, bert_tf2/trainer/model_folder.py): TASK_SETTINGS (the settings each runner's
    model_settings.json keeps, and the check that a file holds only its runner's).
    model_folder sits on the trainer/ floor, below export/ (tests/test_layout.py FLOORS),
    so it cannot read the registry; its MODEL_TYPES (runner -> model type) went in issue 93
    (the export hands it head_types.type_of_runner).
  doc_stride_checks, tagger_windows: the tagger's rule in its own modules (ner_data,
    serving_tagger: the in-graph twin of its windows).
The heads' modules are found (head_modules: the registry's, the rooms', the runners' and
those named after a registered head), so a new head's modules are in with no edit here.
tasks/file_data.py is the one whose name tells no head (_UNNAMED_HEAD_MODULES): it is
run_classifier's reader of --task_name=csv / tsv / jsonl, and its --task_type (classification,
regression, multilabel) is that head's own setting, as multilabel_data.py's files are.
"""
import ast
import collections
import pathlib
import re
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path[:1]:  # `python tests/head_name_counts.py`: this tree's registry
    sys.path.insert(0, str(REPO_ROOT))

from bert_tf2.export import head_types  # noqa: E402  pylint: disable=wrong-import-position

# The registry: its lookups, its old home, the heads' Keras models and the rooms' package
# (bert_tf2/export/model_types/: every head's room and the base they share). None names a head.
_REGISTRY_MODULES = frozenset({"bert_tf2/export/head_types.py",
                               "bert_tf2/export/head_classes.py", "bert_tf2/heads.py"})
_ROOMS_PACKAGE = "bert_tf2/export/model_types/"
# A head's own module whose name does not tell its head (head_words): run_classifier's
# reader of --task_name=csv / tsv / jsonl, whose --task_type is that head's own setting.
_UNNAMED_HEAD_MODULES = frozenset({"bert_tf2/tasks/file_data.py"})
SIGNATURE_NAMES = frozenset({"pair", "words", "choices"})  # and "squad", by the left side
SUB_KINDS = frozenset({"regression", "multilabel", "multi-label", "classification",
                       "single_label_classification", "multi_label_classification"})
_SIGNATURE_WORDS = ("signature", "kind")
_HEAD_VARIABLES = ("output_weights", "output_bias", "cls/", "tagger/", "crf/", "bilstm_",
                   "multiple_choice/")
CATEGORIES = ("names", "signatures", "sub_kinds", "tables", "variable_detection",
              "flag_branches", "doc_stride_checks", "tagger_windows")
# The registry's booleans (export/model_types/base.ModelType) a door may branch on.
_FLAGS = frozenset({"word_tags", "answer_spans", "class_labels", "sentence_embedding",
                    "long_text", "labels", "checks_head", "full_length_text",
                    "trims_by_default", "litert", "serves", "hf_pooler"})
_ENTRY_WORDS = ("head", "entry", "kind")
# The other side of a comparison that is a head's name, whatever string it is compared with.
# (settings.model_type == "x": test_head_registry's MAX_COMPARISONS counts those.)
_NAME_SIDE = re.compile(r"((^|[._])(head|entry|type)\w*|head_types\.\w+\(.*\))\.(name|runner)$")
# A head's name no entry holds: keras_hub's label of a tagger with a BiLSTM.
_UNREGISTERED_NAMES = frozenset({"feature-based tagger"})


def type_names(entries=None):
    """The head and runner names a decision may compare with: every registry entry's name,
    runner and heads (head_types.ENTRIES, read when called), less the classifier's
    sub-kinds (counted as sub_kinds)."""
    names = set(_UNREGISTERED_NAMES)
    for entry in head_types.ENTRIES if entries is None else entries:
        names.update((entry.name,) + entry.heads + ((entry.runner,) if entry.runner else ()))
    return frozenset(names - SUB_KINDS)


def head_words(entries=None):
    """The words that name a head's modules: each entry's name, its runner's task (run_ner:
    ner) and its heads and their words, `-` dropped or made `_` (long-text classifier:
    long_text, multi-label: multilabel)."""
    words = set()
    for entry in head_types.ENTRIES if entries is None else entries:
        runner = (entry.runner or "")
        texts = (entry.name,) + entry.heads + (
            (runner[len("run_"):],) if runner.startswith("run_") else ())
        for text in texts:
            for part in [text] + text.split():
                words.update(part.replace("-", sep).replace(" ", "_") for sep in ("", "_"))
    return frozenset(words)


def head_modules(entries=None, paths=None):
    """The files that belong to one head, found: the registry's (the rooms' package too),
    each entry's runner, and each package module whose name begins or ends with one of
    head_words (serving_tagger, classifier_tasks, ner_data, masked_lm, ...), of `paths`
    (the source files' relative paths; default: the tree's)."""
    entries = head_types.ENTRIES if entries is None else entries
    words = head_words(entries)
    paths = [path for path, _ in source_files()] if paths is None else paths
    named = {path for path in paths if path.startswith("bert_tf2/") and any(
        stem == word or stem.startswith(word + "_") or stem.endswith("_" + word)
        for stem in [pathlib.PurePosixPath(path).stem] for word in words)}
    rooms = {path for path in paths if path.startswith(_ROOMS_PACKAGE)}
    return (_REGISTRY_MODULES | _UNNAMED_HEAD_MODULES | named | rooms
            | {entry.runner + ".py" for entry in entries if entry.runner})


def source_files():
    """(relative path, text) of every source file counted."""
    paths = sorted(REPO_ROOT.glob("*.py")) + sorted((REPO_ROOT / "bert_tf2").rglob("*.py"))
    for path in paths:
        if path.name == "setup.py":
            continue
        yield path.relative_to(REPO_ROOT).as_posix(), path.read_text(encoding="utf-8")


def _strings(node):
    """The string constants of `node`: itself, or the items of a tuple / list / set."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for item in node.elts for s in _strings(item)]
    return []


def _left_words(node):
    return ast.unparse(node).lower() if node is not None else ""


def _compare_category(node, names):
    """The category of a comparison (ast.Compare) of a tree with head names `names`, or None."""
    left = node.left
    for op, right in zip(node.ops, node.comparators):
        if not isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
            continue
        if isinstance(op, (ast.In, ast.NotIn)) and _strings(left) and not _strings(right):
            # "tagger/output_weights" in names: the checkpoint tells the head.
            if any(v.startswith(_HEAD_VARIABLES) for v in _strings(left)):
                return "variable_detection"
            continue
        values = _strings(right) or (_strings(left) if isinstance(op, (ast.Eq, ast.NotEq))
                                     else [])
        other = left if _strings(right) else right
        if not values:
            continue
        words = _left_words(other)
        if any(v in SIGNATURE_NAMES for v in values) or (
                "squad" in values and any(w in words for w in _SIGNATURE_WORDS)):
            return "signatures"
        if any(v in names for v in values) or _NAME_SIDE.search(ast.unparse(other)):
            return "names"
        if any(v in SUB_KINDS for v in values) and "mode" not in words:
            return "sub_kinds"
    return None


def _table(node, names):
    """Whether `node` (a dict or tuple literal) is a table of head / runner `names`."""
    if isinstance(node, ast.Dict):
        keys = [k.value for k in node.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        return sum(k in names for k in keys) >= 1
    if isinstance(node, (ast.Tuple, ast.List)):
        values = _strings(node)
        return (len(values) == len(node.elts) and len(values) >= 2
                and all(v in names for v in values))
    return False


def _flag_branch(node):
    """Whether a branch (if / while / conditional expression) tests a registry boolean."""
    if not isinstance(node, (ast.If, ast.IfExp, ast.While)):
        return False
    for part in ast.walk(node.test):
        if isinstance(part, ast.Attribute) and part.attr in _FLAGS:
            owner = ast.unparse(part.value).lower()
            if any(word in owner for word in _ENTRY_WORDS) and "settings" not in owner:
                return True
    return False


def _doc_stride_check(node):
    """`doc_stride < 1` (or >= 1 ...): a check of a --doc_stride setting's value."""
    return (isinstance(node, ast.Compare) and "doc_stride" in _left_words(node.left)
            and any(isinstance(c, ast.Constant) and c.value in (0, 1)
                    for c in node.comparators))


def _tagger_window(node, path):
    """A place holding a tagger's window rule (see the module docstring)."""
    if isinstance(node, ast.Attribute) and ast.unparse(node) == "ner_data.DEFAULT_DOC_STRIDE":
        return True  # resolving a missing --doc_stride (run_ner's flag default is excepted)
    if isinstance(node, ast.FunctionDef):
        tagger_module = "ner" in path or "tagger" in path
        calls = {ast.unparse(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
        if tagger_module and any(c.endswith("doc_spans") for c in calls):
            return True
        if tagger_module and node.name == "windows":
            return True
    return False


def count(files=None):
    """{category: Counter({path: occurrences})} of the tree (or of `files`: (path, text))."""
    found = {category: collections.Counter() for category in CATEGORIES}
    files = list(source_files()) if files is None else list(files)
    names = type_names()
    inside_heads = head_modules(paths=[path for path, _ in source_files()] +
                                [path for path, _ in files])
    for path, text in files:
        tree = ast.parse(text)
        inside = path in inside_heads
        in_compare = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                for part in [node.left] + node.comparators:
                    in_compare.add(id(part))
            if isinstance(node, (ast.For, ast.comprehension)):
                in_compare.add(id(node.iter))
        for node in ast.walk(tree):
            if _doc_stride_check(node):
                found["doc_stride_checks"][path] += 1
            if _tagger_window(node, path) and not (path == "run_ner.py"
                                                    and isinstance(node, ast.Attribute)):
                found["tagger_windows"][path] += 1
            if inside:
                continue
            category = "flag_branches" if _flag_branch(node) else None
            if category:
                pass
            elif isinstance(node, ast.Compare):
                category = _compare_category(node, names)
            elif isinstance(node, (ast.For, ast.comprehension)):
                if any(v in names for v in _strings(node.iter)):
                    category = "names"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "startswith" and any(
                        v.startswith(_HEAD_VARIABLES) for a in node.args for v in _strings(a)):
                    category = "variable_detection"
            elif id(node) not in in_compare and _table(node, names):
                category = "tables"
            if category:
                found[category][path] += 1
    return found


def totals(found=None):
    """{category: total count}."""
    found = count() if found is None else found
    return {category: sum(found[category].values()) for category in CATEGORIES}


def at_revision(revision):
    """(path, text) of every counted source file at git `revision` (for a before/after)."""
    import subprocess  # pylint: disable=import-outside-toplevel
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", revision], cwd=REPO_ROOT,
                           check=True, capture_output=True, text=True).stdout.split()
    for name in names:
        if name.endswith(".py") and name != "setup.py" and (
                "/" not in name or name.startswith("bert_tf2/")):
            yield name, subprocess.run(["git", "show", "%s:%s" % (revision, name)],
                                       cwd=REPO_ROOT, check=True, capture_output=True,
                                       text=True).stdout


def main(argv):
    """Prints the counts by category and file (argv[1]: a git revision, else the tree)."""
    found = count(list(at_revision(argv[1])) if len(argv) > 1 else None)
    for category in CATEGORIES:
        print("%s: %d" % (category, sum(found[category].values())))
        for path, number in sorted(found[category].items()):
            print("  %3d  %s" % (number, path))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
