"""Plain settings for every face: a dataclass per script whose fields are its flags.

A face (run_classifier.py, export_saved_model.py, ...) keeps its absl flags for the
command line and builds its `Settings` class from the same definitions:

    Settings = settings.settings_class(define_flags, __name__)

so each field has the flag's name, default and help text, and the two never drift
apart. `main()` turns the parsed flags into one Settings (`Settings.of(FLAGS)`);
`run(settings)` takes it, and so does a Python caller with no flag parsing at all:

    import run_classifier
    result = run_classifier.run(run_classifier.Settings(task_name="mrpc", ...))

Below the face nothing sees the whole set: each part of the package gets the few
values it reads, either as plain arguments or as a `part(...)` holding just those
fields. A part remembers which fields were given (on the command line, or by
keyword in Python), so rules such as "a value in the model's folder fills a flag
the user left out" work the same for both.

Every field is checked when a settings object is made and when a field is assigned
(check_value, then the ranges of Settings.range_error: batch sizes >= 1, no nan, the
training settings' ranges with do_train; check_common checks the same of the command
line's flags): a wrong value is a ValueError naming the field and the value
(`max_seq_length='abc': expected an integer`), an unknown name a TypeError
(AttributeError on assignment) with a "did you mean" hint. Assigning a field counts as
giving it. Errors raised by a face's run() to a Python caller name fields as Python
does (`max_seq_length=64`), the command line as flags (`--max_seq_length=64`):
python_spelling() rewrites the one message.
"""
import dataclasses
import difflib
import inspect
import math
import numbers
import os
import re
import sys
import typing

from absl import flags
from absl import logging
import numpy as np

# absl's parsers by the Python type of the values they give.
_PARSER_TYPES = (
    (flags.BooleanParser, bool),
    (flags.IntegerParser, int),
    (flags.FloatParser, float),
    (flags.EnumParser, str),
    (flags.BaseListParser, list),
)


def _field_type(flag):
    """The annotation of `flag`'s field: the type of its values (Optional when None)."""
    for parser, kind in _PARSER_TYPES:
        if isinstance(flag.parser, parser):
            break
    else:
        kind = str
    if isinstance(flag, flags.MultiFlag):
        kind = list
    return typing.Optional[kind] if flag.default is None else kind


# Settings of ours that only training reads (the reference's own, such as
# --learning_rate, stay quiet without --do_train, as they were).
TRAINING_ONLY = ("group_by_length", "num_accumulation_steps", "gradient_checkpointing",
                 "deterministic_data", "optimizer_type", "fused_optimizer",
                 "existing_checkpoint", "keep_checkpoint_max", "keep_best_only")

# The string flags whose value is a comma-separated list ("a,b"): a list or tuple given
# for one from Python is joined with commas (tests/test_settings_types.py keeps this set
# equal to the string flags whose help text says "comma").
COMMA_FIELDS = frozenset({"input_file", "output_file", "word_boundary_file", "layers",
                          "litert", "openvino", "onnx", "litert_columns", "class_weights"})

# Path fields (every *_file, *_dir, *_checkpoint and export_base: files and folders read
# or written). From Python a leading "~" of theirs is the user's home (os.path.expanduser,
# as a shell does); on the command line it is left as written, as the reference left it
# (tf.io.gfile makes a folder named "~"), with a warning: a shell does not expand the "~"
# of --output_dir=~/x.
_PATH_SUFFIXES = ("_file", "_dir", "_checkpoint")
_PATH_NAMES = frozenset({"export_base"})
_WARNED_HOME = set()


def is_path_field(name):
    """Whether field `name` holds a path (or comma-separated paths: COMMA_FIELDS)."""
    return name.endswith(_PATH_SUFFIXES) or name in _PATH_NAMES


def expand_home(name, value):
    """A Python caller's `value` of field `name` with a leading "~" of a path field (of
    each item of a comma-separated one) expanded to the user's home; other values as given."""
    if not is_path_field(name):
        return value
    if isinstance(value, (list, tuple)) and name in COMMA_FIELDS:
        return type(value)(expand_home(name, item) for item in value)
    path = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(path, str) or "~" not in path:
        return value
    items = path.split(",") if name in COMMA_FIELDS else [path]
    if not any(item.startswith("~") for item in items):
        return value
    return ",".join(os.path.expanduser(item) for item in items)


