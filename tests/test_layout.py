"""The layout: the reference's names at the top, bert_tf2/ below them, `from bert import ...`."""
import ast
import importlib
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import registry_lists
from conftest import REPO_ROOT
from conftest import HANG_GUARD_SECONDS

REFERENCE = ["modeling", "tokenization", "optimization", "create_pretraining_data",
             "run_pretraining", "run_classifier", "run_squad", "extract_features"]
# The root's runners and command faces, found on disk (define_flags, run and main).
RUNNERS = set(registry_lists.root_faces())


def _setup_value(name):
    tree = ast.parse((REPO_ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == name:
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no %s" % name)


def test_the_root_holds_the_reference_face_and_setup_installs_it():
    # Every root module is a face (flags: define_flags, run, main) or one of the
    # reference's libraries; the reference's runners are faces; setup.py installs each
    # module and gives each face its console command.
    root = set(registry_lists.root_modules())
    assert root == set(_setup_value("MODULES")) == RUNNERS | set(registry_lists.LIBRARIES)
    assert set(REFERENCE) - set(registry_lists.LIBRARIES) <= RUNNERS
    assert sorted(_setup_value("SCRIPTS").values()) == sorted(RUNNERS)


@pytest.mark.parametrize("name", REFERENCE)
def test_from_bert_import_gives_the_top_level_module(name):
    via_package = getattr(importlib.import_module("bert"), name, None) or \
        importlib.import_module("bert." + name)
    assert via_package is importlib.import_module(name)
    assert importlib.import_module("bert." + name) is sys.modules[name]


def _imports(path, source=None):
    """Every module `path` (or `source` as if at `path`) imports, wherever the import is (at
    load time, inside a function or class), by its full name: a relative import resolved
    from `path`'s package, and importlib.import_module of a constant name too."""
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
    package = list(path.relative_to(REPO_ROOT).parent.parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            if node.module:
                yield module
            yield from ("%s.%s" % (module, alias.name) if module else alias.name
                        for alias in node.names)
        elif (isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module")
              and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            yield node.args[0].value


def test_no_module_imports_a_runner_and_no_runner_another():
    for path in list(REPO_ROOT.glob("*.py")) + list((REPO_ROOT / "bert_tf2").rglob("*.py")):
        runners = {name for name in _imports(path) if name in RUNNERS} - {path.stem}
        assert not runners, "%s imports %s" % (path.relative_to(REPO_ROOT), sorted(runners))


def test_package_modules_import_each_other_by_full_path():
    # keras_hub: bert_tf2/convert/keras_hub.py shares the name of the keras-hub package it
    # imports (`import keras_hub` there is that package, never a flat import of itself).
    moved = {p.stem for p in (REPO_ROOT / "bert_tf2").rglob("*.py")} - {"__init__", "keras_hub"}
    for path in list(REPO_ROOT.glob("*.py")) + list((REPO_ROOT / "bert_tf2").rglob("*.py")):
        flat = {name for name in _imports(path) if name in moved}
        assert not flat, "%s imports %s by a top-level name" % (
            path.relative_to(REPO_ROOT), sorted(flat))


def test_package_modules_take_the_reference_modules_from_bert():
    # A plain `import tokenization` (modeling, optimization) in the package would give a
    # fork's file beside the user's script instead of ours; tests/test_own_tokenization.py
    # shows it in a process, this covers every package module.
    for path in (REPO_ROOT / "bert_tf2").rglob("*.py"):
        plain = {name for name in _imports(path)
                 if name.split(".")[0] in ("modeling", "tokenization", "optimization")}
        assert not plain, "%s imports %s: use `from bert import ...`" % (
            path.relative_to(REPO_ROOT), sorted(plain))


# The optional extras (setup.py's extras_require) by the name their package is imported
# as, and the package modules that belong to an extra: they import it when loaded, and only
# their extra's entry imports them (lazily: create_pretraining_data --runner). No other
# module imports an extra when loaded (test_an_extra_is_loaded_only_by_its_own_modules).
EXTRA_IMPORTS = {"apache_beam": "beam", "keras_hub": "keras-hub", "safetensors": "hf",
                 "jieba": "chinese", "ai_edge_litert": "litert", "tokenizers": "bench",
                 "openvino": "openvino", "nncf": "openvino", "onnxruntime": "onnx",
                 "onnx": "onnx", "tf2onnx": "onnx"}
EXTRA_MODULES = {"bert_tf2.pretraining.pretraining_beam": "apache_beam"}


def _module_names():
    """Every package module's dotted name (bert_tf2.tf1 aside: it switches its process to
    TF1 graph mode; test_tf1_namespace imports it in a subprocess)."""
    return sorted("bert_tf2." + ".".join(p.relative_to(REPO_ROOT / "bert_tf2").with_suffix("")
                                         .parts)
                  for p in (REPO_ROOT / "bert_tf2").rglob("*.py")
                  if p.stem != "__init__" and p != REPO_ROOT / "bert_tf2" / "tf1.py")


def _installed(name):
    """Whether the top-level package `name` can be imported (a None in sys.modules: no)."""
    return importlib.util.find_spec(name) is not None


def test_every_package_module_imports_alone():
    # Each in a fresh interpreter would be slow; here, the package's own names resolve.
    # An extra's module needs its extra: test_an_extras_module_imports_with_its_extra.
    for name in _module_names():
        if name not in EXTRA_MODULES:
            assert importlib.import_module(name).__name__ == name
    assert pathlib.Path(importlib.import_module("bert_tf2").__file__).parent == \
        REPO_ROOT / "bert_tf2"


@pytest.mark.parametrize("name", sorted(EXTRA_MODULES))
def test_an_extras_module_imports_with_its_extra(name):
    needed = EXTRA_MODULES[name]
    if not _installed(needed):
        pytest.skip("%s needs the [%s] extra (%s is not installed)"
                    % (name, EXTRA_IMPORTS[needed], needed))
    assert importlib.import_module(name).__name__ == name


def _load_time_imports(path):
    """The modules `path` imports when it is loaded (not inside a function or class)."""
    pending = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
        else:
            pending.extend(ast.iter_child_nodes(node))


def test_an_extra_is_loaded_only_by_its_own_modules():
    # An optional extra is never imported on the default path: a module that imports one
    # (or an extra's module) when loaded is an extra's module, listed in EXTRA_MODULES.
    found = {}
    for name in _module_names():
        path = REPO_ROOT.joinpath(*name.split(".")).with_suffix(".py")
        for imported in _load_time_imports(path):
            top = imported.split(".")[0]
            if top in EXTRA_IMPORTS:
                found[name] = top
            elif imported in EXTRA_MODULES:
                found[name] = EXTRA_MODULES[imported]
    assert found == EXTRA_MODULES


def test_a_missing_extra_skips_its_module_saying_why(monkeypatch):
    # The TF 2.21 recipe of docs/install.md installs no [beam]: the module of that extra is
    # skipped with the reason, every other module still imports.
    monkeypatch.setitem(sys.modules, "apache_beam", None)
    monkeypatch.delitem(sys.modules, "bert_tf2.pretraining.pretraining_beam", raising=False)
    with pytest.raises(ImportError):
        importlib.import_module("bert_tf2.pretraining.pretraining_beam")
    test_every_package_module_imports_alone()
    with pytest.raises(pytest.skip.Exception, match=r"^bert_tf2\.pretraining\.pretraining_beam "
                                                    r"needs the \[beam\] extra \(apache_beam "
                                                    r"is not installed\)$"):
        test_an_extras_module_imports_with_its_extra("bert_tf2.pretraining.pretraining_beam")


# A user's folder holding files named like our root modules, and what it imports (sys.path[0]
# is the folder): `bert.X` is ours, their own `import X` theirs, before and after. Beside them,
# files named like our internal modules (USER_MODULES), which end the process if imported:
# bert.run_classifier imports ours by their full names (bert_tf2.X). (Every module, the
# faces too, beside such files: tests/smoke/check.py's imports on the plain install.)
_USERS_SCRIPT = """
import os, sys
import tokenization as mine_first
from bert import tokenization, modeling, optimization
import modeling as mine
ours = os.path.realpath(sys.argv[1])
for module in (tokenization, modeling, optimization):
    assert os.path.dirname(os.path.realpath(module.__file__)) == ours, module.__file__
assert mine_first.USER == "tokenization" and mine.USER == "modeling"
assert sys.modules["tokenization"] is mine_first and sys.modules["modeling"] is mine
from bert import modeling as again
assert again is modeling and optimization.tf is modeling.tf
from bert import run_classifier
assert os.path.dirname(os.path.realpath(run_classifier.__file__)) == ours
print("ok")
"""
USER_MODULES = ("training", "serving", "heads", "checkpoints", "fileutil", "startup")


def _run_users_script(folder, pythonpath, ours):
    for name in ("tokenization", "modeling"):
        (folder / (name + ".py")).write_text("USER = %r\n" % name)
    for name in USER_MODULES:
        (folder / (name + ".py")).write_text("raise SystemExit('user %s.py imported')\n" % name)
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    out = subprocess.run([sys.executable, "-c", _USERS_SCRIPT, str(ours)], cwd=folder,
                         env=env, capture_output=True, text=True, timeout=HANG_GUARD_SECONDS)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


@pytest.mark.slow
def test_from_bert_import_gives_ours_beside_a_users_files_in_the_repository(tmp_path):
    _run_users_script(tmp_path, REPO_ROOT, REPO_ROOT)


@pytest.mark.slow
def test_from_bert_import_gives_ours_beside_a_users_files_when_installed(tmp_path):
    # What pip installs (setup.py's MODULES and packages), from a copy: no build/ in the repo.
    source = tmp_path / "source"
    source.mkdir()
    for path in REPO_ROOT.glob("*.py"):
        shutil.copy(path, source)
    for package in ("bert", "bert_tf2"):
        shutil.copytree(REPO_ROOT / package, source / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    installed = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                          "--no-build-isolation", "--target", str(installed), str(source)],
                         capture_output=True, text=True, timeout=HANG_GUARD_SECONDS)
    assert out.returncode == 0, out.stderr[-3000:]
    user = tmp_path / "user"
    user.mkdir()
    _run_users_script(user, installed, installed)


# The floors of docs/CONTRACTS.md, from the top: a module imports its own floor or below.
# A package module (or sub-package, "name/") in no floor is a test failure: place it.
FLOORS = (
    ("tf1", "compat/"),
    ("cli",),
    ("flags_common",),
    ("convert/",),
    ("export/",),
    ("tasks/", "pretraining/"),
    ("loaders",),
    ("trainer/", "input_pipeline"),
    ("modeling", "heads", "optimization", "tokenization"),
    ("encoder/", "optim/"),
    ("base/", "text/", "startup", "machine", "fileutil", "logs", "settings", "root_modules"),
)
_FLOOR_OF = {name: level for level, names in enumerate(FLOORS) for name in names}
# The upward imports there are, each with its reason; none may be added without one.
UPWARD = {}  # (issue 70: modeling.py -> compat/fork_checkpoints.py, now base/checkpoint_names;
# issue 93: export/head_classes.py -> convert/hf_names, now base/hf_names)


def _floor_name(module):
    """The FLOORS name of an imported module ("bert_tf2.tasks.pooling" -> "tasks/"), or None
    when it is not the package's nor a reference module it stands under."""
    parts = module.split(".")
    if parts[0] == "bert" and len(parts) > 1:  # `from bert import tokenization`: ours
        parts = parts[1:]
    if parts[0] in ("modeling", "optimization", "tokenization"):
        return parts[0]
    if parts[0] != "bert_tf2" or len(parts) < 2:
        return None
    sub = REPO_ROOT / "bert_tf2" / parts[1]
    return parts[1] + "/" if sub.is_dir() else parts[1]


def _package_modules():
    """(floor name, path) of every package module and of the reference modules above it."""
    for path in sorted((REPO_ROOT / "bert_tf2").rglob("*.py")):
        if path.stem != "__init__":
            yield _floor_name(".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)), path
    for name in ("modeling", "optimization", "tokenization"):
        yield name, REPO_ROOT / (name + ".py")


def test_every_package_module_has_a_floor():
    unplaced = sorted({name for name, _ in _package_modules()} - set(_FLOOR_OF))
    assert not unplaced, "not in tests/test_layout.FLOORS (and docs/CONTRACTS.md): %s" % unplaced


def test_an_import_anywhere_in_a_module_counts(tmp_path):
    # Inside a function, relative, or by importlib: each is an import the floors see (issue
    # 93: the heads' HF names were read by an import inside a method, export/ -> convert/).
    path = REPO_ROOT / "bert_tf2" / "export" / "made_up.py"
    source = ("import importlib\n"
              "def f():\n    from bert_tf2.convert import hf_names\n"
              "class C:\n    def g(self):\n        from ..convert import keras_hub\n"
              "        from . import head_types\n"
              "        return importlib.import_module('bert_tf2.convert.huggingface')\n")
    found = set(_imports(path, source))
    assert {"bert_tf2.convert", "bert_tf2.convert.hf_names", "bert_tf2.convert.keras_hub",
            "bert_tf2.export.head_types", "bert_tf2.convert.huggingface"} <= found, found
    assert {_floor_name(m) for m in found} - {None} == {"convert/", "export/"}
    assert _FLOOR_OF["convert/"] < _FLOOR_OF["export/"]


def test_the_convert_floor_is_above_the_export_floor():
    # convert/ reads the head registry (export/head_types); the heads read the HF names from
    # base/hf_names, below both. Before issue 93, export/head_classes.py imported
    # bert_tf2.convert.hf_names inside hf_weights, and the two shared a floor.
    importers = {str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "bert_tf2" / "export")
                 .rglob("*.py") if any(_floor_name(m) == "convert/" for m in _imports(p))}
    assert not importers, importers
    # The old import path gives the same objects (every public name of base/hf_names).
    old = importlib.import_module("bert_tf2.convert.hf_names")
    new = importlib.import_module("bert_tf2.base.hf_names")
    public = [name for name in _defines(REPO_ROOT / "bert_tf2" / "base" / "hf_names.py")
              if not name.startswith("_")] + ["INT_KEYS", "POOLER_NAMES"]
    missing = [name for name in public if getattr(old, name, None) is not getattr(new, name)]
    assert not missing, "bert_tf2.convert.hf_names lacks %s" % missing


def test_no_import_runs_up_the_floors():
    upward = []
    for name, path in _package_modules():
        for imported in _imports(path):
            target = _floor_name(imported)
            where = str(path.relative_to(REPO_ROOT))
            excepted = any(w == where and (m == imported or m.startswith(imported + "."))
                           for w, m in UPWARD)
            if target in _FLOOR_OF and _FLOOR_OF[target] < _FLOOR_OF[name] and not excepted:
                upward.append("%s imports %s" % (where, imported))
    assert not upward, upward


def _module_graph():
    """{module: set of the package (and reference) modules it imports, lazily too}."""
    paths = {".".join(path.relative_to(REPO_ROOT).with_suffix("").parts): path
             for _, path in _package_modules()}
    graph = {}
    for name, path in paths.items():
        targets = set()
        for imported in _imports(path):
            while imported and imported not in paths:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def test_no_import_circle():
    # A circle (a imports b, b imports a, at load time or inside a function) makes the
    # order of loading matter; issue 70: compat/estimator.py <-> compat/early_stopping.py.
    graph = _module_graph()
    circles = []

    def visit(name, path, done):
        for target in sorted(graph[name]):
            if target in path:
                circles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in done:
                done.add(target)
                visit(target, path + [target], done)
    done = set()
    for name in sorted(graph):
        if name not in done:
            done.add(name)
            visit(name, [name], done)
    assert not circles, circles


def test_the_flag_groups_and_the_process_wrapper_stay_above_tasks_and_export():
    # The loaders tasks/ and export/ use live in bert_tf2/loaders.py, below them.
    for sub in ("tasks", "export", "convert", "pretraining", "trainer"):
        for path in (REPO_ROOT / "bert_tf2" / sub).rglob("*.py"):
            above = {m for m in _imports(path)
                     if m in ("bert_tf2.flags_common", "bert_tf2.cli")}
            assert not above, "%s imports %s" % (path.relative_to(REPO_ROOT), sorted(above))


def _defines(path):
    """The classes and functions a module's own code defines (top level), by name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name: node for node in tree.body
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}


def test_the_task_models_live_beside_the_encoder_and_the_old_path_only_re_exports():
    # "Where is the classifier model" is answered by one file name: bert_tf2/heads.py.
    models = {}
    for path in list(REPO_ROOT.glob("*.py")) + list((REPO_ROOT / "bert_tf2").rglob("*.py")):
        for name, node in _defines(path).items():
            if any(ast.unparse(base) == "tf_keras.Model" for base in getattr(node, "bases", ())):
                models[name] = str(path.relative_to(REPO_ROOT))
    assert models and set(models.values()) == {"bert_tf2/heads.py"}, models
    # bert_tf2/trainer/heads.py keeps a user's old import working and holds no code.
    old = REPO_ROOT / "bert_tf2" / "trainer" / "heads.py"
    body = ast.parse(old.read_text(encoding="utf-8")).body
    assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    assert all(isinstance(node, ast.ImportFrom) and node.module == "bert_tf2.heads"
               for node in body[1:]), old.read_text(encoding="utf-8")
    new_home = importlib.import_module("bert_tf2.heads")
    old_home = importlib.import_module("bert_tf2.trainer.heads")
    public = [name for name in _defines(REPO_ROOT / "bert_tf2" / "heads.py")
              if not name.startswith("_")] + ["TAG_SCHEMES", "FORBIDDEN"]
    missing = [name for name in public if getattr(old_home, name, None) is not
               getattr(new_home, name)]
    assert not missing, "bert_tf2.trainer.heads lacks %s" % missing


# A module a newcomer reads whole stays under MAX_LINES.
MAX_LINES = 900


def test_no_module_is_over_the_line_limit():
    paths = list(REPO_ROOT.glob("*.py")) + list((REPO_ROOT / "bert_tf2").rglob("*.py"))
    sizes = {str(p.relative_to(REPO_ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for p in paths}
    over = sorted(name for name, lines in sizes.items() if lines > MAX_LINES)
    assert not over, {name: sizes[name] for name in over}


# A function a newcomer reads at once stays under MAX_FUNCTION_LINES (its def line to its
# last line, decorators included), in the package and the root faces.
MAX_FUNCTION_LINES = 80


# Faces stay thin: their logic lives in the package (issue 70).
FACE_LINES = {"run_squad.py": 450}


def test_the_faces_stay_thin():
    long_faces = {name: n for name, most in FACE_LINES.items()
                  for n in [len((REPO_ROOT / name).read_text(encoding="utf-8").splitlines())]
                  if n > most}
    assert not long_faces, long_faces


def test_no_function_is_over_the_line_limit():
    long = {}
    for path in list(REPO_ROOT.glob("*.py")) + list((REPO_ROOT / "bert_tf2").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if node.end_lineno - first + 1 > MAX_FUNCTION_LINES:
                    where = "%s:%d %s" % (path.relative_to(REPO_ROOT), first, node.name)
                    long[where] = node.end_lineno - first + 1
    assert not long, long


# What TF_USE_LEGACY_KERAS changes (tests/conftest.py sets it in the suite's processes):
# TensorFlow's Keras aliases. bert-tf2 never goes through them, so its code runs the same
# with the variable set (the suite) and unset (a user).
_KERAS_ALIASES = {"keras", "layers", "losses", "metrics", "optimizers", "initializers"}


def _keras_alias_uses(source):
    """'line: name' of each use of TensorFlow's Keras aliases in `source` (tf.keras.X,
    tf.layers, tf.compat.v1.keras / layers, tf.compat.v2.losses, `from tensorflow import
    keras`, `import tensorflow.keras`); tf.compat.v1.losses / metrics are TF's own."""
    found, tree = [], ast.parse(source)
    inner_parts = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Attribute) and id(node) not in inner_parts:
            parts, inner = [], node
            while isinstance(inner, ast.Attribute):
                parts.insert(0, inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in ("tf", "tensorflow"):
                names = [".".join([inner.id] + parts)]
                rest = parts[2:] if parts[:1] == ["compat"] else parts
                alias = rest[:1] and (rest[0] in _KERAS_ALIASES if parts[:2] != ["compat", "v1"]
                                      else rest[0] in ("keras", "layers"))
                names = names if alias else []
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tensorflow"):
            names = ["from %s import %s" % (node.module, a.name) for a in node.names
                     if "keras" in node.module or a.name in _KERAS_ALIASES]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names
                     if a.name.startswith("tensorflow.") and "keras" in a.name]
        found += [(node.lineno, name) for name in names]
    return ["%d: %s" % use for use in sorted(found)]


def test_no_code_uses_tensorflows_keras_aliases():
    assert _keras_alias_uses("import tensorflow as tf\nx = tf.keras.layers.Dense(2)\n"
                             "y = tf.compat.v1.layers.dense\nz = tf.compat.v1.metrics.mean\n"
                             "from tensorflow import keras\n") == [
        "2: tf.keras.layers.Dense", "3: tf.compat.v1.layers.dense", "5: from tensorflow import keras"]
    uses = {}
    for path in list(REPO_ROOT.glob("*.py")) + list((REPO_ROOT / "bert_tf2").rglob("*.py")):
        found = _keras_alias_uses(path.read_text(encoding="utf-8"))
        if found:
            uses[str(path.relative_to(REPO_ROOT))] = found
    assert not uses, uses
