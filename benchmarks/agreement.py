"""How close an int8 side's sentence vectors are to its own fp32 side's (bench_int8.py and
its peer, peer_serving.py): numpy only, so both venvs import it."""
import numpy as np

# What the rows say the figures are.
WHAT = "cosine with its own fp32 sentence vectors"


def cosine_range(reference, other):
    """[min, mean] over rows of the cosine between two [rows, H] arrays."""
    reference = np.asarray(reference, dtype=np.float64)
    other = np.asarray(other, dtype=np.float64)
    cosine = (reference * other).sum(axis=1) / (
        np.linalg.norm(reference, axis=1) * np.linalg.norm(other, axis=1))
    return [float(cosine.min()), float(cosine.mean())]
