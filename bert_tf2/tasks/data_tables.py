"""Data from Python instead of files: `data_dir` as a dict of splits of tables.

A notebook caller of run_classifier (--task_name=csv, tsv or jsonl) may set the Settings
field data_dir to {"train": table, "dev": table, "test": table} (the splits the run needs)
instead of a folder, each table one of
- a pandas DataFrame (found by its to_dict / columns, pandas is never imported here);
- a list of dicts, one per row ({column: value});
- a dict of columns ({column: list of values}, every list as long).
The rows are read as a JSON-lines file's objects are (file_data): same columns, same
types of values, same examples. The command line stays a path.

Every error is one ValueError naming the setting, the split and the row, counted from 1
as a person counts them (the first row is row 1), e.g. "data_dir['train'] row 3 (from 1):
...", raised before the run writes anything. A missing cell (None, NaN, pandas' NA or
NaT) reads as JSON's null: no label, no text, no id; a DataFrame's column of ints that
pandas made floats to hold a missing cell gives its ints back; a DataFrame whose column
names repeat is refused (pandas would keep one of them).
"""
import collections.abc
import math

SETTING = "data_dir"
SPLITS = ("train", "dev", "test")
# What data_dir takes from Python besides a path (settings.Settings.PYTHON_VALUES).
PYTHON_VALUE = ("a dict of splits {'train', 'dev', 'test'} of tables (a pandas DataFrame, a "
                "list of dicts or a dict of columns)")


def is_tables(data_dir):
    """True when data_dir is a dict of splits (not a folder path)."""
    return isinstance(data_dir, collections.abc.Mapping)


def name(split, setting=SETTING):
    """How messages name one split's table: data_dir['train']."""
    return "%s[%r]" % (setting, split)


def describe(data_dir, setting=SETTING):
    """For log lines and messages: the folder, or "the tables data_dir['train'], ..."."""
    if is_tables(data_dir):
        return "the tables %s" % ", ".join(name(s, setting) for s in data_dir)
    return "--%s=%s" % (setting, data_dir)


def check_splits(data_dir, needed, setting=SETTING):
    """ValueError for a key that is not a split, or a split `needed` ({split: why}) absent.

    Also a data_dir that is neither a folder path nor a dict of splits.
    """
    if not is_tables(data_dir):
        if isinstance(data_dir, (str, bytes)) or hasattr(data_dir, "__fspath__"):
            return
        raise ValueError("%s is a %s; expected a folder path or (from Python) a dict of "
                         "splits {'train': table, 'dev': table, 'test': table}"
                         % (setting, type(data_dir).__name__))
    for key in data_dir:
        if key not in SPLITS:
            raise ValueError("%s: unknown split %r; the splits are %s"
                             % (setting, key, ", ".join(repr(s) for s in SPLITS)))
    for split, why in needed.items():
        if split not in data_dir:
            raise ValueError("%s has no %r table (%s needs it)" % (setting, split, why))


def row_name(where, index):
    """How messages name the row of 0-based `index`: "data_dir['train'] row 3 (from 1)"."""
    return "%s row %d (from 1)" % (where, index + 1)


def records(data_dir, split, setting=SETTING):
    """[(index, {column: value})] of the rows of data_dir[split] (index from 0), values as
    Python's own (a numpy scalar becomes its int / float / str; a missing cell None)."""
    table = data_dir[split]
    where = name(split, setting)
    if hasattr(table, "to_dict") and hasattr(table, "columns") and not isinstance(
            table, collections.abc.Mapping):  # a DataFrame: its columns, in order
        table = _frame_columns(table, where)
    if isinstance(table, collections.abc.Mapping):
        return list(enumerate(_column_rows(table, where)))
    if isinstance(table, (str, bytes)) or not isinstance(table, collections.abc.Sequence):
        raise ValueError("%s is a %s; expected a pandas DataFrame, a list of dicts (one per "
                         "row) or a dict of columns" % (where, type(table).__name__))
    rows = []
    for index, row in enumerate(table):
        if not isinstance(row, collections.abc.Mapping):
            raise ValueError("%s is a %s; expected a dict {column: value}"
                             % (row_name(where, index), type(row).__name__))
        rows.append((index, {key: native(value) for key, value in row.items()}))
    return rows


