"""Rewrites of the ONNX graph tf2onnx makes of the ids-in function (onnx_export, --onnx).

tf2onnx spells each of BERT's LayerNorms as the reference's TensorFlow computes it: the
mean and variance over the last axis (ReduceMean, or GlobalAveragePool on a 3-D tensor),
rsqrt as Sqrt then Reciprocal, and x * s + (beta - mean * s) with s = gamma * rsqrt(var +
epsilon): eleven nodes, none of which ONNX Runtime fuses (its LayerNorm fusion looks for a
Div). fuse_layer_norms puts one LayerNormalization node (opset 17) in place of each such
subgraph, with the same input, gamma, beta and epsilon, so that ONNX Runtime runs its own
kernel (and fuses the residual Add before it). The values move by float32 rounding (the
same mean and variance, computed in another order): a tiny model's outputs by about 1e-7,
within the fp32 bound every door is held to (tests/test_parity_matrix*.py).

Only the exact pattern is replaced (every name checked, gamma and beta constant vectors,
epsilon a constant scalar); any other graph is left as it was.
"""


def fuse_layer_norms(graph):
    """Replaces every LayerNorm subgraph of `graph` (an onnx GraphProto, changed in place)
    by a LayerNormalization node; returns how many. Nodes no longer read are dropped."""
    from onnx import helper  # pylint: disable=import-outside-toplevel
    found = _Pattern(graph)
    fused = [match for match in (found.layer_norm(node) for node in graph.node
                                 if node.op_type == "Add") if match]
    replaced = {}
    for add, x, gamma, beta, epsilon in fused:
        replaced[id(add)] = helper.make_node(
            "LayerNormalization", [x, gamma, beta], list(add.output), axis=-1,
            epsilon=epsilon, name=add.name + "/LayerNormalization")
    nodes = [replaced.get(id(node), node) for node in graph.node]
    kept = _read_only(nodes, {output.name for output in graph.output})
    kept_ids = {id(node) for node in kept}
    dropped = {name for node in nodes if id(node) not in kept_ids for name in node.input}
    del graph.node[:]
    graph.node.extend(kept)
    # The constants only the dropped nodes read (the epsilons): ONNX Runtime would warn of
    # each at every load.
    unread = dropped - read_names(graph)
    initializers = [init for init in graph.initializer if init.name not in unread]
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    return len(fused)


def _read_only(nodes, outputs):
    """The nodes some node or graph output reads (in order), dropped until none is unread."""
    while True:
        read = {name for node in nodes for name in node.input} | outputs
        kept = [node for node in nodes if any(name in read for name in node.output)]
        if len(kept) == len(nodes):
            return kept
        nodes = kept


def read_names(graph):
    """The tensor names a graph's nodes (and its subgraphs': If, Loop) and outputs read."""
    read = {output.name for output in graph.output}
    for node in graph.node:
        read.update(node.input)
        for attribute in node.attribute:
            for sub in list(attribute.graphs) + ([attribute.g] if attribute.HasField("g") else []):
                read |= read_names(sub)
    return read


class _Pattern(object):
    """The graph's producers and constants, and the LayerNorm matcher over them."""

    def __init__(self, graph):
        from onnx import numpy_helper  # pylint: disable=import-outside-toplevel
        self.producer = {name: node for node in graph.node for name in node.output}
        self.constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}

    def made_by(self, name, op_type):
        node = self.producer.get(name)
        return node if node is not None and node.op_type == op_type else None

    def is_mean_of_last_axis(self, name):
        """Whether tensor `name` is a mean over the last axis, dimensions kept."""
        from onnx import helper  # pylint: disable=import-outside-toplevel
        node = self.producer.get(name)
        if node is None:
            return None
        if node.op_type == "GlobalAveragePool":  # [N, C, L] -> [N, C, 1]: over L
            return node
        if node.op_type != "ReduceMean" or len(node.input) != 1:
            return None
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        axes = list(attributes.get("axes", ()))
        if attributes.get("keepdims", 1) != 1 or len(axes) != 1 or axes[0] not in (-1, 1, 2):
            return None
        return node

    def vector(self, name):
        value = self.constants.get(name)
        return value if value is not None and value.ndim == 1 else None

    def layer_norm(self, add):
        """(add, x, gamma, beta, epsilon) when `add` ends a LayerNorm of x, else None."""
        for scaled, shifted in (tuple(add.input), tuple(add.input)[::-1]):
            match = self._layer_norm(add, scaled, shifted)
            if match:
                return match
        return None

    def _layer_norm(self, add, scaled, shifted):
        x_times_s = self.made_by(scaled, "Mul")
        beta_minus = self.made_by(shifted, "Sub")
        if x_times_s is None or beta_minus is None:
            return None
        beta, mean_times_s = beta_minus.input
        mean_times_s = self.made_by(mean_times_s, "Mul")
        if self.vector(beta) is None or mean_times_s is None:
            return None
        for s_name in x_times_s.input:
            x = _other(x_times_s, s_name)
            mean = _other(mean_times_s, s_name)
            s = self.made_by(s_name, "Mul")
            if s is None or mean is None or not self._is_mean_of(mean, x):
                continue
            for rsqrt in s.input:
                gamma = _other(s, rsqrt)
                epsilon = self._epsilon_of_rsqrt(rsqrt, x, mean)
                if epsilon is not None and self.vector(gamma) is not None:
                    return add, x, gamma, beta, epsilon
        return None

    def _is_mean_of(self, mean, x):
        node = self.is_mean_of_last_axis(mean)
        return node is not None and node.input[0] == x

    def _epsilon_of_rsqrt(self, name, x, mean):
        """epsilon when `name` is 1 / sqrt(mean((x - mean)^2) + epsilon), else None."""
        reciprocal = self.made_by(name, "Reciprocal")
        root = reciprocal and self.made_by(reciprocal.input[0], "Sqrt")
        plus = root and self.made_by(root.input[0], "Add")
        if plus is None:
            return None
        for variance, epsilon in (tuple(plus.input), tuple(plus.input)[::-1]):
            value = self.constants.get(epsilon)
            if value is None or value.size != 1:
                continue
            var_node = self.is_mean_of_last_axis(variance)
            square = var_node and self.made_by(var_node.input[0], "Mul")
            if square is None or square.input[0] != square.input[1]:
                continue
            centred = self.made_by(square.input[0], "Sub")
            if centred is not None and list(centred.input) == [x, mean]:
                return float(value.reshape(-1)[0])
        return None


def _other(node, name):
    """The other input of a two-input `node` one of whose inputs is `name`, else None."""
    first, second = node.input
    return second if first == name else first if second == name else None
