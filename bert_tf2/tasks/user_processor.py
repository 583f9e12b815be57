"""run_classifier --processor=FILE.py:CLASS (or MODULE:CLASS): your DataProcessor, no edits.

The reference's way to add a task was to write a DataProcessor subclass and add it to
the `processors` dict of run_classifier's main(). Here the class lives in a file of
yours and the flag names it: the file is imported as a module (its folder is put at
the end of sys.path, so it can import its neighbours), the class is checked to be a
DataProcessor subclass and made with no arguments. Every failure is one ValueError
naming the flag, and for an error inside your file its file, line and message; so is
a SystemExit (sys.exit, argparse) of your file's import or of the processor's methods,
which would otherwise end the run with its exit code (0) and nothing written.
"""
import contextlib
import functools
import importlib
import importlib.util
import io
import os
import sys
import traceback

from bert_tf2.tasks import glue_data

FLAG = "--processor"


def load_processor(spec):
    """The DataProcessor instance `spec` ("path/to/file.py:Class" or "module:Class") names."""
    target, _, class_name = spec.rpartition(":")
    if not target or not class_name.isidentifier():
        raise ValueError("%s=%s: expected FILE.py:CLASS or MODULE:CLASS (e.g. "
                         "--processor=my_tasks.py:MyProcessor)" % (FLAG, spec))
    if target.endswith(".py") or os.sep in target or "/" in target:
        module = _import_file(spec, target)
    else:
        module = _import_module(spec, target)
    cls = getattr(module, class_name, None)
    if cls is None:
        classes = sorted(name for name, value in vars(module).items()
                         if isinstance(value, type) and not name.startswith("_"))
        raise ValueError("%s=%s: %s has no %s (its classes: %s)"
                         % (FLAG, spec, target, class_name, ", ".join(classes) or "none"))
    if not (isinstance(cls, type) and issubclass(cls, glue_data.DataProcessor)):
        raise ValueError("%s=%s: %s is not a DataProcessor (write `class %s(DataProcessor)` "
                         "with `from run_classifier import DataProcessor`)"
                         % (FLAG, spec, class_name, class_name))
    try:
        processor = cls()
    except (Exception, SystemExit) as e:  # pylint: disable=broad-except
        raise ValueError("%s=%s: %s() failed: %s" % (FLAG, spec, class_name,
                                                     error_line(e, module.__file__))) from None
    for name in _METHODS:
        setattr(processor, name, _no_exit(spec, getattr(processor, name), module.__file__))
    return processor


# The processor methods a run calls, each with the do_* setting that calls it (None: every
# run); a SystemExit from one becomes a ValueError.
_CALLED_BY = (("get_labels", None), ("get_train_examples", "do_train"),
              ("get_dev_examples", "do_eval"), ("get_test_examples", "do_predict"))
_METHODS = tuple(method for method, _ in _CALLED_BY)


def load_checked(spec, asked):
    """load_processor(spec), checked before any work: it defines every method the run's
    do_* settings will call (`asked`: those set, e.g. ["do_train"]), and its get_labels()
    is called once (a failure there is reported now, not later)."""
    processor = load_processor(spec)
    for method, setting in _CALLED_BY:
        if (setting is None or setting in asked) and (
                getattr(type(processor), method) is getattr(glue_data.DataProcessor, method)):
            raise ValueError("%s=%s does not define %s%s" % (
                FLAG, spec, method, "" if setting is None else " (needed by --%s)" % setting))
    call(processor, spec, "get_labels")
    return processor


def _no_exit(spec, method, own_file):
    """`method`, with a SystemExit it raises turned into a ValueError naming `spec`."""
    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except SystemExit as e:
            where = _where(e, own_file)
            raise ValueError("%s=%s: %s() raised SystemExit(%r)%s" % (
                FLAG, spec, method.__name__, e.code, " at " + where if where else "")) from None
    return call


class _Exited(ValueError):
    """A SystemExit of an import, as the one-line error run_cli prints."""


