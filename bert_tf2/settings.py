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
"""
import dataclasses
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
                 "deterministic_data", "optimizer_type", "fused_optimizer")


class Settings:
    """What every settings class (a face's, or a part of one) can tell besides its values."""

    # Filled by settings_class: {field name: default}, {field name: help text}.
    _DEFAULTS = {}
    _HELP = {}

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
        """An instance of `values` whose user-given fields are `given` (not the keywords)."""
        obj = cls.__new__(cls)
        object.__setattr__(obj, "_given", frozenset(given))
        cls.__dataclass_init__(obj, **values)
        return obj

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
        the constructor are); `fill` sets values that stay "not given"."""
        return self.fill(values, given=True)

    def with_defaults(self, values):
        """A copy in which the fields the user did not give take `values`' entries
        (settings a model's folder saved, say); fields absent here are ignored."""
        return self.fill({name: value for name, value in values.items()
                          if name in self and not self.given(name)})

    def fill(self, values, given=False):
        """A copy with `values` set; with given=False they stay "not given" (defaults that
        a model's folder supplied, say), with given=True they count as the user's."""
        unknown = sorted(set(values) - set(self._DEFAULTS))
        if unknown:
            raise TypeError("%s has no field %s" % (type(self).__name__, ", ".join(unknown)))
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
        """Rules for every face's settings: batch sizes (fields named batch_size or
        *_batch_size) >= 1 (the reference crashes on 0 deep inside TensorFlow), and
        the training-only settings given without do_train warned."""
        for name in sorted(self._DEFAULTS):
            if name == "batch_size" or name.endswith("_batch_size"):
                value = getattr(self, name)
                if value is not None and value < 1:
                    raise ValueError("--%s=%d must be >= 1" % (name, value))
        if "do_train" in self and not self.do_train:
            self.refuse_unused([(name, "without --do_train") for name in TRAINING_ONLY
                                if name in self], warn_only=True)

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


_PARTS = {}


def _part_class(owner, names):
    key = (owner, names)
    if key not in _PARTS:
        fields = [(name, typing.Any, _field_spec(owner._DEFAULTS[name])) for name in names]
        cls = dataclasses.make_dataclass(owner.__name__ + "Part", fields, bases=(Settings,),
                                         frozen=False)
        cls._DEFAULTS = {name: owner._DEFAULTS[name] for name in names}
        cls._HELP = {name: owner._HELP.get(name, "") for name in names}
        _install_init(cls)
        _PARTS[key] = cls
    return _PARTS[key]


def _field_spec(default):
    """A dataclass field with `default`; a list default is copied for each instance."""
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda value=default: type(value)(value))
    return dataclasses.field(default=default)


def _install_init(cls):
    """Keyword arguments of the constructor count as given, whatever their value."""
    init = cls.__init__
    cls.__dataclass_init__ = init

    def __init__(self, *args, **kwargs):
        names = [f.name for f in dataclasses.fields(self)]
        object.__setattr__(self, "_given", frozenset(names[:len(args)]) | set(kwargs))
        init(self, *args, **kwargs)

    __init__.__doc__ = init.__doc__
    cls.__init__ = __init__


def settings_class(define_flags, module, name="Settings", doc=None):
    """A dataclass whose fields are the flags `define_flags(fv)` registers.

    Same names and defaults as the flags (a list default is copied for each
    instance); the class docstring lists every field with its help text.

    Args:
      define_flags: the face's function that registers its flags on a FlagValues.
      module: the face's module name (`__name__`), for the class's repr and pickling.
      name: the class name.
      doc: the class docstring's first paragraph.
    """
    fv = flags.FlagValues()
    define_flags(fv)
    names = [key for key in fv if fv[key].name == key]  # short names are aliases
    fields, defaults, texts = [], {}, {}
    for key in names:
        flag = fv[key]
        default = flag.default
        defaults[key] = default
        texts[key] = flag.help or ""
        fields.append((key, _field_type(flag), _field_spec(default)))
    cls = dataclasses.make_dataclass(name, fields, bases=(Settings,))
    cls.__module__ = module
    cls._DEFAULTS = defaults
    cls._HELP = texts
    lines = [doc or "The settings of %s: one field per flag, same name and default." % module,
             "", "Fields:"]
    lines += ["  %s = %r: %s" % (key, defaults[key], texts[key]) for key in names]
    cls.__doc__ = "\n".join(lines)
    _install_init(cls)
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
        cls = dataclasses.make_dataclass("FlagSettings", fields, bases=(Settings,))
        cls._DEFAULTS = {name: fv[name].default for name in names}
        cls._HELP = {name: fv[name].help or "" for name in names}
        _install_init(cls)
        _PARTS[key] = cls
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
