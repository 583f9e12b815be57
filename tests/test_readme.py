"""README.md and every docs/ page: each command line of a root script parses with that
script's flags, the fork tool's lines run on a tiny fork, and each Python block is run (here
or by the test named beside it, in _NOT_RUN_HERE or in a `<!-- run by tests/x.py -->` line
before the block) or listed with the reason it is not (a renamed or removed flag on any page
fails here)."""
import importlib
import re
import shlex

import pytest

import registry_lists
from bert_tf2 import flags_common
from conftest import REPO_ROOT

# README first, then the site's pages in path order (docs/tools/ is code, not a page).
_PAGES = ["README.md"] + sorted(
    str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "docs").rglob("*.md")
    if "tools" not in p.relative_to(REPO_ROOT / "docs").parts)
_TEXT = {page: (REPO_ROOT / page).read_text(encoding="utf-8") for page in _PAGES}
_ROOT_SCRIPTS = {p.stem for p in REPO_ROOT.glob("*.py")} - {"setup"}


def _blocks(language, pages=None):
    """(page, line number, text) of every ```language block of the pages (all by default)."""
    for page in pages or _PAGES:
        text = _TEXT[page]
        for match in re.finditer(r"^```%s\n(.*?)^```" % language, text, flags=re.M | re.S):
            yield page, text.count("\n", 0, match.start()) + 1, match.group(1)


def _command_lines(block, first_line):
    """(line number, command) of a bash block: a line ending in a backslash goes on."""
    start, parts = None, []
    for offset, line in enumerate(block.splitlines()):
        start = first_line + 1 + offset if start is None else start
        if line.endswith("\\"):
            parts.append(line[:-1])
            continue
        yield start, " ".join(parts + [line])
        start, parts = None, []


def _commands(pages=None):
    """(page, line, script, args) of each `python <root script>.py ...` command line."""
    for page, block_line, block in _blocks("bash", pages):
        for line_number, command in _command_lines(block, block_line):
            words = shlex.split(command, comments=True)
            if len(words) < 2 or words[0] != "python" or not words[1].endswith(".py"):
                continue
            if words[1][:-3] in _ROOT_SCRIPTS:
                yield page, line_number, words[1][:-3], words[2:]


def _module_commands():
    """(page, line, module, args) of each `python -m <module> ...` command line."""
    for page, block_line, block in _blocks("bash"):
        for line_number, command in _command_lines(block, block_line):
            words = shlex.split(command, comments=True)
            if words[:2] == ["python", "-m"] and len(words) > 2:
                yield page, line_number, words[2], words[3:]


def _with_placeholders(args):
    """$VARIABLES become a placeholder folder; `...` (the page's "and the rest") goes."""
    return [re.sub(r"\$\{?(\w+)\}?", r"/tmp/readme_\1", arg) for arg in args if arg != "..."]


_COMMANDS = list(_commands())
# Every root face (found on disk: tests/registry_lists.py).
_ALL_SCRIPTS = set(registry_lists.root_faces())


def test_the_pages_have_commands_of_every_script():
    assert len(_COMMANDS) >= 25
    assert _ALL_SCRIPTS <= {script for _, _, script, _ in _COMMANDS}
    # The front door: one example per job of the brief (multiple choice, the TF1 and
    # keras-hub converters and create_vocab live on their pages).
    in_readme = {script for page, _, script, _ in _COMMANDS if page == "README.md"}
    assert _ALL_SCRIPTS - {"convert_tf1_checkpoint", "convert_keras_hub", "create_vocab",
                           "run_multiple_choice"} <= in_readme


def test_each_command_is_named_by_its_own_page_line():
    # The ids below name the line a command starts on: README.md's first command is on the
    # line after its block's opening fence, and no two commands share a line.
    assert len({(p, n) for p, n, _, _ in _COMMANDS}) == len(_COMMANDS)
    text = _TEXT[_COMMANDS[0][0]].splitlines()
    assert text[_COMMANDS[0][1] - 1].startswith("python %s.py" % _COMMANDS[0][2])


@pytest.mark.parametrize("page,line_number,script,args", _COMMANDS,
                         ids=["%s:%d:%s" % (p, n, s) for p, n, s, _ in _COMMANDS])
def test_every_command_line_parses(page, line_number, script, args):
    module = importlib.import_module(script)
    args = _with_placeholders(args)
    if any(arg.startswith("--runner") for arg in args):
        # Beam's options go to Beam: its own split, which refuses a name neither side knows.
        beam = pytest.importorskip("bert_tf2.pretraining.pretraining_beam")
        pytest.importorskip("apache_beam")
        args = beam.split_args(["prog"] + args, module.define_flags)[0][1:]
    flags_common.parse_flags(module.define_flags, args)


_MODULE_COMMANDS = list(_module_commands())


def test_the_fork_tool_commands_run_on_a_fork(tmp_path):
    # `python -m bert_tf2.compat.move_fork my_fork/ [--dry_run]` (README.md, fork.md), run on
    # a one-file fork: the dry run names the file and leaves it, the other changes its import.
    assert len(_MODULE_COMMANDS) >= 2
    move_fork = importlib.import_module("bert_tf2.compat.move_fork")
    for page, line_number, module, args in _MODULE_COMMANDS:
        assert module == "bert_tf2.compat.move_fork", \
            "%s:%d: python -m %s: no test runs it" % (page, line_number, module)
        fork = tmp_path / ("%s_%d" % (page.replace("/", "_"), line_number))
        fork.mkdir()
        (fork / "run_fork.py").write_text("import tensorflow as tf\n", encoding="utf-8")
        assert args[0] == "my_fork/"
        assert move_fork.main([str(fork)] + args[1:]) == 0
        expected = ("import tensorflow as tf\n" if "--dry_run" in args
                    else "import bert_tf2.tf1 as tf\n")
        assert (fork / "run_fork.py").read_text(encoding="utf-8") == expected, (page, args)