def _warn_literal_home(settings):
    """Warns once per value of a path field that still starts with "~" (a command line's:
    the shell left it), used as written."""
    for name in sorted(settings._DEFAULTS):
        value = getattr(settings, name)
        if is_path_field(name) and isinstance(value, str) and value.startswith("~") and \
                (name, value) not in _WARNED_HOME:
            _WARNED_HOME.add((name, value))
            logging.warning("--%s=%s starts with ~, which the shell did not expand (it does not "
                            "after --%s=): used as written, a folder named ~ in the current "
                            "directory, as the reference did; write --%s ~/... or $HOME/... "
                            "for your home", name, value, name, name)


# The ranges of the training settings, checked when do_train is set (without it the
# reference never reads them, whatever their value): {field: (test, what it must be)}.
# The reference's Estimator refuses a plan of no steps (epochs <= 0) and int() of an
# infinite epoch count; a learning rate of 0 it trains with (the weights stay), so it is
# taken; a warmup over 1 it takes too (warned by check_common: the rate never peaks).
TRAINING_RANGES = {
    "num_train_epochs": (lambda value: value > 0, "> 0"),
    "learning_rate": (lambda value: value >= 0, ">= 0"),
    "warmup_proportion": (lambda value: value >= 0, ">= 0"),
    "num_accumulation_steps": (lambda value: value >= 1, ">= 1"),
    "keep_checkpoint_max": (lambda value: value >= 0, ">= 0 (0: keep every checkpoint)"),
}
# Float training settings that must be finite (with do_train, as above).
FINITE_TRAINING = ("num_train_epochs", "learning_rate", "warmup_proportion")


def _is_batch_size(name):
    """Whether field `name` is a batch size (batch_size, *_batch_size)."""
    return name == "batch_size" or name.endswith("_batch_size")


def check_value(name, parser, default, value):
    """`value` for the field `name` whose flag has `parser` and `default`, converted as
    the flag would take it; a ValueError naming the field and the value if it does not fit.

    - None only where the flag's default is None;
    - a str is read as the flag's text on a command line or in a flag file would be
      ("3e-5" -> 3e-05, "false" -> False, "32" -> 32): one rule for every kind;
    - bool fields: True or False (numpy's np.bool_ too; an int, 0 or 1 included, is
      refused);
    - integer fields: an int, or a float with no fraction (32.0 -> 32), numpy's too
      (np.int64(3), np.float32(64.0)); never a bool;
    - float fields: an int or a float (never a bool), numpy's too, as a float; an int too
      large for a float (10**400) is refused naming the field;
    - enum fields: one of the choices;
    - string fields: a str, or an os.PathLike (as its str); the COMMA_FIELDS also a
      list or tuple (of str, paths or numbers; joined with commas).
    Bounds a flag declares are checked by its parser; the ranges that depend on other
    fields (Settings.range_error) once the whole object is set.
    """
    if value is None:
        if default is None:
            return None
        raise ValueError("%s=None: expected %s (None only where the default is None)"
                         % (name, _expected(name, parser)))
    try:
        if isinstance(value, str):
            return parser.parse(value)
        if isinstance(parser, flags.BooleanParser):
            if isinstance(value, (bool, np.bool_)):
                return bool(value)
        elif isinstance(parser, flags.IntegerParser):
            if _is_number(value) and not isinstance(value, numbers.Integral) and \
                    float(value).is_integer():
                value = int(value)  # 32.0, np.float32(64.0)
            if isinstance(value, numbers.Integral) and _is_number(value):
                return parser.parse(int(value))
        elif isinstance(parser, flags.FloatParser):
            if _is_number(value):
                return parser.parse(float(value))
        elif isinstance(parser, flags.EnumParser):
            pass  # only a str (above) is one of the choices
        elif isinstance(value, os.PathLike):
            path = os.fspath(value)
            if isinstance(path, str):
                return parser.parse(path)
        elif name in COMMA_FIELDS and isinstance(value, (list, tuple)):
            return parser.parse(_joined(value))
    except OverflowError:  # an int too large for a float: 10**400
        raise ValueError("%s=%s: too large for a number (a float's largest is %.4g)"
                         % (name, _shown(value), sys.float_info.max)) from None
    except (ValueError, TypeError) as error:
        raise ValueError("%s=%s: %s" % (name, _shown(value), _reason(name, parser, error))) \
            from None
    raise ValueError("%s=%s: expected %s" % (name, _shown(value), _expected(name, parser)))


