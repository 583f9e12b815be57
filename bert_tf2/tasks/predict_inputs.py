"""The in-memory arguments of the runners' predict() / Predictor.predict(): one reading.

What a caller holds is a list (or tuple) of items, a pandas Series, a pandas DataFrame, a
numpy array or a generator; every runner takes each of these the same way and gives a
plain list of the items:

- a list, tuple or generator (listed once): its items, in order;
- a pandas Series or a numpy array: its values (an array's rows), as Python values (a
  numpy str or number as its str / int / float, an array cell or row as a list); a
  missing cell of a Series or a frame's column (None, NaN, pandas' NA) is one ValueError
  naming its row and index label; an array of texts has one dimension (not a (n, 1));
- a pandas DataFrame: read by its columns, never by iterating it (which yields the
  column names): the runner names the columns it reads (frame_columns), or takes its
  rows as dicts (frame_records).

Anything else is one ValueError naming the argument, what it is and what is expected:
None, a dict (a runner that takes one dict as one item says so itself), a set or
frozenset (it has no order: the answers could not be matched to the inputs), a number,
bytes, a numpy scalar. pandas is never imported here: a DataFrame and a Series are told
by their type's module.
"""
import collections.abc
import math

from bert_tf2.tasks import data_tables

# What every argument of items() may be, for the messages.
SHAPES = "a list (or tuple) of %s, a pandas Series or DataFrame, or a numpy array of %s"


def expected(what):
    """The end of a message: what an argument of `what` items ("str") may be."""
    return SHAPES % (what, what)


def _pandas_kind(value):
    """"DataFrame" / "Series" for a pandas object of those types (or a subclass of
    them), else None."""
    for base in type(value).__mro__:
        module = (getattr(base, "__module__", "") or "").split(".")[0]
        if module == "pandas" and base.__name__ in ("DataFrame", "Series"):
            return base.__name__
    return None


def is_frame(value):
    """Whether `value` is a pandas DataFrame."""
    return _pandas_kind(value) == "DataFrame"


def plain(value):
    """A cell as a Python value: a numpy scalar as its item, a numpy array (a cell of
    words, of endings) as a list of plain values; others as given."""
    if isinstance(value, (str, bytes)):
        return str(value) if isinstance(value, str) else value
    if getattr(value, "shape", None) == () and hasattr(value, "item"):
        return value.item()
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return [plain(v) for v in value]
    return value


# A dict's views, named as what they are (a dict_keys is a Set, yet ordered).
_DICT_VIEWS = {"dict_keys": "the keys of a dict (dict.keys())",
               "dict_values": "the values of a dict (dict.values())",
               "dict_items": "the items of a dict (dict.items())"}


def _kind_name(value):
    """How a message names the type of `value`: "a set", "a DataFrame", "None"."""
    if value is None:
        return "None"
    if type(value).__name__ in _DICT_VIEWS:
        return _DICT_VIEWS[type(value).__name__]
    if isinstance(value, float) and math.isnan(value):
        return "NaN (a missing value)"
    name = _pandas_kind(value) or type(value).__name__
    if type(value).__module__ == "numpy":
        name = ("numpy %s" % name if getattr(value, "shape", None) == () and not hasattr(
            value, "__len__") else "%d-dimensional numpy array" % value.ndim)
    return ("an %s" if name[0] in "aeiou" else "a %s") % name


def refuse(value, argument, what, why=""):
    """The ValueError of an argument `value` of another shape (`why`: a reason added)."""
    unordered = isinstance(value, (set, frozenset))
    return ValueError("%s is %s; expected %s%s" % (
        argument, _kind_name(value), expected(what),
        why or (" (a set has no order: the answers could not follow the inputs)"
                if unordered else "")))


def items(value, argument, what="str"):
    """The list of the items of predict()'s argument `argument` (module docstring).

    `what`: how a message names one item ("str", "sentence"). A DataFrame is refused
    here: the runner reads it by its columns first (frame_columns, frame_records).
    """
    kind = _pandas_kind(value)
    if kind == "DataFrame":
        raise ValueError("%s is a DataFrame; expected a list (or tuple) of %s, a pandas "
                         "Series (one column of a frame) or a numpy array of %s"
                         % (argument, what, what))
    if kind == "Series":
        return _present_cells(value, argument)
    if type(value).__module__ == "numpy" and hasattr(value, "ndim"):
        if value.ndim == 0:  # a rank-2 array: a list of rows (a sentence's words)
            raise refuse(value, argument, what)
        if value.ndim > 1 and what == "str":  # a frame's .values, a column kept 2-D
            raise ValueError("%s is a numpy array of shape %s; expected one text per item, a "
                             "1-dimensional array (one column of it: %s[:, 0])"
                             % (argument, tuple(value.shape), argument))
        return [plain(v) for v in value]
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, collections.abc.Iterator):  # a generator: listed once
        return [plain(v) for v in value]
    raise refuse(value, argument, what)