# The Python blocks, by their first line: run here, or why not.
_NOT_RUN_HERE = {
    "model = modeling.BertModel(": "a fragment of the reference's TF1 graph code (its "
                                   "tensors come from the user's input pipeline)",
    "import run_classifier": "run as written by tests/test_settings.py",
    "from extract_features import SentenceEncoder": "needs a converted model and scikit-learn",
    "from bert_tf2 import startup; startup.quiet()": "needs an exported MRPC SavedModel",
    "import pandas as pd": "needs parquet / csv files and a trained folder; its calls (tables "
                           "of each kind, predict) run in tests/test_in_memory.py and "
                           "tests/test_predict_surface.py",
    "from bert_tf2.export.litert_predictor import LiteRTPredictor":
        "run by tests/test_litert.py on its tiny export",
    "from bert_tf2.export.openvino_predictor import OpenVINOPredictor":
        "run by tests/test_openvino_onnx.py on the shared classifier's export",
    "# a Triton / OpenVINO Model Server client": "needs a running Triton and tritonclient",
    "from transformers import pipeline": "needs torch + transformers (the peer venv): "
                                         "tests/test_hf_export.py loads every head there",
    "import http.server": "serves for ever (docs/python.md's server): a Predictor called from "
                          "8 threads runs in tests/test_predict_surface.py",
    "from bert_tf2.export import masked_lm": "needs a Google release; its calls run on the "
                                             "shared tiny checkpoint in tests/test_fill_mask.py",
    "# fill-mask from the SavedModel": "needs an export of a release; its calls run on the "
                                      "tiny checkpoint's export in tests/test_fill_mask.py",
    "# gunicorn.conf.py": "run as gunicorn runs it (--preload's import, a fork per worker, "
                          "post_fork) by tests/test_doors.py",
    "import keras_hub": "needs the [keras-hub] extra and a converted folder: "
                        "tests/test_keras_hub.py loads every preset kind with keras-hub",
}


# Pages whose Python blocks sketch the code's shape for contributors (not for running).
_SKETCHES = {"docs/CONTRACTS.md"}


# A block the test that runs it claims on the page itself: this comment on the line before
# its fence, naming a tests/ file that reads the page (a new page's blocks need no entry above).
_CLAIM = re.compile(r"^<!-- run by (tests/[\w/]+\.py) -->$")


def claimed_by(page, line_number):
    """The tests/ file the comment before the block at `line_number` of `page` names, or None."""
    lines = _TEXT[page].splitlines()
    match = _CLAIM.match(lines[line_number - 2]) if line_number >= 2 else None
    return match.group(1) if match else None


def test_every_python_block_is_run_or_listed():
    pages = [page for page in _PAGES if page not in _SKETCHES]
    for page, line_number, block in _blocks("python", pages):
        first = block.lstrip().splitlines()[0]
        if first.startswith('"""my_tasks.py'):
            continue
        claim = claimed_by(page, line_number)
        if claim is not None:  # its test exists and reads this page
            path = REPO_ROOT / claim
            assert path.is_file() and page in path.read_text(encoding="utf-8"), \
                "%s:%d: claimed by %s, which does not read %s" % (page, line_number, claim, page)
            continue
        assert any(first.startswith(key) for key in _NOT_RUN_HERE), \
            "%s:%d: a Python block neither run nor listed: %s" % (page, line_number, first)


def test_a_claimed_block_names_its_test():
    assert _CLAIM.match("<!-- run by tests/test_ranker.py -->").group(1) == "tests/test_ranker.py"
    assert not _CLAIM.match("<!-- run by ../x.py -->")


def test_the_blocks_other_tests_run_are_in_the_readme():
    # tests/test_settings.py, test_litert.py and test_classifier_tasks.py read them there;
    # the docs pages include them from there (--8<-- "README.md:name"), never a copy.
    firsts = [b.lstrip().splitlines()[0] for _, _, b in _blocks("python", ["README.md"])]
    for first in ("import run_classifier", '"""my_tasks.py',
                  "from bert_tf2.export.litert_predictor import LiteRTPredictor"):
        assert sum(f.startswith(first) for f in firsts) == 1, first
        assert not [(p, n) for p, n, b in _blocks("python", _PAGES[1:])
                    if b.lstrip().startswith(first)], "%s: copied on a docs page" % first


def test_the_processor_file_example_loads_as_a_processor(tmp_path):
    (block,) = [b for _, _, b in _blocks("python", ["README.md"])
                if b.startswith('"""my_tasks.py')]
    namespace = {"__name__": "my_tasks"}
    exec(compile(block, "README.md:my_tasks.py", "exec"), namespace)  # pylint: disable=exec-used
    run_classifier = importlib.import_module("run_classifier")
    processor = namespace["FolderProcessor"]()
    assert isinstance(processor, run_classifier.DataProcessor)
    assert processor.get_labels() == ["neg", "pos"]