def _is_number(value):
    """A real number that is not a bool (numpy's numbers included, np.bool_ not)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _shown(value):
    """repr(value) for a message, a number of hundreds of digits cut to its length."""
    text = repr(value)
    if isinstance(value, numbers.Integral) and len(text) > 40:
        return "%s... (%d digits)" % (text[:12], len(text.lstrip("-")))
    return text


def _joined(items):
    """The comma-separated text of the list `items` of a COMMA_FIELDS field."""
    texts = []
    for item in items:
        if isinstance(item, os.PathLike):
            item = os.fspath(item)
        if isinstance(item, numbers.Real) and not isinstance(item, bool):
            item = str(item)
        if not isinstance(item, str):
            raise ValueError("item %r is not a string, path or number" % (item,))
        if "," in item:
            raise ValueError("item %r holds a comma, the separator" % item)
        texts.append(item)
    return ",".join(texts)


def _expected(name, parser):
    """What field `name` takes, for an error message."""
    if isinstance(parser, flags.BooleanParser):
        return "True or False"
    if isinstance(parser, flags.IntegerParser):
        return "an integer"
    if isinstance(parser, flags.FloatParser):
        return "a number"
    if isinstance(parser, flags.EnumParser):
        return "one of %s" % ", ".join(parser.enum_values)
    if name in COMMA_FIELDS:
        return "a string (comma-separated) or a list of strings"
    return "a string or a path"


def _reason(name, parser, error):
    """The end of the message for a value the flag's parser refused (`error`)."""
    if isinstance(parser, (flags.IntegerParser, flags.FloatParser)) and " is not " in str(error):
        return str(error).split(" is not ", 1)[1].join(("expected ", ""))  # out of bounds
    if isinstance(error, ValueError) and str(error).startswith("item "):
        return str(error)
    return "expected %s" % _expected(name, parser)


def did_you_mean(name, names):
    """' (did you mean x?)' for the closest of `names` to the unknown `name`, else ''."""
    close = difflib.get_close_matches(name, list(names), n=1)
    return " (did you mean %s?)" % close[0] if close else ""


def python_spelling(message, settings):
    """`message` with the command-line spelling of `settings`' fields rewritten as Python's:
    `--name=value` -> `name=value`, `--name` -> `name=True` for a bool field (`name`
    for another), `--noname` -> `name=False`. Other `--` names stay."""
    def respell(match):
        word = match.group(1)
        if word in settings:
            if match.group(2) or not isinstance(settings.parser(word), flags.BooleanParser):
                return word + match.group(2)
            return word + "=True"
        if word.startswith("no") and word[2:] in settings and not match.group(2) \
                and isinstance(settings.parser(word[2:]), flags.BooleanParser):
            return word[2:] + "=False"
        return match.group(0)
    return _FLAG_SPELLING.sub(respell, message)


# A flag as an error message spells it: --name, --noname, --name=...
_FLAG_SPELLING = re.compile(r"(?<![\w-])--([A-Za-z_]\w*)(=?)")


def respell_error(error, settings):
    """Rewrites, in place, the message of `error` (its first argument, when a str) with
    python_spelling(): type, traceback and chain stay."""
    if error.args and isinstance(error.args[0], str):
        error.args = (python_spelling(error.args[0], settings),) + error.args[1:]


