"""Runner.predict's outputs put together: replicas joined, trimmed batches padded back to
one length, and length-sorted batches returned to the input's order."""
import collections

import numpy as np
import tensorflow as tf

from bert_tf2 import input_pipeline


def whole_input(dataset_fn):
    """dataset_fn as one input pipeline: every worker predicts over all of the data.

    A forward pass needs no collectives, so each worker's results are complete and
    in order.
    """
    def one_pipeline(input_context=None):
        if input_context is not None and input_context.num_input_pipelines > 1:
            input_context = tf.distribute.InputContext(
                num_input_pipelines=1, input_pipeline_id=0,
                num_replicas_in_sync=input_context.num_replicas_in_sync)
        return dataset_fn(input_context)
    return one_pipeline


def join_replicas(strategy, outputs, sequence_outputs=None):
    """One global batch of numpy arrays from per-replica outputs, in replica order."""
    joined = {}
    for name, value in outputs.items():
        parts = [np.asarray(t) for t in strategy.experimental_local_results(value)]
        if sequence_outputs and name in sequence_outputs:
            parts = [pad_sequence_axis(p, sequence_outputs[name], name) for p in parts]
        if len({p.shape[1:] for p in parts}) > 1:
            raise ValueError(
                "predict output %r has shapes %s on the replicas (batches trimmed to "
                "different lengths): name it in Runner.predict's sequence_outputs"
                % (name, [p.shape for p in parts]))
        joined[name] = np.concatenate(parts, axis=0)
    return joined


def pad_sequence_axis(array, length, name):
    """`array` [B, S', ...] zero-padded to [B, length, ...]."""
    if array.ndim < 2 or array.shape[1] > length:
        raise ValueError("sequence output %r of shape %s has no axis 1 of at most %d"
                         % (name, array.shape, length))
    return np.pad(array, [(0, 0), (0, length - array.shape[1])] + [(0, 0)] * (array.ndim - 2))


def in_input_order(batches):
    """Outputs of length-sorted batches (with EXAMPLE_INDEX) as the input order's batches."""
    order = InputOrder()
    for out in batches:
        yield from order.add(out)
    yield from order.finish()


class InputOrder:
    """Regroups the outputs of length-sorted batches into the batches of the input order.

    Batch k of the bucketed stream has as many rows as batch k of the same data read
    in order (the same number of per-replica batches of the same size, grouped across
    replicas alike), and that batch holds input positions start_k .. start_k + size_k - 1;
    positions past the last example are its padding rows. A batch is given out as
    soon as all of its examples have come.
    """

    def __init__(self):
        self.rows = {}                     # input position -> {output name: row}
        self.sizes = collections.deque()   # sizes of the batches not given out yet
        self.start = 0                     # input position of the next batch's first row
        self.zeros = None                  # {output name: zero row}: padding rows

    def add(self, out):
        """Takes one bucketed batch; returns the input-order batches now complete."""
        out = dict(out)
        index = out.pop(input_pipeline.EXAMPLE_INDEX)
        self.sizes.append(len(index))
        for row in np.flatnonzero(index >= 0):
            position = int(index[row])
            if position in self.rows or position < self.start:
                raise RuntimeError("example %d came twice from the bucketed input" % position)
            self.rows[position] = {name: value[row] for name, value in out.items()}
            if self.zeros is None:
                self.zeros = {name: np.zeros_like(v) for name, v in self.rows[position].items()}
        ready = []
        while self.sizes and all(p in self.rows
                                 for p in range(self.start, self.start + self.sizes[0])):
            ready.append(self._take(self.start + self.sizes[0]))
        return ready

    def finish(self):
        """The batches left once the data has ended, padding rows past the last example."""
        end = self.start + len(self.rows)
        if sorted(self.rows) != list(range(self.start, end)):
            raise RuntimeError("the bucketed input lost examples: positions %d..%d expected"
                               % (self.start, end - 1))
        ready = []
        while self.sizes:
            ready.append(self._take(end))
        return ready

    def _take(self, end):
        """The next batch; its positions from `end` on are padding rows."""
        size = self.sizes.popleft()
        rows = [self.rows.pop(p) if p < end else self.zeros
                for p in range(self.start, self.start + size)]
        self.start += size
        batch = {}
        for name in self.zeros:
            try:
                batch[name] = np.stack([r[name] for r in rows])
            except ValueError:
                raise ValueError(
                    "predict output %r has rows of different shapes (batches trimmed to "
                    "different lengths): name it in Runner.predict's sequence_outputs"
                    % name) from None
        return batch
