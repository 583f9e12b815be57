"""Shared pytest fixtures: where ../shared is, and the repo root on sys.path."""
import os
import pathlib
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def _find_shared():
    env = os.environ.get("BERT_TF2_SHARED")
    candidates = [pathlib.Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared")
    for path in candidates:
        if (path / "data").is_dir() or (path / "golden").is_dir():
            return path
    return None


SHARED_DIR = _find_shared()


@pytest.fixture(scope="session")
def shared_dir():
    """Path of ../shared (or $BERT_TF2_SHARED); skips the test when it is absent."""
    if SHARED_DIR is None:
        pytest.skip("../shared not found beside the repo (set BERT_TF2_SHARED to run "
                    "the golden and real-data tests)")
    return SHARED_DIR


def write_text(path, text):
    """Writes `text` (UTF-8, as given) to `path`, making its folder; returns the path as str."""
    path = str(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return path


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: end-to-end test (still run in CI)")
