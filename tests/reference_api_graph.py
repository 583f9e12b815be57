"""Downstream-style code against the reference's library API, in TF1 graph mode.

Run by tests/test_reference_api.py in a subprocess (disable_v2_behavior is
process-wide): `python reference_api_graph.py REPO_ROOT GOLDEN_TF1_DIR OUT.npz`.
Everything here is written the way users of google-research/bert wrote it, with
`import tensorflow.compat.v1 as tf; tf.disable_v2_behavior()` as the only change.
GOLDEN_TF1_DIR may be "-" (no ../shared): the checkpoint parts are skipped.
"""
import collections
import json
import os
import random
import sys
os.environ.pop("TF_USE_LEGACY_KERAS", None)  # as a user runs it: see tests/conftest.py

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
sys.path.insert(0, sys.argv[1])

import extract_features  # noqa: E402
import modeling  # noqa: E402
import optimization  # noqa: E402
import run_classifier  # noqa: E402
import run_pretraining  # noqa: E402
import run_squad  # noqa: E402
import tokenization  # noqa: E402

GOLDEN, OUT = sys.argv[2], sys.argv[3]
results = {}


def unreachable_ops(graph, fetches):
    """Ops of `graph` with an input or output tensor no fetch depends on by data
    (Assign outputs count as their inputs: the initializers)."""
    producers = {}
    tensors_of = {}
    assigned = collections.defaultdict(set)
    for op in graph.get_operations():
        tensors_of[op.name] = [t.name for t in list(op.inputs) + list(op.outputs)]
        for t in op.outputs:
            producers[t.name] = op.name
        if op.type == "Assign":
            for out in op.outputs:
                for inp in op.inputs:
                    assigned[inp.name].add(out.name)
                    assigned[out.name].add(inp.name)
    seen, stack = set(), [t.name for t in fetches]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        op = producers.get(name)
        stack.extend(tensors_of.get(op, []) if op else [])
        stack.extend(assigned.get(name, ()))
    return [op.name for op in graph.get_operations()
            if any(t not in seen for t in tensors_of[op.name])]


def reachability():
    """The modeling_test scenario: a training model, every op reachable."""
    with tf.Graph().as_default() as graph:
        rng = random.Random(5)

        def ids(shape, vocab):
            values = [rng.randint(0, vocab - 1) for _ in range(shape[0] * shape[1])]
            return tf.constant(values, tf.int32, shape=shape)
        config = modeling.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=3,
                                     num_attention_heads=4, intermediate_size=37)
        model = modeling.BertModel(config=config, is_training=True, input_ids=ids([5, 7], 99),
                                   input_mask=ids([5, 7], 2), token_type_ids=ids([5, 7], 16))
        outputs = [model.get_embedding_output(), model.get_sequence_output(),
                   model.get_pooled_output()] + model.get_all_encoder_layers()
        init = tf.group(tf.global_variables_initializer(), tf.local_variables_initializer())
        with tf.Session() as sess:
            sess.run(init)
            values = sess.run(outputs)
        # The reference's own asserts sit under ".../assert_less_equal/": left out.
        results["unreachable"] = np.array(
            [o for o in unreachable_ops(graph, outputs) if "/assert_less_equal/" not in o],
            dtype=object)
        results["shapes"] = np.array([list(v.shape) for v in values[:3]], dtype=object)
        results["variable_names"] = np.array([v.name for v in tf.global_variables()],
                                             dtype=object)


def restore(init_checkpoint):
    """The reference's restore idiom; returns the names it initialised."""
    tvars = tf.trainable_variables()
    assignment_map, initialized = modeling.get_assignment_map_from_checkpoint(
        tvars, init_checkpoint)
    tf.train.init_from_checkpoint(init_checkpoint, assignment_map)
    return sorted(n for n in initialized if not n.endswith(":0"))