class Settings:
    """What every settings class (a face's, or a part of one) can tell besides its values."""

    # Filled by settings_class: {field name: default}, {field name: help text},
    # {field name: its flag's absl parser}; _CHECKED: values are checked (check_value).
    _DEFAULTS = {}
    _HELP = {}
    _PARSERS = {}
    _CHECKED = True
    # {field name: what else it takes from Python}: fields a Python caller may set to a
    # value no flag can hold (run_classifier's data_dir: a dict of tables). Set by the
    # face on its own class; check_value lets a dict through for these (the face's
    # reader checks its contents, naming the field).
    PYTHON_VALUES = {}

    @classmethod
    def of(cls, source):
        """`source` as this class: a Settings of it, or parsed absl FlagValues.

        A face's run() starts with it, so a Python caller's settings pass the checks
        that the command line's flags pass when they are parsed (check_common).
        """
        if isinstance(source, cls):
            source.check_common()
            return source.fill({})  # a copy: the run's changes never reach the caller's
        if isinstance(source, flags.FlagValues):
            return cls.from_flags(source)  # run_cli / parse_flags checked them
        raise TypeError("expected %s.%s or absl FlagValues, got %r"
                        % (cls.__module__, cls.__name__, type(source).__name__))

    @classmethod
    def from_flags(cls, fv):
        """The settings of parsed flags: every field's value, given = present on the line."""
        names = [f.name for f in dataclasses.fields(cls)]
        values = {name: fv[name].value for name in names if name in fv}
        return cls._make(values, {name for name in values if fv[name].present})

    @classmethod
    def _make(cls, values, given):
        """An instance of `values` (checked; the fields absent take their defaults) whose
        user-given fields are `given`."""
        obj = cls.__new__(cls)
        obj._set_all(values, given)
        return obj

    def _set_all(self, values, given):
        """Sets every field: `values`' (checked), the others' defaults; given = `given`."""
        for f in dataclasses.fields(self):
            if f.name in values:
                value = self._checked(f.name, values[f.name])
            elif f.default_factory is not dataclasses.MISSING:
                value = f.default_factory()
            else:
                value = f.default
            object.__setattr__(self, f.name, value)
        object.__setattr__(self, "_given", frozenset(given))
        self._check_ranges()

    def _check_ranges(self):
        """A checked class's range_error(), raised as a ValueError naming the field as
        Python does (num_train_epochs=inf ...)."""
        if not self._CHECKED:
            return
        error = self.range_error()
        if error:
            raise ValueError(python_spelling(error, self))

    @classmethod
    def _checked(cls, name, value):
        """check_value() of field `name` (as is in a class whose values are not checked)."""
        if not cls._CHECKED or (name in cls.PYTHON_VALUES and isinstance(value, dict)):
            return value
        try:
            return check_value(name, cls._PARSERS[name], cls._DEFAULTS[name], value)
        except ValueError as error:
            if name not in cls.PYTHON_VALUES:
                raise
            raise ValueError("%s, or (from Python) %s" % (error, cls.PYTHON_VALUES[name])) from None

    @classmethod
    def _unknown(cls, names):
        """The message for the field names `names` this class does not have."""
        return "%s has no field %s" % (cls.__name__, ", ".join(
            "%s%s" % (name, did_you_mean(name, cls._DEFAULTS)) for name in sorted(names)))

    def __setattr__(self, name, value):
        """Assigning a field checks the value (check_value) and counts as giving it (a
        path's leading ~ expanded: expand_home)."""
        if name not in self._DEFAULTS:
            raise AttributeError(self._unknown([name]))
        before, given = getattr(self, name), self._given
        object.__setattr__(self, name, self._checked(name, expand_home(name, value)))
        object.__setattr__(self, "_given", self._given | {name})
        try:
            self._check_ranges()
        except ValueError:  # the object keeps its valid values
            object.__setattr__(self, name, before)
            object.__setattr__(self, "_given", given)
            raise

    def __delattr__(self, name):
        raise AttributeError("%s's fields cannot be deleted: %s" % (type(self).__name__, name))

    def __getattr__(self, name):
        # Only called for a name the object lacks: say which field was meant.
        if name.startswith("__") or name == "_given":
            raise AttributeError(name)
        raise AttributeError(self._unknown([name]))

    def parser(self, name):
        """The absl parser of field `name`'s flag (None where unknown)."""
        return self._PARSERS.get(name)

    def given(self, name):
        """Whether `name` was set by the user (on the command line, or by keyword)."""
        return name in self._given

    def default(self, name):
        """The default of field `name` (its flag's default)."""
        return self._DEFAULTS[name]

    def help(self, name):
        """The help text of field `name` (its flag's)."""
        return self._HELP.get(name, "")

    def flag(self, name, value=None):
        """How `name` reads on a command line with its value (or `value`): --x=1, --y, --noy."""
        value = getattr(self, name) if value is None else value
        if isinstance(value, bool):
            return "--%s%s" % ("" if value else "no", name)
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        return "--%s=%s" % (name, value)

    def __contains__(self, name):
        return name in self._DEFAULTS

    def replace(self, **values):
        """A copy with `values` set, counted as given by the user (as keyword arguments of
        the constructor are; a path's leading ~ expanded: expand_home); `fill` sets values
        that stay "not given". dataclasses.replace(settings, ...) does the same."""
        return self.fill({name: expand_home(name, value) for name, value in values.items()},
                         given=True)

    def with_defaults(self, values):
        """A copy in which the fields the user did not give take `values`' entries
        (settings a model's folder saved, say); fields absent here are ignored."""
        return self.fill({name: value for name, value in values.items()
                          if name in self and not self.given(name)})

    def fill(self, values, given=False):
        """A copy with `values` set; with given=False they stay "not given" (defaults that
        a model's folder supplied, say), with given=True they count as the user's."""
        unknown = set(values) - set(self._DEFAULTS)
        if unknown:
            raise TypeError(self._unknown(unknown))
        current = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        current.update(values)
        return self._make(current, self._given | set(values) if given else self._given)

    def part(self, *names):
        """A settings object with just the fields `names` (those this class has), their
        values, defaults and whether each was given: what one part of the package reads."""
        names = tuple(dict.fromkeys(name for name in names if name in self._DEFAULTS))
        cls = _part_class(type(self), names)
        return cls._make({name: getattr(self, name) for name in names},
                         {name for name in names if self.given(name)})

    def values(self):
        """{field: value} of every field."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def check_common(self):
        """Rules for every face's settings: the ranges of range_error() (batch sizes
        >= 1, no nan, the training settings' ranges with do_train); a warmup over 1
        with do_train warned; the training-only settings given without do_train warned."""
        error = self.range_error()
        if error:
            raise ValueError(error)
        if "do_train" in self and self.do_train and "warmup_proportion" in self and (
                self.warmup_proportion > 1):
            logging.warning("%s is over 1: the learning rate rises over every step and never "
                            "reaches --learning_rate (as in the reference)",
                            self.flag("warmup_proportion"))
        _warn_literal_home(self)
        if "do_train" in self and not self.do_train:
            self.refuse_unused([(name, "without --do_train") for name in TRAINING_ONLY
                                if name in self], warn_only=True)

    def range_error(self):
        """The message (flags spelt as on a command line) of the first field out of its
        range, else None: a batch size (batch_size, *_batch_size) < 1 (the reference's
        TPUEstimator refuses one too); a number field that is nan; with do_train, a
        TRAINING_RANGES field out of its range or a FINITE_TRAINING one infinite (without
        do_train these are not read: any value, nan too, is left alone).
        Checked when a checked Settings is made or assigned, and by check_common (the
        command line's flags, run())."""
        training = "do_train" in self and self.do_train
        for name in sorted(self._DEFAULTS):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or (
                    name in TRAINING_RANGES and not training):
                continue
            if math.isnan(value):
                return "%s is not a number" % self.flag(name)
            if _is_batch_size(name) and value < 1:
                return "%s must be >= 1" % self.flag(name)
            if name not in TRAINING_RANGES:
                continue
            if name in FINITE_TRAINING and math.isinf(value):
                return "%s must be a finite number %s" % (self.flag(name),
                                                           TRAINING_RANGES[name][1])
            test, bound = TRAINING_RANGES[name]
            if not test(value):
                return "%s must be %s" % (self.flag(name), bound)
        return None

    def require(self, *names):
        """ValueError naming the first of the fields `names` left unset or empty."""
        for name in names:
            if not getattr(self, name):
                raise ValueError("--%s is required" % name)

    def refuse_unused(self, unused, warn_only=False):
        """A setting that cannot apply is refused, never dropped.

        `unused`: (name, why) pairs of the fields the other settings leave without
        effect, `why` saying so ("without --pooling: ..."). The first of them given
        with a value other than its default is a ValueError naming it; with warn_only
        (the reference's own flags, which it accepted) a warning instead.
        """
        for name, why in unused:
            if name in self and self.given(name) and getattr(self, name) != self.default(name):
                message = "%s has no effect %s" % (self.flag(name), why)
                if not warn_only:
                    raise ValueError(message)
                logging.warning(message)

    def refuse_other_modes(self, name, only):
        """refuse_unused for a face with modes: `only` maps each value of the field `name`
        (a converter's --direction, say) to the fields that mode alone reads; those of the
        modes not chosen are refused "with --name=value"."""
        chosen = getattr(self, name)
        self.refuse_unused([(field, "with %s" % self.flag(name))
                            for mode, fields in only.items() if mode != chosen
                            for field in fields])


_PARTS = {}

# dataclasses.replace(settings, **changes) makes the copy with cls(**every field), which
# would count every field as given. Each class has this init-only pseudo-field first
# (dataclasses.fields() leaves it out); replace() fills it, after the changes, with what
# the instance's attribute of that name returns, the instance itself: so __init__ knows
# the original and the changes (the keywords before it), and keeps given = the
# original's given + the changed fields, as Settings.replace does.
_ORIGIN = "_replaced_from"


def _dataclass(name, fields, defaults, texts, parsers, checked=True, base=Settings):
    """A settings dataclass with `fields` ((name, type, dataclasses.field) triples)."""
    origin = (_ORIGIN, dataclasses.InitVar[typing.Any],
              dataclasses.field(default=None, kw_only=True))
    cls = dataclasses.make_dataclass(name, [origin] + list(fields), bases=(base,))
    cls._DEFAULTS = defaults
    cls._HELP = texts
    cls._PARSERS = parsers
    cls._CHECKED = checked
    setattr(cls, _ORIGIN, property(lambda self: self))
    _install_init(cls)
    return cls


def _part_class(owner, names):
    key = (owner, names)
    if key not in _PARTS:
        fields = [(name, typing.Any, _field_spec(owner._DEFAULTS[name])) for name in names]
        _PARTS[key] = _dataclass(
            owner.__name__ + "Part", fields, {name: owner._DEFAULTS[name] for name in names},
            {name: owner._HELP.get(name, "") for name in names},
            {name: owner._PARSERS[name] for name in names}, owner._CHECKED)
        _PARTS[key].PYTHON_VALUES = {name: what for name, what in owner.PYTHON_VALUES.items()
                                     if name in names}
    return _PARTS[key]


def _field_spec(default):
    """A dataclass field with `default`; a list default is copied for each instance."""
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda value=default: type(value)(value))
    return dataclasses.field(default=default)


