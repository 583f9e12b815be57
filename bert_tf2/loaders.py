"""What a run loads from its settings, checked: the BertConfig, the tokenizer, the
checks every fine-tuning run starts with.

Below tasks/ (which call it) and above trainer/: settings come in as plain values or a
Settings part, never as flags. Each check is one ValueError naming the flag and file.
"""
import re

from absl import logging

from bert import modeling
from bert_tf2.trainer import periodic_eval
from bert import tokenization  # ours, whatever tokenization.py a user's folder holds


# The settings check_fine_tuning reads, besides the runner's required ones.
FINE_TUNING_CHECKS = ("do_lower_case", "init_checkpoint", "do_train", "do_eval", "do_predict",
                      "bert_config_file", "max_seq_length") + periodic_eval.SETTINGS


def check_fine_tuning(checks, required, check_task=None):
    """The checks every fine-tuning runner starts with; returns the BertConfig.

    `checks`: a part of the runner's settings with FINE_TUNING_CHECKS and `required`.
    The settings `required` are set, do_lower_case fits the checkpoint's name, at
    least one of do_train / do_eval / do_predict is set, `check_task()` (the
    runner's own checks, optional) passes, the evaluation-during-training settings
    fit (periodic_eval.check_settings) and the model's config fits max_seq_length
    (load_bert_config), in that order.
    """
    checks.require(*required)
    tokenization.validate_case_matches_checkpoint(checks.do_lower_case, checks.init_checkpoint)
    if not (checks.do_train or checks.do_eval or checks.do_predict):
        raise ValueError("nothing to do: pass at least one of --do_train, --do_eval and "
                         "--do_predict")
    if check_task is not None:
        check_task()
    periodic_eval.check_settings(checks)
    return load_bert_config(checks.bert_config_file, checks.max_seq_length)


def load_bert_config(bert_config_file, max_seq_length=None):
    """The BertConfig of --bert_config_file, checked against --max_seq_length.

    A --max_seq_length longer than the model's max_position_embeddings would index
    past the position table; it is an error naming both.
    """
    bert_config = modeling.BertConfig.from_json_file(bert_config_file)
    if max_seq_length is not None and max_seq_length > bert_config.max_position_embeddings:
        raise ValueError(
            "--max_seq_length=%d is longer than the %d positions the BERT model has "
            "(max_position_embeddings in --bert_config_file=%s)"
            % (max_seq_length, bert_config.max_position_embeddings, bert_config_file))
    return bert_config


def load_tokenizer(vocab_file, do_lower_case, required=("[CLS]", "[SEP]", "[UNK]")):
    """The FullTokenizer of --vocab_file / --do_lower_case, checked for BERT's tokens.

    A vocabulary without [CLS], [SEP] or [UNK] would fail later with a KeyError
    deep in feature conversion; here it is one line naming the flag.
    """
    tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case)
    check_vocab_tokens(tokenizer.vocab, vocab_file, required)
    if do_lower_case:
        warn_if_cased(tokenizer.vocab, vocab_file)
    return tokenizer


# A vocabulary "looks cased" when at least this share of its entries (and at least
# _CASED_AT_LEAST of them) hold an upper-case letter, which lower-cased text never gives:
# Google's cased English vocabulary has thousands, its uncased and Chinese ones (almost) none.
_CASED_SHARE = 0.02
_CASED_AT_LEAST = 10
_BRACKETED = re.compile(r"^\[[^\]]*\]$")  # [CLS], [unused7], ...: named, never read in text
_WARNED_CASED = set()


def cased_entries(tokens):
    """The entries of a vocabulary (its tokens, in order) that hold an upper-case letter:
    entries lower-cased text never gives (bracketed names such as [CLS] aside)."""
    return [token for token in tokens
            if token != token.lower() and not _BRACKETED.match(token)]


def looks_cased(tokens):
    """Whether a vocabulary (its tokens) is visibly a cased one (cased_entries: many)."""
    tokens = list(tokens)
    count = len(cased_entries(tokens))
    return count >= _CASED_AT_LEAST and count >= _CASED_SHARE * len(tokens)


def warn_if_cased(tokens, vocab_file):
    """One warning line (once per vocabulary file in a process) when a vocabulary that
    looks cased is read with --do_lower_case=True: the reference accepts it, but its
    upper-case entries are never used (the text is lower-cased first)."""
    tokens = list(tokens)
    if str(vocab_file) in _WARNED_CASED or not looks_cased(tokens):
        return
    _WARNED_CASED.add(str(vocab_file))
    cased = cased_entries(tokens)
    logging.warning("--vocab_file=%s looks cased (%d of its %d entries hold upper-case "
                    "letters, e.g. %s) but --do_lower_case=True lower-cases the text: those "
                    "entries are never used; pass --do_lower_case=False for a cased model",
                    vocab_file, len(cased), len(tokens), ", ".join(cased[:3]))


def check_vocab_tokens(vocab, vocab_file, required, flag="--vocab_file"):
    """ValueError naming `flag` and the file when `vocab` lacks a token of `required`."""
    missing = [token for token in required if token not in vocab]
    if missing:
        raise ValueError("%s=%s has no %s token" % (flag, vocab_file, " / ".join(missing)))
