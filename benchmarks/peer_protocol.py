"""The peer side of bench_util.PeerProcess (peer_int8.py, peer_embeddings.py,
peer_attention.py): one JSON command per stdin line, one answer per stdout line prefixed
"@@ " (so that anything a library prints is not read as an answer).

Runs in the peer venv: the standard library only (no TensorFlow, no bench_util).
"""
import json
import sys


def answer(payload):
    """Writes one answer line and flushes it (the caller waits for it)."""
    sys.stdout.write("@@ " + json.dumps(payload) + "\n")
    sys.stdout.flush()


def serve(info, handle):
    """Answers the commands on stdin until {"op": "quit"} or end of input: {"op": "info"}
    with info(), any other command (a dict) with handle(command)."""
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "quit":
            break
        answer(info() if command["op"] == "info" else handle(command))
