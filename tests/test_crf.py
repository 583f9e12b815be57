"""bert_tf2/base/crf.py: every function against enumerating every tag sequence; and
run_ner's chain with the IOB2 constraints (heads.crf_constraints) against enumerating
the valid ones."""
import itertools

import numpy as np
import pytest
import tensorflow as tf

from bert_tf2.base import crf
from bert_tf2 import heads

LENGTHS = np.array([1, 3, 4], np.int32)
NUM_TAGS = 3
MAX_LENGTH = 4


def _inputs(seed=0):
    """Random unary scores [3, 4, 3], transitions [3, 3] and tags [3, 4]."""
    rng = np.random.RandomState(seed)
    inputs = rng.randn(len(LENGTHS), MAX_LENGTH, NUM_TAGS).astype(np.float32)
    transitions = rng.randn(NUM_TAGS, NUM_TAGS).astype(np.float32)
    tags = rng.randint(NUM_TAGS, size=(len(LENGTHS), MAX_LENGTH)).astype(np.int32)
    return inputs, transitions, tags


def _score(x, transitions, tags):
    """The score of one sequence of tags (its own length) by the definition."""
    unary = sum(x[t, tag] for t, tag in enumerate(tags))
    binary = sum(transitions[a, b] for a, b in zip(tags[:-1], tags[1:]))
    return float(unary + binary)


def _every_sequence(x, transitions, length):
    """{tags: score} of every tag sequence of `length`."""
    return {tags: _score(x, transitions, tags)
            for tags in itertools.product(range(NUM_TAGS), repeat=length)}


def _brute_force(inputs, transitions, tags):
    """Per sequence: (its tags' score, log Z, the best tags, their score), enumerated."""
    out = []
    for x, given, length in zip(inputs, tags, LENGTHS):
        scores = _every_sequence(x, transitions, length)
        best = max(scores, key=scores.get)
        log_norm = np.log(np.sum(np.exp(np.array(list(scores.values()), np.float64))))
        out.append((_score(x, transitions, tuple(given[:length])), log_norm, best,
                    scores[best]))
    return out


def _all_values(inputs, transitions, tags, lengths):
    """Every function's outputs (tensors) on the same inputs."""
    log_likelihood, _ = crf.crf_log_likelihood(inputs, tags, lengths, transitions)
    decoded, best = crf.crf_decode(inputs, transitions, lengths)
    return {"unary": crf.crf_unary_score(tags, lengths, inputs),
            "binary": crf.crf_binary_score(tags, lengths, transitions),
            "sequence": crf.crf_sequence_score(inputs, tags, lengths, transitions),
            "log_norm": crf.crf_log_norm(inputs, lengths, transitions),
            "log_likelihood": log_likelihood, "decoded": decoded, "best": best}