def checkpoint_models():
    """BertModel and the runner heads on the golden TF1 checkpoint, no dropout."""
    ckpt = os.path.join(GOLDEN, "bert_model.ckpt")
    config = modeling.BertConfig.from_json_file(os.path.join(GOLDEN, "bert_config.json"))
    golden = np.load(os.path.join(GOLDEN, "expected_outputs.npz"))
    keys = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
            "masked_lm_weights", "next_sentence_labels")
    with tf.Graph().as_default():
        feed = {k: tf.constant(golden[k]) for k in keys}
        model = modeling.BertModel(config, False, feed["input_ids"], feed["input_mask"],
                                   feed["segment_ids"])
        mlm = run_pretraining.get_masked_lm_output(
            config, model.get_sequence_output(), model.get_embedding_table(),
            feed["masked_lm_positions"], feed["masked_lm_ids"], feed["masked_lm_weights"])
        nsp = run_pretraining.get_next_sentence_output(
            config, model.get_pooled_output(), feed["next_sentence_labels"])
        results["restored"] = np.array(restore(ckpt), dtype=object)
        fetch = {"embedding_output": model.get_embedding_output(),
                 "sequence_output": model.get_sequence_output(),
                 "pooled_output": model.get_pooled_output(),
                 "encoder_layer_0": model.get_all_encoder_layers()[0],
                 "masked_lm_loss": mlm[0], "masked_lm_example_loss": mlm[1],
                 "masked_lm_log_probs": mlm[2], "next_sentence_loss": nsp[0],
                 "next_sentence_example_loss": nsp[1], "next_sentence_log_probs": nsp[2]}
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for key, value in sess.run(fetch).items():
                results["graph_" + key] = value
    with tf.Graph().as_default():
        feed = {k: tf.constant(golden[k]) for k in keys}
        start, end = run_squad.create_model(config, False, feed["input_ids"],
                                            feed["input_mask"], feed["segment_ids"], False)
        squad_restored = restore(ckpt)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            results["graph_start_logits"], results["graph_end_logits"] = sess.run([start, end])
    with tf.Graph().as_default():
        feed = {k: tf.constant(golden[k]) for k in keys}
        loss, _, logits, probs = run_classifier.create_model(
            config, False, feed["input_ids"], feed["input_mask"], feed["segment_ids"],
            feed["next_sentence_labels"], 2, False)
        results["heads_restored"] = np.array(squad_restored + restore(ckpt), dtype=object)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            (results["graph_classifier_logits"], results["graph_classifier_probs"],
             results["graph_classifier_loss"]) = sess.run([logits, probs, loss])
    with tf.Graph().as_default():
        results["graph_functions_sequence_output"] = functions_encoder(config, golden, ckpt)
    bert_as_service(config, golden, ckpt)


def functions_encoder(config, golden, ckpt):
    """The reference BertModel's body written with the module's functions."""
    input_ids = tf.constant(golden["input_ids"])
    with tf.variable_scope("bert"):
        with tf.variable_scope("embeddings"):
            output, _ = modeling.embedding_lookup(input_ids, config.vocab_size,
                                                  config.hidden_size, config.initializer_range)
            output = modeling.embedding_postprocessor(
                output, use_token_type=True, token_type_ids=tf.constant(golden["segment_ids"]),
                token_type_vocab_size=config.type_vocab_size,
                max_position_embeddings=config.max_position_embeddings, dropout_prob=0.0)
        with tf.variable_scope("encoder"):
            mask = modeling.create_attention_mask_from_input_mask(
                input_ids, tf.constant(golden["input_mask"]))
            layers = modeling.transformer_model(
                output, mask, hidden_size=config.hidden_size,
                num_hidden_layers=config.num_hidden_layers,
                num_attention_heads=config.num_attention_heads,
                intermediate_size=config.intermediate_size,
                intermediate_act_fn=modeling.get_activation(config.hidden_act),
                hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                do_return_all_layers=True)
    restore(ckpt)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(layers[-1])


