"""What a run loads from its settings, checked: the BertConfig, the tokenizer, the
checks every fine-tuning run starts with.

Below tasks/ (which call it) and above trainer/: settings come in as plain values or a
Settings part, never as flags. Each check is one ValueError naming the flag and file.
"""
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
    return tokenizer


def check_vocab_tokens(vocab, vocab_file, required, flag="--vocab_file"):
    """ValueError naming `flag` and the file when `vocab` lacks a token of `required`."""
    missing = [token for token in required if token not in vocab]
    if missing:
        raise ValueError("%s=%s has no %s token" % (flag, vocab_file, " / ".join(missing)))
