"""The heads and runners the tests go through, found instead of listed (issue 93).

A test that names every head or every runner reads them here: the heads from the registry
(bert_tf2/export/head_types.ENTRIES, read when called, so a head's room added to
bert_tf2/export/model_types/, or by a test, is in every list), the runners from the root faces on disk (a script with
flags: define_flags, run and main at its top level). Plain Python: no TensorFlow.
"""
import ast
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
# The reference's libraries at the root (no flags): its other five files are runners.
LIBRARIES = ("modeling", "tokenization", "optimization")
def root_modules(root=REPO_ROOT):
    """The names of the root's modules (its *.py less setup.py), sorted."""
    return sorted(p.stem for p in pathlib.Path(root).glob("*.py") if p.name != "setup.py")


def root_faces(root=REPO_ROOT):
    """The root's runners and command faces (their modules' names, sorted): the root modules
    whose top level defines every FACE_FUNCTIONS (bert_tf2.root_modules.faces, the rule the
    docs' flag pages read too)."""
    from bert_tf2 import root_modules as modules  # pylint: disable=import-outside-toplevel
    return modules.faces(str(root))


def parsed_sources(root=REPO_ROOT):
    """[(path relative to the root, its parsed module)] of every Python file of the root and
    of bert_tf2/, sorted: what the guards that scan the sources read."""
    root = pathlib.Path(root)
    paths = sorted(root.glob("*.py")) + sorted((root / "bert_tf2").rglob("*.py"))
    return [(str(p.relative_to(root)), ast.parse(p.read_text(encoding="utf-8")))
            for p in paths]


def entries():
    """The registry's entries (head_types.ENTRIES as it is when called)."""
    from bert_tf2.export import head_types  # pylint: disable=import-outside-toplevel
    return head_types.ENTRIES


def head_runners(registered=None):
    """The runners whose model folders hold a registered head (entry.runner), sorted."""
    return sorted({e.runner for e in (entries() if registered is None else registered)
                   if e.runner})


def matches_every_checkpoint(entry):
    """Whether `entry` is told from any checkpoint (no held_marks, no head to check: the
    encoder), so a door tries it last."""
    return entry.matches_every_checkpoint


# The doors whose order tells a checkpoint's head by trying the heads in turn (head_types.
# door_orders; hf: convert_hf_checkpoint's list, in the same rules); litert and served only
# list their types.
DETECTION_DOORS = ("tf1", "held", "hf")


def order_problems(orders):
    """What breaks the rules of door orders `orders` ({door: entries}, head_types.door_orders'
    shape): each type once; and in a detection door, the entry matching every checkpoint
    last, a head whose marks hold all of another's (and more) before that one, a head part_of
    another after it."""
    problems = []
    for door, ranked in orders.items():
        names = [e.name for e in ranked]
        if len(set(names)) != len(names):
            problems.append("%s: a type twice in %s" % (door, names))
        if door not in DETECTION_DOORS:
            continue
        at = {name: n for n, name in enumerate(names)}
        for entry in ranked:
            if matches_every_checkpoint(entry) and at[entry.name] != len(ranked) - 1:
                problems.append("%s: %s matches every checkpoint but is not last"
                                % (door, entry.name))
            problems += ["%s: %s before %s, whose marks hold all of its"
                         % (door, o.name, entry.name) for o in ranked if o.held_marks
                         and set(o.held_marks) < set(entry.held_marks)
                         and at[o.name] < at[entry.name]]
            problems += ["%s: %s before %s, which it is part of" % (door, entry.name, whole)
                         for whole in entry.part_of if at.get(whole, -1) > at[entry.name]]
    return problems
