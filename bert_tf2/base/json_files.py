"""Reading a JSON object from a file, with errors that name the file (bert_config.json,
HuggingFace's config.json and index files)."""
import json

import tensorflow as tf


def read_json_object(path, what=""):
    """The dict a JSON file holds; ValueError naming `what` + the path when the file cannot
    be read, is not JSON or holds something else than an object."""
    try:
        with tf.io.gfile.GFile(path, "r") as reader:
            text = reader.read()
    except (tf.errors.NotFoundError, OSError) as e:
        raise ValueError("cannot read %s%s: %s" % (what, path, e)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError("%s%s is not valid JSON: %s" % (what, path, e)) from None
    if not isinstance(data, dict):
        raise ValueError("%s%s must hold a JSON object" % (what, path))
    return data
