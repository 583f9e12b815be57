"""A fork of run_classifier.py in miniature, written against TensorFlow 1.x's API.

tests/test_reference_fork.py copies it, lets `python -m bert_tf2.compat.move_fork` change its
`import tensorflow as tf` line, and runs it: TFRecords read through
tf.contrib.data.map_and_batch, tf.layers.dense and tf.contrib.layers.layer_norm in the model,
a model_fn_builder whose scaffold_fn calls tf.train.init_from_checkpoint, and a
tf.contrib.tpu.TPUEstimator (use_tpu=False) that predicts, evaluates, trains, evaluates and
predicts again. It writes what it saw to OUTPUT_DIR/found.json. Not importable on TF 2.
"""
import json
import os

import numpy as np
import tensorflow as tf

flags = tf.flags
FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Where the records, checkpoints and found.json go.")
flags.DEFINE_integer("train_steps", 12, "Training steps.")

VOCAB, LENGTH, HIDDEN = 10, 6, 8
EMBEDDINGS = "bert/embeddings/word_embeddings"


def write_records(path, count, seed):
    """Random id sequences; the label says whether the first id is in the vocab's upper half."""
    rng = np.random.RandomState(seed)
    with tf.python_io.TFRecordWriter(path) as writer:
        for _ in range(count):
            ids = rng.randint(0, VOCAB, size=LENGTH)
            label = int(ids[0] >= VOCAB // 2)
            features = tf.train.Features(feature={
                "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
                "label_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))})
            writer.write(tf.train.Example(features=features).SerializeToString())


def input_fn_builder(input_file, is_training, drop_remainder):
    """An input_fn(params) reading `input_file` in batches of params["batch_size"]."""
    schema = {"input_ids": tf.FixedLenFeature([LENGTH], tf.int64),
              "label_ids": tf.FixedLenFeature([], tf.int64)}

    def decode(record):
        parsed = tf.parse_single_example(record, schema)
        return {name: tf.to_int32(value) for name, value in parsed.items()}

    def input_fn(params):
        records = tf.data.TFRecordDataset(input_file)
        if is_training:
            records = records.repeat().shuffle(buffer_size=100)
        return records.apply(tf.contrib.data.map_and_batch(
            decode, batch_size=params["batch_size"], drop_remainder=drop_remainder))

    return input_fn


def create_model(input_ids):
    """Logits from the first id's embedding, and that embedding."""
    table = tf.get_variable(EMBEDDINGS, [VOCAB, HIDDEN],
                            initializer=tf.truncated_normal_initializer(stddev=0.02))
    first = tf.gather(table, input_ids[:, 0])
    hidden = tf.layers.dense(first, HIDDEN, activation=tf.tanh, name="bert/pooler/dense")
    hidden = tf.contrib.layers.layer_norm(hidden, begin_norm_axis=-1, begin_params_axis=-1)
    weights = tf.get_variable("output_weights", [2, HIDDEN],
                              initializer=tf.truncated_normal_initializer(stddev=0.02))
    bias = tf.get_variable("output_bias", [2], initializer=tf.zeros_initializer())
    return tf.nn.bias_add(tf.matmul(hidden, weights, transpose_b=True), bias), first


def model_fn_builder(init_checkpoint, learning_rate):
    """A TPUEstimator model_fn: the embeddings from `init_checkpoint` through scaffold_fn."""

    def model_fn(features, labels, mode, params):  # pylint: disable=unused-argument
        logits, first = create_model(features["input_ids"])
        label_ids = features["label_ids"]
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        per_example_loss = -tf.reduce_sum(tf.one_hot(label_ids, depth=2) * log_probs, axis=-1)
        loss = tf.reduce_mean(per_example_loss)

        def scaffold_fn():
            tf.train.init_from_checkpoint(init_checkpoint, {EMBEDDINGS: EMBEDDINGS})
            return tf.train.Scaffold()

        if mode == tf.estimator.ModeKeys.TRAIN:
            optimizer = tf.contrib.tpu.CrossShardOptimizer(tf.train.AdamOptimizer(learning_rate))
            train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
            return tf.contrib.tpu.TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op,
                                                   scaffold_fn=scaffold_fn)
        if mode == tf.estimator.ModeKeys.EVAL:
            def metric_fn(per_example_loss, label_ids, logits):
                predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
                return {"eval_accuracy": tf.metrics.accuracy(label_ids, predicted),
                        "eval_loss": tf.metrics.mean(per_example_loss)}
            return tf.contrib.tpu.TPUEstimatorSpec(
                mode=mode, loss=loss, scaffold_fn=scaffold_fn,
                eval_metrics=(metric_fn, [per_example_loss, label_ids, logits]))
        return tf.contrib.tpu.TPUEstimatorSpec(mode=mode, scaffold_fn=scaffold_fn, predictions={
            "probabilities": tf.nn.softmax(logits), "embedding": first,
            "first_id": features["input_ids"][:, 0]})

    return model_fn


def pretrained(path):
    """Writes a checkpoint of the embeddings alone (the upper half's rows marked); their values."""
    values = np.zeros([VOCAB, HIDDEN], np.float32)
    values[VOCAB // 2:, 0] = 3.0
    with tf.Graph().as_default():
        tf.get_variable(EMBEDDINGS, initializer=values)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            tf.train.Saver().save(session, path)
    return values


def _from(values, predictions):
    """Whether every prediction's embedding is the row `values` holds for its first id."""
    return all(np.array_equal(p["embedding"], values[p["first_id"]]) for p in predictions)


def main(_):
    tf.logging.set_verbosity(tf.logging.INFO)
    out = FLAGS.output_dir
    tf.gfile.MakeDirs(os.path.join(out, "pretrained"))
    values = pretrained(os.path.join(out, "pretrained", "bert_model.ckpt"))
    train_file = os.path.join(out, "train.tf_record")
    eval_file = os.path.join(out, "eval.tf_record")
    write_records(train_file, 64, 1)
    write_records(eval_file, 20, 2)
    run_config = tf.contrib.tpu.RunConfig(
        cluster=None, master=None, model_dir=os.path.join(out, "model"),
        save_checkpoints_steps=5, keep_checkpoint_max=3, tf_random_seed=3,
        tpu_config=tf.contrib.tpu.TPUConfig(
            iterations_per_loop=5, num_shards=8,
            per_host_input_for_training=tf.contrib.tpu.InputPipelineConfig.PER_HOST_V2))
    estimator = tf.contrib.tpu.TPUEstimator(
        use_tpu=False, config=run_config, train_batch_size=16, eval_batch_size=8,
        predict_batch_size=8,
        model_fn=model_fn_builder(os.path.join(out, "pretrained", "bert_model.ckpt"), 0.05))
    eval_input = input_fn_builder(eval_file, False, False)
    # Before any checkpoint: the initializers and scaffold_fn's init_from_checkpoint run.
    start = list(estimator.predict(eval_input))
    before = estimator.evaluate(eval_input, steps=None)
    estimator.train(input_fn_builder(train_file, True, True), max_steps=FLAGS.train_steps)
    after = estimator.evaluate(eval_input, steps=None)
    predictions = list(estimator.predict(eval_input))
    found = {"before": {k: float(v) for k, v in before.items()},
             "after": {k: float(v) for k, v in after.items()},
             "probabilities": [p["probabilities"].tolist() for p in predictions],
             "initialized_from_checkpoint": _from(values, start),
             "embeddings_trained": not _from(values, predictions),
             "checkpoints": sorted(n for n in os.listdir(os.path.join(out, "model"))
                                   if n.endswith(".index")),
             "executing_eagerly": tf.executing_eagerly()}
    with tf.gfile.GFile(os.path.join(out, "found.json"), "w") as f:
        f.write(json.dumps(found))


if __name__ == "__main__":
    flags.mark_flag_as_required("output_dir")
    tf.app.run()
