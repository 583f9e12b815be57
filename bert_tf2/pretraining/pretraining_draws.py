"""The random operations of create_pretraining_data's algorithm, exactly as random.Random.

The algorithm draws only three things: `random()`, `randint(a, b)` and
`shuffle(list)`, all from one generator, in the reference's order; its records
follow from the seed and that order. `Draws` takes them from a `random.Random`
as they are; `FastDraws` gives the same values and leaves the generator in the
same state, with less overhead per call (the pipeline makes millions of them).
"""
import functools
import random


class Draws(object):
    """The three random operations of the algorithm, taken from one `random.Random`."""

    def __init__(self, rng):
        self.rng = rng
        self.random = rng.random
        self.randint = rng.randint
        self.shuffle = rng.shuffle


class FastDraws(Draws):
    """Same draws, same results, same generator state as `Draws`, with less overhead.

    CPython's `randint` and `shuffle` reduce to `_randbelow`, which draws
    `n.bit_length()` bits with `getrandbits` until the value is below `n`.
    These versions do exactly that, without the argument checking of `randrange`
    around every call. `fast_draws_agree()` checks the equivalence on this
    interpreter before they are used.
    """

    def __init__(self, rng):
        super(FastDraws, self).__init__(rng)
        getrandbits = rng.getrandbits

        def randint(low, high):
            n = high - low + 1
            if n <= 0:
                raise ValueError("empty range for randint(%d, %d)" % (low, high))
            k = n.bit_length()
            r = getrandbits(k)
            while r >= n:
                r = getrandbits(k)
            return low + r

        def shuffle(items):
            # Fisher-Yates from the end, as random.shuffle; the bit count only
            # changes at powers of two, so it is fixed per block of positions.
            top = len(items) - 1
            while top >= 1:
                k = (top + 1).bit_length()
                bottom = max(1, (1 << (k - 1)) - 1)
                for i in range(top, bottom - 1, -1):
                    j = getrandbits(k)
                    if j > i:
                        j = getrandbits(k)
                        while j > i:
                            j = getrandbits(k)
                    items[i], items[j] = items[j], items[i]
                top = bottom - 1

        self.randint = randint
        self.shuffle = shuffle


@functools.lru_cache(maxsize=None)
def fast_draws_agree():
    """True when `FastDraws` reproduces `random.Random` on this interpreter."""
    ours, theirs = random.Random(2024), random.Random(2024)
    fast, slow = FastDraws(ours), Draws(theirs)
    same = True
    for size in (0, 1, 2, 3, 4, 5, 7, 8, 9, 64, 65, 127, 128, 129, 300, 1025):
        a, b = list(range(size)), list(range(size))
        fast.shuffle(a)
        slow.shuffle(b)
        same = same and a == b
        for low, high in ((0, size), (2, size + 2), (1, 1), (0, 30521), (0, 2 ** 40)):
            same = same and fast.randint(low, high) == slow.randint(low, high)
        same = same and fast.random() == slow.random()
    return same and ours.getstate() == theirs.getstate()


def draws_for(rng):
    """The draws of `rng`: FastDraws for a plain random.Random (a subclass may draw
    differently, so it gets Draws)."""
    exact_type = type(rng) is random.Random  # pylint: disable=unidiomatic-typecheck
    return FastDraws(rng) if exact_type and fast_draws_agree() else Draws(rng)
