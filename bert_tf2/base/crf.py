"""A linear-chain CRF with the API tf.contrib.crf had in TensorFlow 1.15.

A tag sequence y_0 .. y_{n-1} of a sequence with unary scores x [T, N] (N tags) and
transition scores A [N, N] scores

    s(y) = sum_t x[t, y_t] + sum_{t>=1} A[y_{t-1}, y_t]        (t < n, the length)

and has the probability exp(s(y)) / Z, log Z summed over every sequence by the forward
algorithm in log space; the best sequence comes from Viterbi with back-pointers. Both
run as one tf.scan / tf.foldl over time (graph mode, eager, tf.function, XLA), never a
Python loop over steps. Positions at or beyond a sequence's length add nothing; a
sequence of length 0 scores 0 and has log Z = 0, and crf_decode still tags its first
position (the argmax of its first unary scores), as TensorFlow 1.15 did. An empty time
axis (T = 0) gives [B, 0] tags, scores 0 and log Z 0. NaN scores (unary or transitions)
are an InvalidArgumentError: decoded, they would look like tags.

Shapes: B = batch size, T = the longest sequence (the time axis), N = number of tags.
bert_tf2.tf1's tf.contrib.crf is this module; run_ner --crf decodes with crf_decode.

Contracts with the other modules (bert_tf2/base/crf.py (linear-chain CRF; bert_tf2.tf1's
tf.contrib.crf)):
TF 1.15's tf.contrib.crf signatures and values: crf_sequence_score(inputs, tag_indices,
sequence_lengths, transition_params), crf_log_norm(inputs, sequence_lengths,
transition_params), crf_log_likelihood(inputs, tag_indices, sequence_lengths,
transition_params=None) -> (ll, params) (None: tf.compat.v1.get_variable("transitions", [N,
N]) in the caller's variable scope), crf_unary_score(tag_indices, sequence_lengths, inputs),
crf_binary_score(tag_indices, sequence_lengths, transition_params), crf_decode(potentials,
transition_params, sequence_length) -> (tags int32 [B,T], 0 beyond the length, best_score
[B]), viterbi_decode(score, params) (numpy) -> (list of tags, score). Length 0: scores and
log Z 0, crf_decode tags position 0 by its argmax. One tf.foldl / tf.scan over time (graph,
eager, tf.function, XLA); imports TensorFlow only. tests/test_crf.py checks every function
against enumerating every tag sequence.
"""
import numpy as np
import tensorflow as tf


def _lengths(sequence_lengths):
    """Sequence lengths as an int32 tensor [B]."""
    return tf.cast(sequence_lengths, tf.int32)


def _time_major(inputs):
    """[B, T, N] -> [T', B, N], and the time indexes 0 .. T'-1 beside it. An empty time
    axis (T = 0: every length 0) gets one step of zeros (T' = 1), which a length of 0
    never reads: the scans need a first step."""
    steps = tf.transpose(inputs, [1, 0, 2])
    missing = tf.maximum(1 - tf.shape(steps)[0], 0)
    steps = tf.pad(steps, [[0, missing], [0, 0], [0, 0]])
    return steps, tf.range(tf.shape(steps)[0])


def _no_nan(values, what):
    """`values`, checked: NaN scores are an InvalidArgumentError naming `what` (a NaN
    would decode to tags that look valid). -inf and +inf stay allowed (masks)."""
    if not values.dtype.is_floating:
        return values
    finite_or_nan = tf.where(tf.math.is_inf(values), tf.zeros_like(values), values)
    checked = tf.debugging.check_numerics(
        finite_or_nan, "bert_tf2 crf: %s hold NaN (the model's outputs diverged)" % what)
    return tf.where(tf.math.is_inf(values), values, checked)


def crf_unary_score(tag_indices, sequence_lengths, inputs):
    """The sum of the unary scores of the given tags within each sequence's length.

    Args:
      tag_indices: [B, T] int tags.
      sequence_lengths: [B] int lengths.
      inputs: [B, T, N] unary scores.

    Returns:
      [B] unary scores, in inputs' dtype.
    """
    inputs = tf.convert_to_tensor(inputs)
    tag_indices = tf.convert_to_tensor(tag_indices)
    picked = tf.gather(inputs, tag_indices, batch_dims=2)
    mask = tf.sequence_mask(_lengths(sequence_lengths), tf.shape(tag_indices)[1],
                            dtype=inputs.dtype)
    return tf.reduce_sum(picked * mask, axis=1)


def crf_binary_score(tag_indices, sequence_lengths, transition_params):
    """The sum of the transition scores between the given consecutive tags.

    Args:
      tag_indices: [B, T] int tags.
      sequence_lengths: [B] int lengths: transitions into positions >= length count 0.
      transition_params: [N, N]: the score of tag i followed by tag j at [i, j].

    Returns:
      [B] binary scores, in transition_params' dtype.
    """
    transition_params = tf.convert_to_tensor(transition_params)
    tag_indices = tf.convert_to_tensor(tag_indices)
    pairs = tf.stack([tag_indices[:, :-1], tag_indices[:, 1:]], axis=-1)
    scores = tf.gather_nd(transition_params, pairs)
    mask = tf.sequence_mask(_lengths(sequence_lengths), tf.shape(tag_indices)[1],
                            dtype=transition_params.dtype)
    return tf.reduce_sum(scores * mask[:, 1:], axis=1)


def crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params):
    """The unnormalized score s(y) of the given tag sequences.

    Args:
      inputs: [B, T, N] unary scores.
      tag_indices: [B, T] int tags.
      sequence_lengths: [B] int lengths.
      transition_params: [N, N] transition scores.

    Returns:
      [B] scores (0 for a sequence of length 0).
    """
    inputs = tf.convert_to_tensor(inputs)
    transition_params = tf.cast(transition_params, inputs.dtype)
    return (crf_unary_score(tag_indices, sequence_lengths, inputs) +
            crf_binary_score(tag_indices, sequence_lengths, transition_params))


