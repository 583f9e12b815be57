"""The documentation site (mkdocs.yml, docs/) and the README as its front door: the generated
flag pages match the scripts' flags, every page is in the nav, the README stays short and its
links land on pages and headings that exist. (`make docs` builds the site with --strict,
which checks the pages' own links; nothing builds the README, hence the link test here.)"""
import importlib.util
import os
import re
import subprocess
import sys
import unicodedata

import pytest
import yaml

import registry_lists
from conftest import REPO_ROOT

DOCS = REPO_ROOT / "docs"
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _tool():
    """docs/tools/flag_pages.py, loaded as a module (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("flag_pages", DOCS / "tools" / "flag_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _slug(heading):
    """The anchor MkDocs' toc gives a heading (Python-Markdown's slugify of its text)."""
    text = unicodedata.normalize("NFKD", heading.replace("`", "")).encode("ascii", "ignore")
    text = re.sub(r"[^\w\s-]", "", text.decode("ascii")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(text):
    """The anchors of a page's headings (outside code blocks)."""
    without_code = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", without_code, flags=re.M)}


def _nav_pages(nav):
    for entry in nav:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            if isinstance(value, list):
                yield from _nav_pages(value)
            else:
                yield value


def test_the_readme_is_a_front_door():
    assert len(README.splitlines()) <= 300


def test_the_slug_is_mkdocs_own():
    # Anchors MkDocs' strict build accepted on these pages (README.md links to the first).
    assert _slug("Offline weights") == "offline-weights"
    assert _slug("Class weights (new): `--class_weights`") == "class-weights-new-class_weights"
    assert _slug("Estimator and TPUEstimator") in _anchors((DOCS / "fork.md").read_text())


def test_every_readme_link_lands_on_a_page_and_heading():
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    assert len(links) >= 20
    for link in links:
        if re.match(r"\w+://", link):
            continue
        path, _, anchor = link.partition("#")
        target = REPO_ROOT / path
        assert target.is_file(), "README.md links to %s: no such file" % link
        if path.startswith("docs/"):
            assert target.suffix == ".md", link
        if anchor:
            assert anchor in _anchors(target.read_text(encoding="utf-8")), \
                "README.md links to %s: %s has no heading with that anchor" % (link, path)


def test_a_readme_link_after_a_sections_name_opens_that_section():
    # "TensorFlow 2.21: [Install](docs/install.md#offline-weights)" opened another section
    # than the one it names (issue 91): the text before a link, back to the previous link
    # or sentence, naming a heading of the page it links to, names the heading it opens.
    wrong = []
    for match in re.finditer(r"\]\((docs/[^)#\s]+)#([^)\s]+)\)", README):
        path, anchor = match.groups()
        before = README[:match.start()].rsplit("](", 1)[-1].split(")", 1)[-1]
        before = re.split(r"[.!?]\s", before)[-1]
        target = (REPO_ROOT / path).read_text(encoding="utf-8")
        named = [m.group(1).strip() for m in re.finditer(r"^#{2,6} (.+)$", target, flags=re.M)
                 if m.group(1).strip() in " ".join(before.split())]
        if named and anchor not in {_slug(name) for name in named}:
            wrong.append("%s#%s after %r" % (path, anchor, named))
    assert not wrong, wrong


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = list(_nav_pages(config["nav"]))
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")
                   if "tools" not in p.relative_to(DOCS).parts)
    assert sorted(nav) == pages
    assert "CONTRACTS.md" in nav and (DOCS / "CONTRACTS.md").is_file()
    # Strict means these warn (and --strict fails on a warning).
    assert config["validation"] == {"omitted_files": "warn", "absolute_links": "warn",
                                    "unrecognized_links": "warn", "anchors": "warn"}


def test_every_snippet_names_a_section_the_readme_marks():
    sections = re.findall(r"^--8<-- \"README\.md:(\w+)\"$",
                          "\n".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md")),
                          flags=re.M)
    assert sorted(sections) == ["from_python", "litert_predictor", "my_tasks"]
    for name in sections:
        start = README.index("<!-- --8<-- [start:%s] -->\n```python\n" % name)
        assert README.index("```\n<!-- --8<-- [end:%s] -->" % name) > start


def test_the_flag_pages_are_the_scripts_flags(shared_dir):
    reference = shared_dir / "reference" / "bert"
    if not reference.is_dir():
        pytest.skip("no reference/bert in %s" % shared_dir)
    tool = _tool()
    pages = tool.pages(str(reference))
    # index.md and one page per root face (found on disk: test_every_face_has_a_flag_page).
    assert sorted(pages) == sorted([os.path.join(tool.FLAGS_DIR, "index.md")] + [
        os.path.join(tool.FLAGS_DIR, face + ".md") for face in registry_lists.root_faces()])
    stale = [path for path, text in pages.items()
             if not os.path.isfile(path) or open(path, encoding="utf-8").read() != text]
    assert not stale, "out of date (run python docs/tools/flag_pages.py): %s" % stale


