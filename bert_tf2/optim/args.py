"""Checks of the optimizers' arguments and the variable-name rules they share.

Errors are ValueErrors naming the argument; names are compared without their ":N" output
index and, under a distribution strategy, on the logical (not the per-replica) variable.
"""

import math
import numbers
import re

# Name patterns (searched with re.search) of variables that get no weight decay.
DEFAULT_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")

_OUTPUT_INDEX_SUFFIX = re.compile(r":\d+$")


def as_step_count(value, arg_name, minimum):
    """Returns ``value`` as a Python int, checking it is an integer >= minimum."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(
            f"{arg_name} must be an integer, got {value!r} "
            f"({type(value).__name__}).")
    if isinstance(value, numbers.Integral):
        as_int = int(value)
    else:
        as_float = float(value)
        if not math.isfinite(as_float) or as_float != int(as_float):
            raise ValueError(f"{arg_name} must be a whole number, got {value!r}.")
        as_int = int(as_float)
    if as_int < minimum:
        comparison = "positive" if minimum == 1 else f">= {minimum}"
        raise ValueError(f"{arg_name} must be {comparison}, got {value!r}.")
    return as_int


def as_float(value, arg_name, low=None, high=None, low_inclusive=True,
              high_inclusive=True):
    """Returns ``value`` as a Python float after range checks."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(
            f"{arg_name} must be a real number, got {value!r} "
            f"({type(value).__name__}).")
    as_float = float(value)
    if not math.isfinite(as_float):
        raise ValueError(f"{arg_name} must be finite, got {value!r}.")
    if low is not None and (as_float < low or (not low_inclusive and as_float == low)):
        bound = ">=" if low_inclusive else ">"
        raise ValueError(f"{arg_name} must be {bound} {low}, got {value!r}.")
    if high is not None and (as_float > high or
                             (not high_inclusive and as_float == high)):
        bound = "<=" if high_inclusive else "<"
        raise ValueError(f"{arg_name} must be {bound} {high}, got {value!r}.")
    return as_float


def as_pattern_list(patterns, arg_name):
    """Normalises a collection of regex strings into a list (None -> [])."""
    if patterns is None:
        return []
    if isinstance(patterns, (str, bytes)):
        raise ValueError(
            f"{arg_name} must be a list of regular expressions, not a single "
            f"string ({patterns!r}); wrap it in a list.")
    result = []
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise ValueError(
                f"{arg_name} entries must be strings, got {pattern!r}.")
        try:
            re.compile(pattern)
        except re.error as err:
            raise ValueError(
                f"{arg_name} entry {pattern!r} is not a valid regular "
                f"expression: {err}") from err
        result.append(pattern)
    return result


def strip_output_index(name):
    """'a/b/kernel:0' -> 'a/b/kernel' (names without a suffix are unchanged)."""
    return _OUTPUT_INDEX_SUFFIX.sub("", name)


def logical_variable(var):
    """For a per-replica component of a distributed variable, its container.

    Under MirroredStrategy the optimizer's per-variable hooks receive the
    component living on one device, whose name may carry a "/replica_N"
    suffix.  Name-based decisions are taken on the logical variable instead
    so that every replica decides the same way.
    """
    container_fn = getattr(var, "_distributed_container", None)
    if callable(container_fn):
        container = container_fn()
        if container is not None:
            return container
    try:
        # Plain resource variables of a replica carry the link on the handle.
        handle = getattr(var, "handle", None)
        container_fn = getattr(handle, "_distributed_container", None)
        container = container_fn() if callable(container_fn) else None
    except Exception:  # pylint: disable=broad-except
        container = None
    return var if container is None else container



def decays(param_name, weight_decay_rate, exclude_patterns):
    """Whether a variable of this name gets weight decay: a rate, and no pattern of
    exclude_patterns (regular expressions, re.search) matching the name."""
    if not weight_decay_rate:
        return False
    name = strip_output_index(param_name)
    return not any(re.search(pattern, name) for pattern in exclude_patterns or ())
