"""A --processor file that ends the program (sys.exit, argparse) at import or in its
methods: one line naming the file and exit code 1, not exit 0 with nothing written
(user_processor)."""
import json
import os
import subprocess
import sys

import pytest

from bert_tf2.tasks import user_processor
from conftest import write_text
from conftest import HANG_GUARD_SECONDS

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PROCESSOR = ("from run_classifier import DataProcessor\n\n\nclass P(DataProcessor):\n"
              "    def get_labels(self):\n        return ['a', 'b']\n\n"
              "    def get_train_examples(self, data_dir):\n        %s\n")


@pytest.mark.slow
def test_sys_exit_at_import_is_one_line_and_exit_1(tmp_path):
    plugin = write_text(tmp_path / "exits.py", "import sys\n\nsys.exit(0)\n" +
                        _PROCESSOR % "return []")
    vocab = write_text(tmp_path / "vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n")
    config = write_text(tmp_path / "bert_config.json", json.dumps(
        {"vocab_size": 6, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
         "intermediate_size": 32, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
         "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 32,
         "type_vocab_size": 2, "initializer_range": 0.02}))
    done = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "run_classifier.py"),
         "--processor=%s:P" % plugin, "--task_name=mine", "--data_dir=%s" % tmp_path,
         "--vocab_file=" + vocab, "--bert_config_file=" + config, "--do_train",
         "--output_dir=%s" % (tmp_path / "out"), "--max_seq_length=16"],
        cwd=str(tmp_path), capture_output=True, text=True, timeout=HANG_GUARD_SECONDS,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr == (
        "error: --processor=%s:P: importing it raised SystemExit(0) at %s, line 3: the file "
        "must not end the program when imported (put that code under `if __name__ == "
        "\"__main__\":`)\n" % (plugin, plugin))
    assert not os.path.exists(str(tmp_path / "out"))


def test_argparse_at_import_names_its_error(tmp_path, capsys):
    plugin = write_text(tmp_path / "cli.py", "import argparse\n\nparser = argparse.ArgumentParser()"
                        "\nparser.add_argument('--rate', type=float)\n"
                        "args = parser.parse_args(['--speed=2'])\n" + _PROCESSOR % "return []")
    with pytest.raises(ValueError, match=r"^--processor=%s:P: importing it raised SystemExit\(2\) "
                       r"at %s, line 5 \(.*error: unrecognized arguments: --speed=2\): the file "
                       r"must not end" % (plugin, plugin)) as e:
        user_processor.load_processor(plugin + ":P")
    assert "\n" not in str(e.value)
    assert capsys.readouterr().err == ""  # argparse's usage lines are in the one line
    assert "cli" not in sys.modules


def test_a_method_that_exits_is_a_value_error(tmp_path, capsys):
    plugin = write_text(tmp_path / "method_exits.py", "import sys\nprint('imported', "
                        "file=sys.stderr)\n" + _PROCESSOR % "sys.exit('no data')")
    processor = user_processor.load_processor(plugin + ":P")
    assert capsys.readouterr().err == "imported\n"  # what an import prints still shows
    assert processor.get_labels() == ["a", "b"]
    with pytest.raises(ValueError, match=r"^--processor=%s:P: get_train_examples\(\) raised "
                       r"SystemExit\('no data'\) at %s, line 11$" % (plugin, plugin)):
        processor.get_train_examples(str(tmp_path))