def test_every_face_has_a_flag_page_and_a_manual_page():
    # The generator's scripts are the root faces on disk (found: docs/tools/flag_pages.py
    # keeps no list), each with its page of the manual, found in the site's nav.
    scripts = _tool().SCRIPTS
    assert sorted(scripts) == registry_lists.root_faces()
    missing = sorted(page for page, _ in scripts.values() if not (DOCS / page).is_file())
    assert not missing, missing
    # Today's faces as they were listed by hand before issue 93 (a few, as facts).
    assert scripts["run_classifier"] == ("glue.md", "GLUE: run_classifier.py")
    assert scripts["export_saved_model"] == ("serving.md", "Serve it")
    assert scripts["create_vocab"] == ("huggingface.md", "HuggingFace and vocabularies")


def test_a_new_faces_manual_page_is_found_in_the_nav():
    tool = _tool()
    nav = [("Start", "index.md"), ("Ranking: run_ranker.py", "ranking.md"),
           ("Flags", "flags/run_ranker.md")]
    assert tool.manual_page("run_ranker", nav) == ("ranking.md", "Ranking: run_ranker.py")
    # Else the page that runs it most (the serving page runs export_saved_model.py).
    nav = [("Start", "index.md"), ("Install", "install.md"), ("Serve it", "serving.md")]
    assert tool.manual_page("export_saved_model", nav) == ("serving.md", "Serve it")
    with pytest.raises(ValueError, match=r"^run_ranker\.py: no page of .*mkdocs\.yml's nav "
                                         r"runs it"):
        tool.manual_page("run_ranker", nav)


def test_a_flag_page_splits_the_references_flags_from_ours(shared_dir):
    reference = shared_dir / "reference" / "bert"
    if not reference.is_dir():
        pytest.skip("no reference/bert in %s" % shared_dir)
    text = _tool().page("run_classifier", str(reference))
    theirs, ours = text.split("## New in this port")
    # The reference's run_classifier.py defines --do_lower_case (default True) and
    # --warmup_proportion 0.1; --long_text and --seed are this port's.
    assert "| `--do_lower_case` | `true` |" in theirs
    assert "| `--warmup_proportion` | `0.1` |" in theirs
    assert "| `--long_text` | `truncate` |" in ours and "| `--seed` | `None` |" in ours
    assert "`--long_text`" not in theirs
    # A script the reference does not have: every flag is new, in one table.
    assert "every flag here is new" in _tool().page("run_ner", str(reference))


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    # What `make docs` runs (make test runs it first); here too for a bare pytest run.
    pytest.importorskip("mkdocs")
    pytest.importorskip("pymdownx")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                            "--site-dir", str(tmp_path / "site")], cwd=str(REPO_ROOT),
                           capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr[-2000:]
    own_data = (tmp_path / "site" / "own-data.html").read_text(encoding="utf-8")
    assert "FolderProcessor" in own_data  # README.md's block, included by its snippet


def test_the_glue_page_lists_every_task_of_the_processors():
    # "Tasks: `cola`, ..." in docs/glue.md names each processor once (PROCESSORS also keys
    # aliases: sst2 beside sst-2); a processor added there must be named here too.
    from bert_tf2.tasks import glue_data
    text = (DOCS / "glue.md").read_text(encoding="utf-8")
    sentence = re.search(r"^Tasks: (.*?)\. ", text, re.M | re.S).group(1)
    named = re.findall(r"`([^`]+)`", sentence)
    first_key = {}
    for key, processor in glue_data.PROCESSORS.items():
        first_key.setdefault(processor, key)
    assert sorted(named) == sorted(first_key.values())


# A line a person reads in an editor; the generated flag pages (docs/flags/: one table row per
# flag) are exempt.
MAX_DOC_LINE = 200


def test_doc_lines_are_at_most_200_characters():
    long_lines = {}
    for path in sorted(DOCS.rglob("*.md")):
        name = str(path.relative_to(DOCS))
        if name.startswith("flags" + os.sep):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        over = [n for n, line in enumerate(lines, 1) if len(line) > MAX_DOC_LINE]
        if over:
            long_lines[name] = over
    assert not long_lines, long_lines


def test_the_layout_page_has_one_row_per_module():
    rows = re.findall(r"^\| `([^`]+)` \|", (DOCS / "layout.md").read_text(encoding="utf-8"), re.M)
    files = {str(p.relative_to(REPO_ROOT)) for p in REPO_ROOT.glob("*.py")} - {"setup.py"}
    files |= {str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "bert_tf2").rglob("*.py")
              if p.name != "__init__.py"}
    assert sorted(set(rows) & files) == sorted(files), sorted(files - set(rows))
    assert len(rows) == len(set(rows))


def test_the_contracts_page_stays_short():
    # The floors and the rules across modules; each module's own contracts are its docstring.
    assert len((DOCS / "CONTRACTS.md").read_text(encoding="utf-8").splitlines()) <= 300