def crf_log_norm(inputs, sequence_lengths, transition_params):
    """log Z: the log-sum-exp of the scores of every tag sequence (forward algorithm).

    Args:
      inputs: [B, T, N] unary scores.
      sequence_lengths: [B] int lengths.
      transition_params: [N, N] transition scores.

    Returns:
      [B] log partition values (0 for a sequence of length 0).
    """
    inputs = _no_nan(tf.convert_to_tensor(inputs), "the unary scores")
    transitions = _no_nan(tf.cast(transition_params, inputs.dtype), "the transitions")
    lengths = _lengths(sequence_lengths)
    steps, times = _time_major(inputs)

    def forward(alpha, step):
        # alpha [B, N]: log of the summed scores of every prefix ending in each tag.
        x, t = step
        extended = x + tf.reduce_logsumexp(alpha[:, :, tf.newaxis] + transitions, axis=1)
        # A sequence already ended keeps its alpha; the first step starts from x_0.
        kept = tf.where((t < lengths)[:, tf.newaxis], extended, alpha)
        return tf.where(tf.equal(t, 0), x, kept)

    alpha = tf.foldl(forward, (steps, times), initializer=tf.zeros_like(steps[0]))
    log_norm = tf.reduce_logsumexp(alpha, axis=1)
    return tf.where(lengths <= 0, tf.zeros_like(log_norm), log_norm)


def crf_log_likelihood(inputs, tag_indices, sequence_lengths, transition_params=None):
    """The log-likelihood of the given tag sequences under the CRF.

    Args:
      inputs: [B, T, N] unary scores.
      tag_indices: [B, T] int tags.
      sequence_lengths: [B] int lengths.
      transition_params: [N, N] transition scores; None makes the variable
        `transitions` [N, N] (float32) with tf.compat.v1.get_variable in the
        current variable scope (its default initializer), as TensorFlow 1.15 did.

    Returns:
      (log_likelihood [B], transition_params).
    """
    inputs = tf.convert_to_tensor(inputs)
    if transition_params is None:
        num_tags = tf.compat.dimension_value(inputs.shape[2])
        transition_params = tf.compat.v1.get_variable("transitions", [num_tags, num_tags])
    scores = crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params)
    log_norm = crf_log_norm(inputs, sequence_lengths, transition_params)
    return scores - log_norm, transition_params


def crf_decode(potentials, transition_params, sequence_length):
    """The highest-scoring tag sequence of each sequence (Viterbi) and its score.

    Args:
      potentials: [B, T, N] unary scores.
      transition_params: [N, N] transition scores.
      sequence_length: [B] int lengths.

    Returns:
      (decode_tags [B, T] int32, 0 beyond each length (a length-0 sequence's first
      tag is still its argmax), best_score [B] in potentials' dtype).
    """
    potentials = _no_nan(tf.convert_to_tensor(potentials), "the potentials")
    transitions = _no_nan(tf.cast(transition_params, potentials.dtype), "the transitions")
    lengths = _lengths(sequence_length)
    steps, times = _time_major(potentials)
    identity = tf.broadcast_to(tf.range(tf.shape(steps)[2]), tf.shape(steps[0]))

    def forward(state, step):
        # delta [B, N]: the best prefix score ending in each tag; back [B, N]: the
        # tag before it. Ended sequences (and step 0) point every tag to itself.
        delta, _ = state
        x, t = step
        candidates = delta[:, :, tf.newaxis] + transitions
        extended = x + tf.reduce_max(candidates, axis=1)
        back = tf.argmax(candidates, axis=1, output_type=tf.int32)
        going = (t < lengths)[:, tf.newaxis]
        delta = tf.where(tf.equal(t, 0), x, tf.where(going, extended, delta))
        back = tf.where(going & (t > 0), back, identity)
        return delta, back

    deltas, backs = tf.scan(forward, (steps, times),
                            initializer=(tf.zeros_like(steps[0]), identity))
    last = deltas[-1]
    best_tag = tf.argmax(last, axis=1, output_type=tf.int32)
    # Walks back from the best last tag: position t's tag is what position t + 1's
    # back-pointer names (the last position's "next" is the identity).
    pointers = tf.concat([backs[1:], identity[tf.newaxis]], axis=0)[::-1]
    walked = tf.scan(lambda tag, back: tf.gather(back, tag[:, tf.newaxis], batch_dims=1)[:, 0],
                     pointers, initializer=best_tag)
    # [:, :T]: the step an empty time axis was given is not a position.
    tags = tf.transpose(walked[::-1])[:, :tf.shape(potentials)[1]]
    tags = tags * tf.sequence_mask(tf.maximum(lengths, 1), tf.shape(tags)[1], dtype=tf.int32)
    return tags, tf.reduce_max(last, axis=1)


def viterbi_decode(score, transition_params):
    """The best tag sequence of one sequence, in numpy (outside a graph).

    Args:
      score: [T, N] unary scores (numpy array).
      transition_params: [N, N] transition scores.

    Returns:
      (viterbi: a list of T int tags, viterbi_score: its score, a numpy float).
    """
    score = np.asarray(score)
    transition_params = np.asarray(transition_params)
    best = score[0]
    pointers = []
    for x in score[1:]:
        candidates = best[:, np.newaxis] + transition_params
        pointers.append(np.argmax(candidates, axis=0))
        best = x + np.max(candidates, axis=0)
    tags = [int(np.argmax(best))]
    for back in reversed(pointers):
        tags.append(int(back[tags[-1]]))
    tags.reverse()
    return tags, np.max(best)
