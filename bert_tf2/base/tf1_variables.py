"""tf_keras layers in a TF1 graph, with the variables TF1 code expects.

Under tf.compat.v1 graph mode a tf_keras layer creates plain variables named by the
name scopes it opens; TF1 code finds variables through the variable store instead
(tf.compat.v1.get_variable: variable scopes, reuse, tf.train.init_from_checkpoint
with names). Inside tf1_variable_scope every variable a layer creates goes through
get_variable under the name TF1 code would have given it. modeling.py builds the
reference's graph-style API on this, from the same layers as the TF2 path.
"""
import contextlib
import threading

import tensorflow as tf

_STORE_BYPASS = threading.local()


def _store_variable(scope, base_name_scope, next_creator, kwargs):
    """Creates a Keras layer's variable through tf.compat.v1.get_variable.

    Its name is the variable scope's plus the name scopes opened since
    `base_name_scope` (the layers' own names), so it is the reference's name
    and lives in the TF1 variable store (init_from_checkpoint, reuse) whatever
    suffix the graph gave the name scope.
    """
    if getattr(_STORE_BYPASS, "active", False):
        return next_creator(**kwargs)
    current = tf.compat.v1.get_default_graph().get_name_scope()
    relative = current[len(base_name_scope):].lstrip("/")
    name = "/".join(part for part in (relative, kwargs["name"]) if part)
    initial_value = kwargs["initial_value"]

    def initializer(*unused_args, **unused_kwargs):
        return initial_value() if callable(initial_value) else initial_value

    _STORE_BYPASS.active = True
    try:
        with tf.compat.v1.name_scope(None), tf.compat.v1.variable_scope(scope,
                                                              auxiliary_name_scope=False):
            return tf.compat.v1.get_variable(
                name, shape=kwargs.get("shape"), dtype=kwargs.get("dtype"),
                initializer=initializer, trainable=kwargs.get("trainable", True),
                constraint=kwargs.get("constraint"))
    finally:
        _STORE_BYPASS.active = False


@contextlib.contextmanager
def tf1_variable_scope(scope=None, default_name=None):
    """tf.compat.v1.variable_scope(scope, default_name) in which tf_keras layers
    create their variables through get_variable, named as the reference names them.

    With neither argument: the current variable scope. Eagerly it is a plain
    name scope (eager TF has no variable store).
    """
    if tf.executing_eagerly():
        with tf.name_scope(scope or default_name or ""):
            yield None
        return
    if scope is None and default_name is None:
        scope = tf.compat.v1.get_variable_scope()
        opened = tf.compat.v1.variable_scope(scope, auxiliary_name_scope=False)
    else:
        opened = tf.compat.v1.variable_scope(scope, default_name=default_name)
    with opened as vscope:
        base = tf.compat.v1.get_default_graph().get_name_scope()

        def creator(next_creator, **kwargs):
            return _store_variable(vscope, base, next_creator, kwargs)

        with tf.compat.v1.variable_creator_scope(creator):
            yield vscope


def run_in_tf1_scope(layer, scope, default_name, x, *args, **kwargs):
    """layer's own variables and computation directly in tf1_variable_scope(scope,
    default_name): `scope/<variable>` (not `scope/<layer name>/<variable>`).
    Eagerly: the layer called as usual."""
    if tf.executing_eagerly():
        return layer(x, *args, **kwargs)
    x = tf.convert_to_tensor(x)
    with tf1_variable_scope(scope, default_name):
        if not layer.built:
            layer.build(x.shape)
        return layer.call(x, *args, **kwargs)
