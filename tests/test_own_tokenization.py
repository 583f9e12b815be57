"""The package runs its own tokenization.py, modeling.py and optimization.py, whatever files
of those names a user's folder holds.

A fork of the reference keeps its modified copies beside its scripts; there
`import tokenization` (or modeling, optimization) is the fork's (the reference's face: the
user's script imports its own), but `import export_saved_model` (and every package module:
loaders, tasks, export, heads, trainer, pretraining) must still run ours
(`from bert import tokenization`, bert_tf2/root_modules.py).
"""
import os
import subprocess
import sys

import pytest

from conftest import REPO_ROOT
from conftest import HANG_GUARD_SECONDS

# A fork's copy: our file with a tokenize() that gives [UNK] for everything and without a
# function ours has (the reference's file lacks is_chinese_char, which the graph reads).
_FORK_TAIL = """
FORK = True
del is_chinese_char
FullTokenizer.tokenize = lambda self, text: ["[UNK]"]
"""

# Their modeling.py lacks BertConfig.from_json_file and their optimization.py create_slots
# (both: functions the package calls).
_FORK_MODELING = """
FORK = True
del BertConfig.from_json_file
"""
_FORK_OPTIMIZATION = """
FORK = True
del create_slots
"""

_SCRIPT = """
import sys

import pytest
import tokenization as theirs
assert theirs.FORK and sys.modules["tokenization"] is theirs
import modeling as their_modeling, optimization as their_optimization
assert their_modeling.FORK and their_optimization.FORK
import export_saved_model  # before the fix: AttributeError (no is_chinese_char)
from bert_tf2 import loaders
from bert_tf2.export import tokenization_graph
from bert_tf2.tasks import glue_data
tokenizer = loaders.load_tokenizer(sys.argv[1], True)
print(tokenizer.tokenize("The cat sat, on the MAT."))
print(tokenizer.convert_tokens_to_ids(["the", "mat"]))
print(glue_data.tokenization.convert_to_unicode(b"caf\\xc3\\xa9"))
import tokenization as again
assert again is theirs and sys.modules["tokenization"] is theirs
print(type(tokenizer) is not theirs.FullTokenizer)
from bert_tf2.trainer import training  # before: its optimization was theirs
print(hasattr(training.optimization, "create_slots"))
config = loaders.load_bert_config(sys.argv[2])  # before: no from_json_file
print(config.hidden_size, type(config) is not their_modeling.BertConfig)
import modeling as again_modeling
assert again_modeling is their_modeling and sys.modules["modeling"] is their_modeling
"""


@pytest.mark.slow  # a fresh process (TensorFlow imported in it): the boundary it tests
def test_a_users_tokenization_modeling_optimization_leave_the_package_on_ours(tmp_path):
    for name, tail in (("tokenization", _FORK_TAIL), ("modeling", _FORK_MODELING),
                       ("optimization", _FORK_OPTIMIZATION)):
        (tmp_path / (name + ".py")).write_text(
            (REPO_ROOT / (name + ".py")).read_text(encoding="utf-8") + tail, encoding="utf-8")
    config = tmp_path / "bert_config.json"
    config.write_text('{"vocab_size": 11, "hidden_size": 8, "num_hidden_layers": 1, '
                      '"num_attention_heads": 2, "intermediate_size": 16}', encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on",
                                "mat", ",", "."]) + "\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(vocab), str(config)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=HANG_GUARD_SECONDS)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == [
        "['the', 'cat', 'sat', ',', 'on', 'the', 'mat', '.']", "[4, 8]", "café", "True", "True",
        "8 True"]