def _column_rows(columns, where):
    """The rows of a dict of columns (each a list / tuple / array, all as long)."""
    lengths = {}
    for column, values in columns.items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
            raise ValueError("%s column %r is a %s; a dict of columns holds one list of "
                             "values per column" % (where, column, type(values).__name__))
        lengths[column] = len(values)
    if len(set(lengths.values())) > 1:
        (first, size), = list(lengths.items())[:1]
        other = next(c for c, n in lengths.items() if n != size)
        raise ValueError("%s: column %r has %d values, column %r has %d (the columns of a "
                         "table are as long)" % (where, first, size, other, lengths[other]))
    names = list(columns)
    values = [list(columns[c]) for c in names]
    return [{c: native(v[i]) for c, v in zip(names, values)}
            for i in range(lengths[names[0]] if names else 0)]


def _frame_columns(frame, where):
    """{column: [values]} of a DataFrame; ValueError for a column name that repeats."""
    names = list(frame.columns)
    repeated = [c for c in dict.fromkeys(names) if names.count(c) > 1]
    if repeated:
        raise ValueError("%s: the column %r appears %d times (a table's column names are "
                         "distinct; pandas would read only the last)"
                         % (where, repeated[0], names.count(repeated[0])))
    columns = {}
    for column in names:
        values = [native(v) for v in frame[column].tolist()]
        if getattr(frame[column].dtype, "kind", None) == "f":
            values = _ints_if_made_floats(values)
        columns[column] = values
    return columns


def _ints_if_made_floats(values):
    """A float column holding a missing cell and only whole numbers besides: pandas'
    column of ints (it turns ints to floats to hold NaN), so ints again; others as given."""
    found = [v for v in values if v is not None]
    if len(found) == len(values) or not all(
            isinstance(v, float) and v.is_integer() for v in found):
        return values
    return [None if v is None else int(v) for v in values]


def is_missing(value):
    """True for a missing cell: None, a float NaN, pandas' NA or NaT (pandas not imported)."""
    if value is None or isinstance(value, float) and math.isnan(value):
        return True
    return type(value).__name__ in ("NAType", "NaTType")


def describe_value(value):
    """How a message names a value that is not a str: "None", "NaN (a missing value)",
    "pandas' NA (a missing value)", "an int (3)", "a list"."""
    if value is None:
        return "None"
    if is_missing(value):
        return "%s (a missing value)" % ("pandas' %s" % type(value).__name__[:-4]
                                          if type(value).__name__ in ("NAType", "NaTType")
                                          else "NaN")
    name = type(value).__name__
    shown = " (%r)" % (value,) if isinstance(value, (int, float, bytes)) else ""
    return "%s %s%s" % ("an" if name[0] in "aeiou" else "a", name, shown[:60])


def native(value):
    """A numpy scalar (a DataFrame's cell) as the Python value it holds, a missing cell
    (is_missing) as None; others as given."""
    if not isinstance(value, (str, bytes)) and getattr(value, "shape", None) == () and (
            hasattr(value, "item")):
        value = value.item()
    return None if is_missing(value) else value


def texts_of(texts, texts_b=None, names=("texts", "texts_b")):
    """(texts, texts_b or None) as lists for a predict() call: a str is one text; every
    item a str; texts_b as long as texts. ValueError naming the argument (`names`) else."""
    texts = [texts] if isinstance(texts, str) else texts
    texts_b = [texts_b] if isinstance(texts_b, str) else texts_b
    checked = []
    for argument, values in zip(names, (texts, texts_b)):
        if values is None:
            checked.append(None)
            continue
        if not isinstance(values, collections.abc.Iterable) or isinstance(
                values, (bytes, collections.abc.Mapping)):
            raise ValueError("%s is a %s; expected a str or a list of str"
                             % (argument, type(values).__name__))
        given = list(values)
        values = [native(v) for v in given]
        for index, value in enumerate(values):
            if not isinstance(value, str):
                raise ValueError("%s[%d] is %s, not a str" % (argument, index,
                                                              describe_value(given[index])))
        checked.append(values)
    texts, texts_b = checked
    if texts_b is not None and len(texts_b) != len(texts):
        raise ValueError("%s has %d texts, %s has %d: as many" % (
            names[1], len(texts_b), names[0], len(texts)))
    return texts, texts_b