def _install_init(cls):
    """The constructor: keyword (and positional) arguments are checked and count as given,
    whatever their value; dataclasses.replace keeps the original's given (see _ORIGIN)."""
    names = [f.name for f in dataclasses.fields(cls)]
    signature = inspect.signature(cls.__init__)  # the dataclass's: one keyword per field
    signature = signature.replace(parameters=[
        p for p in signature.parameters.values() if p.name != _ORIGIN])

    def __init__(self, *args, **kwargs):
        if len(args) > len(names):
            raise TypeError("%s takes at most %d positional arguments (%d given)"
                            % (cls.__name__, len(names), len(args)))
        keys = list(kwargs)
        origin = kwargs.pop(_ORIGIN, None)
        values = dict(zip(names, args))
        twice = sorted(set(values) & set(kwargs))
        if twice:
            raise TypeError("%s got several values for %s" % (cls.__name__, ", ".join(twice)))
        unknown = set(kwargs) - set(names)
        if unknown:
            raise TypeError(cls._unknown(unknown))
        values.update(kwargs)
        given = set(values)
        changed = given
        if isinstance(origin, Settings):  # dataclasses.replace(origin, **changes)
            changed = set(keys[:keys.index(_ORIGIN)])
            given = origin._given | changed
        self._set_all({name: expand_home(name, value) if name in changed else value
                       for name, value in values.items()}, given)

    __init__.__signature__ = signature
    cls.__init__ = __init__


