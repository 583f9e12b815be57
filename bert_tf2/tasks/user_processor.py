"""run_classifier --processor=FILE.py:CLASS (or MODULE:CLASS): your DataProcessor, no edits.

The reference's way to add a task was to write a DataProcessor subclass and add it to
the `processors` dict of run_classifier's main(). Here the class lives in a file of
yours and the flag names it: the file is imported as a module (its folder is put at
the end of sys.path, so it can import its neighbours), the class is checked to be a
DataProcessor subclass and made with no arguments. Every failure is one ValueError
naming the flag, and for an error inside your file its file, line and message.
"""
import importlib
import importlib.util
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
        return cls()
    except Exception as e:  # pylint: disable=broad-except
        raise ValueError("%s=%s: %s() failed: %s" % (FLAG, spec, class_name,
                                                     error_line(e, module.__file__))) from None


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
        module_spec.loader.exec_module(module)
    except Exception as e:  # pylint: disable=broad-except
        del sys.modules[name]
        raise ValueError("%s=%s: import failed at %s" % (FLAG, spec, error_line(e, path))
                         ) from None
    return module


def _import_module(spec, name):
    """Imports the module `name` from sys.path."""
    try:
        return importlib.import_module(name)
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
    if isinstance(error, SyntaxError) and error.filename:
        return "%s, line %s: %s: %s" % (error.filename, error.lineno, type(error).__name__,
                                        error.msg)
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith("<frozen")]
    own = own_file and os.path.abspath(own_file)
    mine = [f for f in frames if own and os.path.abspath(f.filename) == own]
    frame = (mine or frames or [None])[-1]
    if frame is None:
        return message
    return "%s, line %d: %s" % (frame.filename, frame.lineno, message)