@contextlib.contextmanager
def _exits_reported(spec, own_file):
    """Runs an import: a SystemExit in it becomes an _Exited naming `spec`, with the last
    line the code printed on stderr (argparse's error); stderr otherwise passes."""
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            yield
    except SystemExit as e:
        said = [line.strip() for line in printed.getvalue().split("\n") if line.strip()]
        where = _where(e, own_file)
        raise _Exited("%s=%s: importing it raised SystemExit(%r)%s%s: the file must not end "
                      "the program when imported (put that code under `if __name__ == "
                      "\"__main__\":`)" % (FLAG, spec, e.code, " at " + where if where else "",
                                             " (%s)" % said[-1] if said else "")) from None
    except BaseException:
        sys.stderr.write(printed.getvalue())
        raise
    sys.stderr.write(printed.getvalue())


def call(processor, spec, method, *args):
    """processor.method(*args); an exception in it becomes one ValueError naming the flag,
    the method and the line of the user's file where it failed."""
    try:
        return getattr(processor, method)(*args)
    except Exception as e:  # pylint: disable=broad-except
        own = getattr(sys.modules.get(type(processor).__module__), "__file__", None)
        raise ValueError("%s=%s: %s() failed at %s" % (FLAG, spec, method,
                                                        error_line(e, own))) from None


def _import_file(spec, path):
    """Imports the Python file `path` as a module named after it."""
    if not os.path.isfile(path):
        raise ValueError("%s=%s: no such file %s" % (FLAG, spec, path))
    path = os.path.abspath(path)
    name = os.path.splitext(os.path.basename(path))[0]
    if name in sys.modules:  # never replace a loaded module (a file named modeling.py)
        name = "bert_tf2_user_%s" % name
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.append(folder)
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        with _exits_reported(spec, path):
            module_spec.loader.exec_module(module)
    except Exception as e:  # pylint: disable=broad-except
        del sys.modules[name]
        if isinstance(e, _Exited):
            raise
        raise ValueError("%s=%s: import failed at %s" % (FLAG, spec, error_line(e, path))
                         ) from None
    return module


def _import_module(spec, name):
    """Imports the module `name` from sys.path."""
    try:
        with _exits_reported(spec, None):
            return importlib.import_module(name)
    except _Exited:
        raise
    except Exception as e:  # pylint: disable=broad-except
        missing = getattr(e, "name", None) if isinstance(e, ModuleNotFoundError) else None
        if missing and (name == missing or name.startswith(missing + ".")):
            raise ValueError("%s=%s: no module named %r on the Python path (give a file "
                             "path ending in .py, or set PYTHONPATH)"
                             % (FLAG, spec, missing)) from None
        # The failed module is gone from sys.modules: its frame is the deepest one.
        raise ValueError("%s=%s: import failed at %s" % (FLAG, spec, error_line(e, None))
                         ) from None


def error_line(error, own_file):
    """"file, line N: Type: message" of `error`, at its line in `own_file` if it passed there.

    A SyntaxError names its own line; otherwise the deepest traceback frame in
    own_file, else the deepest frame outside the import machinery.
    """
    message = "%s: %s" % (type(error).__name__, error)
    if isinstance(error, SystemExit):
        message = "SystemExit(%r)" % (error.code,)
    if isinstance(error, SyntaxError) and error.filename:
        return "%s, line %s: %s: %s" % (error.filename, error.lineno, type(error).__name__,
                                        error.msg)
    where = _where(error, own_file)
    return "%s: %s" % (where, message) if where else message


def _where(error, own_file):
    """"file, line N" of the deepest frame of `error` in own_file, else outside the
    import machinery; None without a frame."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith("<frozen")]
    own = own_file and os.path.abspath(own_file)
    mine = [f for f in frames if own and os.path.abspath(f.filename) == own]
    frame = (mine or frames or [None])[-1]
    return frame and "%s, line %d" % (frame.filename, frame.lineno)