def settings_class(define_flags, module, name="Settings", doc=None):
    """A dataclass whose fields are the flags `define_flags(fv)` registers.

    Same names and defaults as the flags (a list default is copied for each
    instance); the class docstring lists every field with its help text; values are
    checked by the flags' parsers (check_value).

    Args:
      define_flags: the face's function that registers its flags on a FlagValues.
      module: the face's module name (`__name__`), for the class's repr and pickling.
      name: the class name.
      doc: the class docstring's first paragraph.
    """
    fv = flags.FlagValues()
    define_flags(fv)
    names = [key for key in fv if fv[key].name == key]  # short names are aliases
    fields, defaults, texts, parsers = [], {}, {}, {}
    for key in names:
        flag = fv[key]
        default = flag.default
        defaults[key] = default
        texts[key] = flag.help or ""
        parsers[key] = flag.parser
        fields.append((key, _field_type(flag), _field_spec(default)))
    cls = _dataclass(name, fields, defaults, texts, parsers)
    cls.__module__ = module
    lines = [doc or "The settings of %s: one field per flag, same name and default." % module,
             "", "Fields:"]
    lines += ["  %s = %r: %s" % (key, defaults[key], texts[key]) for key in names]
    cls.__doc__ = "\n".join(lines)
    return cls


def of_flag_values(fv):
    """Settings of every flag registered on the parsed FlagValues `fv` (for checks run
    where only the flags are at hand: the command line's parsing)."""
    return _flag_values_class(fv).from_flags(fv)