def frame_columns(frame, argument, choices):
    """The columns of the DataFrame `frame` that a runner reads, as lists of cells.

    `choices`: tuples of column names, tried in order; in each, the first name is
    required and the others (None: left out) are read when the frame has them (a
    pair's second text). The first tuple whose first column the frame holds is read,
    a tuple of as many lists (None for a column it lacks). A frame of one column
    matching none of them is that first column. Else one ValueError naming
    `argument`, the frame's columns and the names expected.
    """
    columns = [str(c) for c in frame.columns]
    if len(set(columns)) != len(columns):
        raise ValueError("%s is a DataFrame with a column name twice (%s); expected each "
                         "column once" % (argument, ", ".join(repr(c) for c in columns)))
    width = max(len(names) for names in choices)
    for names in choices:
        if names and names[0] in columns:
            found = [_cells(frame, name, argument) if name in columns else None
                     for name in names]
            return tuple(found + [None] * (width - len(found)))
    if len(columns) == 1:
        return tuple([_cells(frame, frame.columns[0], argument)] + [None] * (width - 1))
    wanted = ["the column %r%s" % (names[0], "".join(" (and %r)" % n for n in names[1:] if n))
              for names in choices if names]
    raise ValueError("%s is a DataFrame with the columns %s; expected %s, or a frame of one "
                     "column" % (argument, ", ".join(repr(c) for c in columns) or "(none)",
                                 ", or ".join(wanted)))


def _cells(frame, name, argument):
    """The cells of column `name` of `frame` (the DataFrame `argument`), as plain Python
    values (_present_cells)."""
    return _present_cells(frame[name], "%s column %r" % (argument, str(name)))


def _present_cells(series, where):
    """The cells of the pandas Series `series` as plain values; a missing one (None, NaN,
    pandas' NA: pandas may keep a None as NaN) is one ValueError naming `where`, its row
    (0-based position) and its index label, which can differ."""
    cells = [plain(v) for v in series.tolist()]
    for position, cell in enumerate(cells):
        if data_tables.is_missing(cell):
            raise ValueError("%s row %d (index %r) is a missing value (None, NaN or pandas' "
                             "NA: pandas keeps a None as NaN); give every row a value ('' for "
                             "an empty text)" % (where, position,
                                                 plain(series.index[position])))
    return cells


def frame_records(frame, argument):
    """The rows of the DataFrame `frame` as dicts {column: plain cell}, in order; a
    missing cell (pandas' NaN, as a frame of rows without that key holds) is None, as
    a JSON line without the key reads."""
    columns = [str(c) for c in frame.columns]
    if len(set(columns)) != len(columns):
        raise ValueError("%s is a DataFrame with a column name twice (%s); expected each "
                         "column once" % (argument, ", ".join(repr(c) for c in columns)))
    cells = {name: [_missing_as_none(plain(v)) for v in frame[original].tolist()]
             for name, original in zip(columns, frame.columns)}
    return [{name: cells[name][row] for name in columns} for row in range(len(frame))]


def text_pairs(first, second, names, columns):
    """(first, second) of a predict() of texts (and second texts: pairs, contexts) as
    lists, for data_tables.texts_of's checks of each text; a str stays a str (one text).

    `names`: the two arguments' names ("texts", "texts_b"); `columns`: frame_columns'
    choices, the columns of a DataFrame given as `first` (which reads both: `second`
    must then be None). `second` may be None; `first` may not.
    """
    if is_frame(first):
        if second is not None:
            raise ValueError("%s is given beside the DataFrame %s; give it as a column of "
                             "the frame" % (names[1], names[0]))
        return frame_columns(first, names[0], columns)[:2]
    if first is None:
        raise refuse(first, names[0], "str")
    found = []
    for value, argument in ((first, names[0]), (second, names[1])):
        found.append(value if value is None or isinstance(value, str)
                     else items(value, argument))
    return tuple(found)


def _missing_as_none(value):
    """None for a float NaN (a DataFrame's missing cell), else `value`."""
    return None if isinstance(value, float) and math.isnan(value) else value