def test_every_function_equals_enumerating_every_sequence():
    inputs, transitions, tags = _inputs()
    values = {k: v.numpy() for k, v in _all_values(inputs, transitions, tags,
                                                   LENGTHS).items()}
    for i, (score, log_norm, best, best_score) in enumerate(
            _brute_force(inputs, transitions, tags)):
        length = LENGTHS[i]
        unary = sum(inputs[i, t, tags[i, t]] for t in range(length))
        np.testing.assert_allclose(values["unary"][i], unary, rtol=1e-5)
        np.testing.assert_allclose(values["binary"][i], score - unary, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(values["sequence"][i], score, rtol=1e-5)
        np.testing.assert_allclose(values["log_norm"][i], log_norm, rtol=1e-5)
        np.testing.assert_allclose(values["log_likelihood"][i], score - log_norm,
                                   rtol=1e-5, atol=1e-5)
        # The best sequence, 0 beyond its length; its score.
        assert list(values["decoded"][i]) == list(best) + [0] * (MAX_LENGTH - length)
        np.testing.assert_allclose(values["best"][i], best_score, rtol=1e-5)
        tags_np, score_np = crf.viterbi_decode(inputs[i, :length], transitions)
        assert tags_np == list(best)
        np.testing.assert_allclose(score_np, best_score, rtol=1e-5)
    assert values["decoded"].dtype == np.int32


def test_positions_beyond_the_length_change_nothing():
    inputs, transitions, tags = _inputs(1)
    noisy_inputs, noisy_tags = inputs.copy(), tags.copy()
    for i, length in enumerate(LENGTHS):
        noisy_inputs[i, length:] = 100.0 * (1 + np.arange(NUM_TAGS))
        noisy_tags[i, length:] = NUM_TAGS - 1
    clean = _all_values(inputs, transitions, tags, LENGTHS)
    noisy = _all_values(noisy_inputs, transitions, noisy_tags, LENGTHS)
    for name in clean:
        # The same shapes and kernels; only masked-out values differ.
        np.testing.assert_allclose(noisy[name].numpy(), clean[name].numpy(), rtol=1e-6,
                                   err_msg=name)


def test_length_zero_and_a_one_step_batch_as_tensorflow_1_15():
    inputs, transitions, tags = _inputs(2)
    lengths = np.array([0, 3, 4], np.int32)
    values = _all_values(inputs, transitions, tags, lengths)
    for name in ("unary", "binary", "sequence", "log_norm", "log_likelihood"):
        assert values[name].numpy()[0] == 0.0, name
    # A length-0 sequence still gets its first position's argmax, the rest 0.
    assert list(values["decoded"].numpy()[0]) == [np.argmax(inputs[0, 0]), 0, 0, 0]
    np.testing.assert_allclose(values["best"].numpy()[0], inputs[0, 0].max())
    # Sequences of one step (T = 1).
    one = _all_values(inputs[:, :1], transitions, tags[:, :1], np.array([1, 1, 0], np.int32))
    np.testing.assert_allclose(one["log_norm"].numpy()[:2],
                               np.log(np.exp(inputs[:2, 0].astype(np.float64)).sum(1)),
                               rtol=1e-5)
    np.testing.assert_array_equal(one["decoded"].numpy()[:, 0], inputs[:, 0].argmax(1))
    np.testing.assert_allclose(one["sequence"].numpy(),
                               [inputs[0, 0, tags[0, 0]], inputs[1, 0, tags[1, 0]], 0.0])


@pytest.mark.slow
def test_graph_mode_names_the_transitions_variable_and_equals_eager():
    inputs, transitions, tags = _inputs(3)
    eager = {k: v.numpy() for k, v in _all_values(inputs, transitions, tags,
                                                  LENGTHS).items()}
    traced = {k: v.numpy() for k, v in tf.function(_all_values)(
        inputs, transitions, tags, LENGTHS).items()}
    with tf.Graph().as_default() as graph:
        with tf.compat.v1.variable_scope("crf"):
            log_likelihood, variable = crf.crf_log_likelihood(
                tf.constant(inputs), tf.constant(tags), tf.constant(LENGTHS))
        assert variable.name == "crf/transitions:0"
        assert variable.shape.as_list() == [NUM_TAGS, NUM_TAGS]
        values = _all_values(tf.constant(inputs), tf.constant(transitions),
                             tf.constant(tags), tf.constant(LENGTHS, tf.int64))
        gradient = tf.gradients(-tf.reduce_sum(log_likelihood), variable)[0]
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            graph_values, grad = session.run((values, gradient))
    assert np.all(np.isfinite(grad)) and np.any(grad != 0)
    for name in eager:
        # A graph vs eager: grappler may fuse, float32's relative bound.
        np.testing.assert_allclose(graph_values[name], eager[name], rtol=1e-5, err_msg=name)
        np.testing.assert_allclose(traced[name], eager[name], rtol=1e-5, err_msg=name)


def test_gradients_are_finite_and_match_the_marginals():
    inputs, transitions, tags = _inputs(4)
    x = tf.Variable(inputs)
    a = tf.Variable(transitions)
    with tf.GradientTape() as tape:
        log_likelihood, _ = crf.crf_log_likelihood(x, tags, LENGTHS, a)
        loss = -tf.reduce_sum(log_likelihood)
    grad_x, grad_a = tape.gradient(loss, [x, a])
    assert np.all(np.isfinite(grad_x.numpy())) and np.all(np.isfinite(grad_a.numpy()))
    # d(-log-likelihood)/dx[t, k] = P(y_t = k) - [given tag is k], by enumeration.
    expected = np.zeros_like(inputs, np.float64)
    for i, length in enumerate(LENGTHS):
        scores = _every_sequence(inputs[i], transitions, length)
        norm = np.sum(np.exp(list(scores.values())))
        for sequence, score in scores.items():
            for t, tag in enumerate(sequence):
                expected[i, t, tag] += np.exp(score) / norm
        for t in range(length):
            expected[i, t, tags[i, t]] -= 1.0
    np.testing.assert_allclose(grad_x.numpy(), expected, atol=1e-5)


@pytest.mark.slow
def test_decode_and_log_norm_compile_with_xla():
    inputs, transitions, _ = _inputs(5)
    decode = tf.function(crf.crf_decode, jit_compile=True)
    tags, best = decode(tf.constant(inputs), tf.constant(transitions), tf.constant(LENGTHS))
    log_norm = tf.function(crf.crf_log_norm, jit_compile=True)(inputs, LENGTHS, transitions)
    np.testing.assert_allclose(log_norm.numpy(),
                               crf.crf_log_norm(inputs, LENGTHS, transitions).numpy(),
                               rtol=1e-5)
    expected, expected_best = crf.crf_decode(inputs, transitions, LENGTHS)
    np.testing.assert_array_equal(tags.numpy(), expected.numpy())
    np.testing.assert_allclose(best.numpy(), expected_best.numpy(), rtol=1e-5)  # XLA vs not


# ---------------------------------------------------------------------------
# run_ner --crf_tag_scheme: the chain of a window with IOB2's constraints (heads)
# ---------------------------------------------------------------------------

TAGS = ["O", "B-LOC", "B-PER", "I-LOC", "I-PER", "X"]  # X: a label outside the scheme


def _breaks_iob2(tags, starts_sentence=True):
    """Whether a tag sequence (names) holds an I-X after anything but B-X / I-X (or,
    at a sentence's start, first)."""
    previous = "O" if starts_sentence else None
    for tag in tags:
        if tag.startswith("I-") and previous is not None and previous != "X" and (
                previous not in ("B-" + tag[2:], tag)):
            return True
        previous = tag
    return False


def test_iob2_constraints_forbid_what_iob2_never_holds():
    transitions, starts = heads.crf_constraints(TAGS, "iob2")
    forbidden = {(TAGS[i], TAGS[j]) for i, j in zip(*np.nonzero(transitions))}
    assert forbidden == {("O", "I-LOC"), ("B-PER", "I-LOC"), ("I-PER", "I-LOC"),
                         ("O", "I-PER"), ("B-LOC", "I-PER"), ("I-LOC", "I-PER")}
    assert set(transitions[transitions != 0]) == {heads.FORBIDDEN}
    assert [TAGS[j] for j in np.nonzero(starts)[0]] == ["I-LOC", "I-PER"]
    assert set(starts[starts != 0]) == {heads.FORBIDDEN}
    assert heads.crf_constraints(TAGS, "none") is None
    with pytest.raises(ValueError, match="--crf_tag_scheme must be one of iob2, none"):
        heads.crf_constraints(TAGS, "bioes")


def _window_inputs(seed, batch, length, scale):
    """Random logits [B, S, 6], learned transitions [6, 6] and label weights [B, S]
    (first-piece gaps, one window without words)."""
    rng = np.random.RandomState(seed)
    logits = (rng.randn(batch, length, len(TAGS)) * scale).astype(np.float32)
    transitions = (rng.randn(len(TAGS), len(TAGS)) * scale).astype(np.float32)
    weights = (rng.rand(batch, length) < 0.6).astype(np.float32)
    weights[-1] = 0.0
    return logits, transitions, weights


def test_constrained_chain_equals_enumerating_the_valid_sequences():
    logits, transitions, weights = _window_inputs(3, 4, 6, 1.0)
    weights[:, 4:] = 0.0  # at most 4 words: 6**4 sequences to enumerate
    weights[:3, 0] = 1.0
    starts = np.array([1, 0, 1, 1], np.int64)  # window 1: cut from a sentence's middle
    penalties = heads.crf_constraints(TAGS, "iob2")
    valid_gold = {0: ["B-PER", "I-PER", "O"], 1: ["I-LOC", "O", "B-LOC"], 2: ["X", "I-PER"]}
    label_ids = np.zeros(weights.shape, np.int32)
    for row, tags in valid_gold.items():
        weights[row] = 0.0
        weights[row, :len(tags)] = 1.0
        label_ids[row, :len(tags)] = [TAGS.index(t) for t in tags]
    nll, has_words = heads.crf_negative_log_likelihood(
        logits, transitions + penalties[0], label_ids, weights, penalties[1], starts)
    predicted = heads.crf_predictions(logits, transitions + penalties[0], weights,
                                      penalties[1], starts).numpy()
    assert has_words.numpy().tolist() == [1, 1, 1, 0]
    for row in range(3):
        positions = np.nonzero(weights[row])[0]
        x = logits[row, positions]
        scores = {seq: _score(x, transitions, seq) for seq in itertools.product(
            range(len(TAGS)), repeat=len(positions))
            if not _breaks_iob2([TAGS[t] for t in seq], bool(starts[row]))}
        log_norm = np.log(np.sum(np.exp(np.array(list(scores.values()), np.float64))))
        gold = tuple(label_ids[row, positions])
        np.testing.assert_allclose(nll[row], log_norm - scores[gold], rtol=1e-5, atol=1e-5)
        assert tuple(predicted[row, positions]) == max(scores, key=scores.get)


def test_decoded_tags_never_break_iob2_even_with_random_logits():
    logits, transitions, weights = _window_inputs(5, 64, 12, 10.0)
    order = np.argsort(-(weights > 0).astype(int), axis=1, kind="stable")

    def broken(penalties):
        """The windows whose decoded words break IOB2 (every window starts a sentence)."""
        extra = (transitions + penalties[0], penalties[1]) if penalties else (transitions,)
        predicted = heads.crf_predictions(logits, extra[0], weights, *extra[1:]).numpy()
        return [row for row in range(len(logits)) if _breaks_iob2(
            [TAGS[predicted[row, p]] for p in order[row, :int(weights[row].sum())]])]

    assert len(broken(None)) > 10  # unconstrained, random scores break IOB2 often
    assert broken(heads.crf_constraints(TAGS, "iob2")) == []


def test_an_empty_time_axis_and_nan_scores():
    empty = np.zeros([2, 0, 3], np.float32)
    transitions = np.ones([3, 3], np.float32)
    lengths = np.zeros([2], np.int32)
    tags, best = crf.crf_decode(empty, transitions, lengths)
    assert tags.shape == (2, 0) and list(best.numpy()) == [0.0, 0.0]
    log_likelihood, _ = crf.crf_log_likelihood(empty, np.zeros([2, 0], np.int32), lengths,
                                               transitions)
    assert list(log_likelihood.numpy()) == [0.0, 0.0]
    inputs = np.arange(12, dtype=np.float32).reshape(1, 4, 3)
    # -inf (a mask) is a score; NaN is refused, in the potentials or the transitions.
    masked = inputs.copy()
    masked[0, 1, 2] = -np.inf
    assert crf.crf_decode(masked, transitions, [4])[0].numpy().tolist() == [[2, 1, 2, 2]]
    for where in ("potentials", "transitions"):
        bad_inputs, bad_transitions = inputs.copy(), transitions.copy()
        (bad_inputs[0, 2] if where == "potentials" else bad_transitions[1])[0] = np.nan
        with pytest.raises(tf.errors.InvalidArgumentError, match="crf: the %s hold NaN" % where):
            crf.crf_decode(bad_inputs, bad_transitions, [4])
    with pytest.raises(tf.errors.InvalidArgumentError, match="the unary scores hold NaN"):
        crf.crf_log_norm(np.full([1, 2, 3], np.nan, np.float32), [2], transitions)