def bert_as_service(config, golden, ckpt):
    """bert-as-service's graph: placeholders, the output attributes, a masked mean."""
    with tf.Graph().as_default():
        names = ("input_ids", "input_mask", "segment_ids")
        feeds = {n: tf.placeholder(tf.int32, (None, golden[n].shape[1]), n) for n in names}
        model = modeling.BertModel(config=config, is_training=False,
                                   input_ids=feeds["input_ids"], input_mask=feeds["input_mask"],
                                   token_type_ids=feeds["segment_ids"],
                                   use_one_hot_embeddings=False)
        restore(ckpt)
        mask = tf.cast(feeds["input_mask"], tf.float32)
        layer = model.all_encoder_layers[-2]
        mean = tf.reduce_sum(layer * tf.expand_dims(mask, -1), axis=1) / tf.reduce_sum(
            mask, axis=1, keepdims=True)
        results["service_same_tensors"] = np.array([
            model.pooled_output is model.get_pooled_output(),
            model.sequence_output is model.get_sequence_output(),
            list(model.all_encoder_layers) == list(model.get_all_encoder_layers()),
            model.embedding_output is model.get_embedding_output(),
            model.embedding_table is model.get_embedding_table()])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            values = sess.run([layer, mean, model.pooled_output],
                              {feeds[n]: golden[n] for n in names})
        (results["service_layer"], results["service_mean"],
         results["service_pooled"]) = values


TEXTS = [("Hello wörld, naïve café!", "A second, longer text for the pair."),
         ("The cat sat on the mat.", None),
         ("\u4e2d\u6587 and Ünïcödé\u00ad text", "x " * 40),
         ("", None)]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
         "hello", "world", "nai", "##ve", "cafe", "a", "second", "longer", "text", "for",
         "pair", "and", "unicode", "x", ".", ",", "!", "\u4e2d", "\u6587", "##s"]


def graph_mode_features(vocab_file):
    """The TF-Hub notebook's calls under TF1 graph mode, the vocab path as bytes."""
    tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file.encode("utf-8"),
                                           do_lower_case=True)
    examples = [extract_features.InputExample(i, a, b) for i, (a, b) in enumerate(TEXTS)]
    rows = [f.input_ids + f.input_mask + f.input_type_ids for f in
            extract_features.convert_examples_to_features(examples, 12, tokenizer)]
    results["graph_extract_features"] = np.array(rows)
    examples = [run_classifier.InputExample("g-%d" % i, a, b, str(i % 2))
                for i, (a, b) in enumerate(TEXTS)]
    features = run_classifier.convert_examples_to_features(examples, ["0", "1"], 12, tokenizer)
    features.append(run_classifier.convert_single_example(0, examples[0], ["0", "1"], 12,
                                                          tokenizer))
    results["graph_classifier_features"] = np.array(
        [f.input_ids + f.input_mask + f.segment_ids + [f.label_id] for f in features])
    results["feature_texts"] = np.array(TEXTS, dtype=object)
    results["vocab_file"] = np.array(vocab_file)


def train_op_steps():
    """create_optimizer(loss, ...) of the reference: 6 steps on a tiny problem."""
    with tf.Graph().as_default():
        with tf.variable_scope("layer"):
            kernel = tf.get_variable("kernel", initializer=tf.constant([[0.5, -0.3], [0.2, 0.1]]))
            norm = tf.get_variable("LayerNorm/gamma", initializer=tf.constant([1.2, 0.8]))
        target = tf.constant([[0.1, 0.2], [0.3, -0.4]])
        loss = tf.reduce_sum(tf.square(kernel - target)) + tf.reduce_sum(3.0 * norm)
        train_op = optimization.create_optimizer(loss, 0.1, 5, 2, False)
        step = tf.train.get_or_create_global_step()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(6):
                sess.run(train_op)
            names = sorted(v.name for v in tf.global_variables())
            results["train_names"] = np.array(names, dtype=object)
            results["train_kernel"], results["train_gamma"], results["train_step"] = sess.run(
                [kernel, norm, step])
            results["train_kernel_m"] = sess.run(
                tf.get_default_graph().get_tensor_by_name("layer/kernel/adam_m:0"))


reachability()
train_op_steps()
VOCAB_FILE = os.path.join(os.path.dirname(OUT), "vocab.txt")
with open(VOCAB_FILE, "w", encoding="utf-8") as vocab_out:
    vocab_out.write("".join(token + "\n" for token in VOCAB))
graph_mode_features(VOCAB_FILE)
if GOLDEN != "-":
    checkpoint_models()
np.savez(OUT, **results)
print(json.dumps(sorted(results)))