def _flag_values_class(fv):
    names = tuple(key for key in fv if fv[key].name == key)
    key = ("flag values",) + tuple((name, repr(fv[name].default)) for name in names)
    if key not in _PARTS:
        fields = [(name, typing.Any, _field_spec(fv[name].default)) for name in names]
        # Not checked again: absl parsed them (and absl's own flags hold other kinds).
        _PARTS[key] = _dataclass("FlagSettings", fields,
                                 {name: fv[name].default for name in names},
                                 {name: fv[name].help or "" for name in names},
                                 {name: fv[name].parser for name in names}, checked=False)
    return _PARTS[key]


@dataclasses.dataclass
class Result:
    """What a run wrote: returned by every face's `run(settings)`.

    output_dir: the folder written (None for a face that writes files, not a folder).
    metrics: the evaluation's values ({} when nothing was evaluated), as in
      eval_results.txt (global_step included), as Python floats and ints.
    outputs: {what: path} of every result file written (predictions, records, ...).
    best_checkpoint: the best/ checkpoint of evaluation during training, if kept.
    global_step: the model's step after the run (None when no model was run).
    steps_trained: the optimizer steps this call trained (0 when the folder was already
      at its last step, or the run did not train).
    eval_history: the evaluations during training (--eval_every_n_steps), oldest first:
      [{"global_step": N, metric: value, ...}]; [] without.
    best_metric: {"metric", "value", "global_step"} of best/ (--best_metric), else None.

    Every value is a plain Python one (no numpy): `to_dict()` gives what json.dumps takes.
    """
    output_dir: typing.Optional[str] = None
    metrics: dict = dataclasses.field(default_factory=dict)
    outputs: dict = dataclasses.field(default_factory=dict)
    best_checkpoint: typing.Optional[str] = None
    global_step: typing.Optional[int] = None
    steps_trained: int = 0
    eval_history: list = dataclasses.field(default_factory=list)
    best_metric: typing.Optional[dict] = None

    def __setattr__(self, name, value):
        # numpy values (the metrics are float32) become Python ones as they are set.
        object.__setattr__(self, name, plain(value))

    def update(self, values):
        """Sets the fields of `values` ({field: value}); another name is a TypeError."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise TypeError("Result has no field %s" % ", ".join(unknown))
        for name, value in values.items():
            setattr(self, name, value)
        return self

    def to_dict(self):
        """{field: value} of plain JSON values (paths as str): json.dumps(result.to_dict())."""
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def plain(value):
    """`value` with numpy scalars and arrays as Python numbers and lists, paths as str,
    tuples as lists, in dicts and lists too."""
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, (str, int, float, bool)) and k is not None
                else k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.floating):  # as eval_results.txt prints it: float32 0.6671585
        return float(str(value)) if value.dtype.itemsize < 8 else float(value)
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if hasattr(value, "__fspath__"):
        return str(value.__fspath__())
    if hasattr(value, "tolist"):  # numpy scalars and arrays (np.float32 -> float)
        return plain(value.tolist())
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def define_flag_table(fv, rows):
    """Registers one flag per row of `rows` on `fv`: (kind, name, default, help) with kind
    "string", "integer", "float" or "bool", or ("enum", name, default, help, choices)."""
    for kind, name, default, help_text, *choices in rows:
        define = getattr(flags, "DEFINE_" + kind)
        if choices:
            define(name, default, list(choices[0]), help_text, flag_values=fv)
        else:
            define(name, default, help_text, flag_values=fv)
