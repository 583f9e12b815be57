"""The reference's own modeling / tokenization / optimization, run as a fork runs them on TF 2.20.

Run by tests/test_reference_fork.py, first of tests/reference_fork_runs.py's runs in one
subprocess (bert_tf2.tf1 puts the process in TF1 graph mode), as
`python reference_fork_graph.py REPO_ROOT FORK_DIR CHECKPOINT VOCAB OUT.npz` would run.
FORK_DIR holds the reference's modeling.py, tokenization.py, optimization.py and
run_classifier.py with `import tensorflow as tf` changed to `import bert_tf2.tf1 as tf` and
nothing else. Writes the BertModel's outputs on the checkpoint, FullTokenizer's tokens, one
training step's numbers, and run_classifier's TFRecord file (dev.tf_record beside OUT) and
the batches its input_fn reads from it (tf.contrib.data.map_and_batch), for the test to
compare with bert-tf2's own modules.
"""
import json
import os
import sys
os.environ.pop("TF_USE_LEGACY_KERAS", None)  # as a user runs it: see tests/conftest.py

import numpy as np

REPO_ROOT, FORK_DIR, CHECKPOINT, VOCAB, OUT = sys.argv[1:6]
sys.path[:0] = [FORK_DIR, REPO_ROOT]  # the fork's modules first, bert_tf2 from the repository

import modeling  # noqa: E402
import optimization  # noqa: E402
import tokenization  # noqa: E402

import bert_tf2.tf1 as tf  # noqa: E402

INPUT_IDS = np.array([[2, 5, 6, 7, 8, 9, 3, 0], [2, 10, 11, 12, 13, 1, 3, 4]], np.int32)
INPUT_MASK = np.array([[1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1, 1]], np.int32)
TOKEN_TYPE_IDS = np.array([[0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1, 1]], np.int32)
TEXTS = ["Hello, World! UNwant\u00e9d running", "na\u00efve caf\u00e9 --- 3.14 [MASK]",
         "\u4e2d\u6587 and \u00c5ngstr\u00f6m's  \t tabs", ""]


def build_model(is_training):
    """The reference's BertModel on the fixed inputs, its variables from CHECKPOINT."""
    config = modeling.BertConfig.from_json_file(os.path.join(os.path.dirname(CHECKPOINT),
                                                             "bert_config.json"))
    model = modeling.BertModel(config=config, is_training=is_training,
                               input_ids=tf.constant(INPUT_IDS),
                               input_mask=tf.constant(INPUT_MASK),
                               token_type_ids=tf.constant(TOKEN_TYPE_IDS),
                               use_one_hot_embeddings=False)
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(
        tf.trainable_variables(), CHECKPOINT)
    tf.train.init_from_checkpoint(CHECKPOINT, assignment_map)
    return model, len(initialized)


def outputs():
    """sequence_output and pooled_output of the eval model (is_training=False)."""
    with tf.Graph().as_default():
        model, initialized = build_model(False)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            sequence, pooled = session.run([model.get_sequence_output(),
                                            model.get_pooled_output()])
    return {"sequence_output": sequence, "pooled_output": pooled,
            "initialized": np.int64(initialized)}


def train_step():
    """create_optimizer's train_op on a loss of the pooled output: one step, its numbers."""
    with tf.Graph().as_default():
        tf.set_random_seed(1)
        model, _ = build_model(True)
        loss = tf.reduce_mean(tf.square(model.get_pooled_output() - 0.5))
        # No warmup: the first step's warmup rate reads global_step in the same session.run
        # that increments it, unordered (the reference's graph), so it was 0 or 1e-2 / 2 by
        # chance, and the kernel sometimes did not move. Decay alone gives 1e-2 at step 0.
        train_op = optimization.create_optimizer(loss, 1e-2, num_train_steps=10,
                                                 num_warmup_steps=0, use_tpu=False)
        kernel = [v for v in tf.trainable_variables() if v.name == "bert/pooler/dense/kernel:0"]
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            before = session.run(kernel[0])
            session.run(train_op)
            after, step = session.run([kernel[0], tf.train.get_global_step()])
        slots = sorted(v.name for v in tf.global_variables() if "/adam_" in v.name)
    return {"kernel_change": np.float64(np.abs(after - before).max()), "step": np.int64(step),
            "slots": np.array(slots[:2])}


PAIRS = [("The cat sat.", "A cat was sitting.", "1"), ("Stocks fell.", "It rained.", "0"),
         ("Hello world", None, "1"), ("na\u00efve caf\u00e9 owners", "Caf\u00e9s!", "0"),
         ("One more sentence here", "and its pair", "1")]


def classifier_batches(folder):
    """The reference's run_classifier: its TFRecord writer, then its input_fn's batches."""
    import run_classifier  # pylint: disable=import-outside-toplevel
    tokenizer = tokenization.FullTokenizer(vocab_file=VOCAB, do_lower_case=True)
    examples = [run_classifier.InputExample(guid="dev-%d" % i, text_a=a, text_b=b, label=label)
                for i, (a, b, label) in enumerate(PAIRS)]
    path = os.path.join(folder, "dev.tf_record")
    run_classifier.file_based_convert_examples_to_features(examples, ["0", "1"], 16,
                                                           tokenizer, path)
    found = {}
    for drop in (False, True):
        with tf.Graph().as_default():
            dataset = run_classifier.file_based_input_fn_builder(path, 16, False, drop)(
                {"batch_size": 2})
            batch = tf.data.make_one_shot_iterator(dataset).get_next()
            with tf.Session() as session:
                batches = []
                while True:
                    try:
                        batches.append(session.run(batch))
                    except tf.errors.OutOfRangeError:
                        break
        found["sizes_drop%d" % drop] = np.array([len(b["input_ids"]) for b in batches])
        for key in batches[0]:
            found["records_drop%d_%s" % (drop, key)] = np.concatenate([b[key] for b in batches])
    return found


def main():
    results = outputs()
    results.update(train_step())
    results.update(classifier_batches(os.path.dirname(OUT)))
    tokens = []
    for lower in (True, False):
        tokenizer = tokenization.FullTokenizer(vocab_file=VOCAB, do_lower_case=lower)
        tokens += [tokenizer.tokenize(text) for text in TEXTS]
    results["tokens"] = np.array(json.dumps(tokens))
    results["modeling_file"] = np.array(modeling.__file__)
    np.savez(OUT, **results)


main()
