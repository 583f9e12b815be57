"""README.md: every command line of a root script parses with that script's flags, and its
runnable Python blocks run (a renamed or removed flag in the README fails here)."""
import importlib
import re
import shlex

import pytest

from bert_tf2 import flags_common
from conftest import REPO_ROOT

_README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
_ROOT_SCRIPTS = {p.stem for p in REPO_ROOT.glob("*.py")} - {"setup"}


def _blocks(language):
    """(line number, text) of every ```language block of the README."""
    for match in re.finditer(r"^```%s\n(.*?)^```" % language, _README, flags=re.M | re.S):
        yield _README.count("\n", 0, match.start()) + 1, match.group(1)


def _commands():
    """(README line, script, args) of each `python <root script>.py ...` command line."""
    for line_number, block in _blocks("bash"):
        for command in block.replace("\\\n", " ").splitlines():
            words = shlex.split(command, comments=True)
            if len(words) < 2 or words[0] != "python" or not words[1].endswith(".py"):
                continue
            if words[1][:-3] in _ROOT_SCRIPTS:
                yield line_number, words[1][:-3], words[2:]


def _with_placeholders(args):
    """$VARIABLES become a placeholder folder; `...` (the README's "and the rest") goes."""
    return [re.sub(r"\$\{?(\w+)\}?", r"/tmp/readme_\1", arg) for arg in args if arg != "..."]


_COMMANDS = list(_commands())


def test_the_readme_has_commands_of_most_scripts():
    assert len(_COMMANDS) >= 25
    assert {"run_classifier", "run_squad", "run_pretraining", "create_pretraining_data",
            "extract_features", "run_ner", "run_multiple_choice", "export_saved_model",
            "convert_tf1_checkpoint", "convert_hf_checkpoint", "create_vocab"} <= \
        {script for _, script, _ in _COMMANDS}


@pytest.mark.parametrize("line_number,script,args", _COMMANDS,
                         ids=["README.md:%d:%s" % (n, s) for n, s, _ in _COMMANDS])
def test_every_readme_command_line_parses(line_number, script, args):
    module = importlib.import_module(script)
    args = _with_placeholders(args)
    if any(arg.startswith("--runner") for arg in args):
        # Beam's options go to Beam: its own split, which refuses a name neither side knows.
        beam = pytest.importorskip("bert_tf2.pretraining.pretraining_beam")
        pytest.importorskip("apache_beam")
        args = beam.split_args(["prog"] + args, module.define_flags)[0][1:]
    flags_common.parse_flags(module.define_flags, args)


# The Python blocks, by their first line: run here, or why not.
_NOT_RUN_HERE = {
    "model = modeling.BertModel(": "a fragment of the reference's TF1 graph code (its "
                                   "tensors come from the user's input pipeline)",
    "import run_classifier": "run as written by tests/test_settings.py",
    "from extract_features import SentenceEncoder": "needs a converted model and scikit-learn",
    "from bert_tf2 import startup; startup.quiet()": "needs an exported MRPC SavedModel",
    "import pandas as pd": "needs parquet files and a trained folder; its calls (tables of "
                           "each kind, predict) run in tests/test_in_memory.py",
    "from bert_tf2.export.litert_predictor import LiteRTPredictor":
        "run by tests/test_litert.py on its tiny export",
    "from transformers import pipeline": "needs torch + transformers (the peer venv): "
                                         "tests/test_hf_export.py loads every head there",
}


def test_every_python_block_is_run_or_listed():
    for line_number, block in _blocks("python"):
        first = block.lstrip().splitlines()[0]
        if first.startswith('"""my_tasks.py'):
            continue
        assert any(first.startswith(key) for key in _NOT_RUN_HERE), \
            "README.md:%d: a Python block neither run nor listed: %s" % (line_number, first)


def test_the_processor_file_example_loads_as_a_processor(tmp_path):
    (block,) = [b for _, b in _blocks("python") if b.startswith('"""my_tasks.py')]
    namespace = {"__name__": "my_tasks"}
    exec(compile(block, "README.md:my_tasks.py", "exec"), namespace)  # pylint: disable=exec-used
    run_classifier = importlib.import_module("run_classifier")
    processor = namespace["FolderProcessor"]()
    assert isinstance(processor, run_classifier.DataProcessor)
    assert processor.get_labels() == ["neg", "pos"]
