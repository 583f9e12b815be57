"""The package runs its own tokenization.py, whatever tokenization.py a user's folder holds.

A fork of the reference keeps its modified tokenization.py beside its scripts; there
`import tokenization` is the fork's (the reference's face: the user's script imports its
own), but `import export_saved_model` (and every package module: loaders, tasks, export,
pretraining) must still tokenize with ours (`from bert import tokenization`,
bert_tf2/root_modules.py).
"""
import os
import subprocess
import sys

from conftest import REPO_ROOT
from conftest import HANG_GUARD_SECONDS

# A fork's copy: our file with a tokenize() that gives [UNK] for everything and without a
# function ours has (the reference's file lacks is_chinese_char, which the graph reads).
_FORK_TAIL = """
FORK = True
del is_chinese_char
FullTokenizer.tokenize = lambda self, text: ["[UNK]"]
"""

_SCRIPT = """
import sys
import tokenization as theirs
assert theirs.FORK and sys.modules["tokenization"] is theirs
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
"""


def test_a_users_tokenization_py_leaves_the_package_on_ours(tmp_path):
    (tmp_path / "tokenization.py").write_text(
        (REPO_ROOT / "tokenization.py").read_text(encoding="utf-8") + _FORK_TAIL,
        encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on",
                                "mat", ",", "."]) + "\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(vocab)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=HANG_GUARD_SECONDS)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == [
        "['the', 'cat', 'sat', ',', 'on', 'the', 'mat', '.']", "[4, 8]", "café", "True"]
