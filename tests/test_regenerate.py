"""Regenerating an edited op: a three-way merge of the last render, the disk and the new render."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import RELU6, run_opgen, tree_snapshot

from opgen import api, journal, merge
from opgen.errors import DriftError, MergeError, UsageError, WriteError
from opgen.merge import BASE_DIR
from opgen.render import render_op
from opgen.spec import load
from opgen.writer import ANSWERS_FILE, Status

FORWARD_BODY = "    out = opgen::min_uniform(opgen::max_uniform(x, MT(0)), threshold);\n"
HAND_TUNED = ("    // Hand-tuned: one select instead of a min and a max.\n"
              "    out = x < MT(0) ? MT(0) : (x > threshold ? threshold : x);\n")
BACKWARD_BODY = "    grad_x = opgen::where(out > MT(0) && out < threshold, grad_out, MT(0));\n"
MY_BACKWARD = "    grad_x = (out > MT(0) && out < threshold) ? grad_out : MT(0);\n"


@pytest.fixture
def op(tmp_path: Path) -> Path:
    """A copy of the checked-in relu6 example, base snapshot included."""
    dest = tmp_path / "relu6"
    shutil.copytree(RELU6, dest, ignore=shutil.ignore_patterns("build"))
    return dest


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def add_slope(spec: Path) -> None:
    """A new attr, used by the backward expression only."""
    edit(spec, "  threshold: {type: float, default: 6.0}",
         "  threshold: {type: float, default: 6.0}\n  slope: {type: float, default: 1.0}")
    edit(spec, "grad_out, 0)", "grad_out * slope, 0)")


def statuses(result: api.Result) -> dict[str, Status]:
    return {c.path: c.status for c in result.changes}


def test_an_unchanged_op_regenerates_identically(op):
    before = tree_snapshot(op)
    result = api.generate(op / "relu6.yaml")
    assert set(statuses(result).values()) == {Status.IDENTICAL}
    assert tree_snapshot(op) == before


def test_an_edited_kernel_is_kept_when_an_attr_is_added(op):
    header = op / "csrc" / "relu6.h"
    edit(header, FORWARD_BODY, HAND_TUNED)
    add_slope(op / "relu6.yaml")

    result = api.generate(op / "relu6.yaml")

    status = statuses(result)
    assert status["csrc/relu6.h"] is Status.MERGED
    assert status["relu6.py"] is Status.OVERWRITE and status["setup.py"] is Status.IDENTICAL
    text = header.read_text()
    assert HAND_TUNED in text  # the edit is kept
    assert "  MT slope;\n" in text and "grad_out * slope, MT(0));" in text  # the attr is added
    assert "slope: float = 1.0" in (op / "relu6.py").read_text()
    fresh = render_op(load(op / "relu6.yaml")).files
    assert (op / BASE_DIR / "csrc/relu6.h").read_bytes() == fresh["csrc/relu6.h"]  # next base
    # Regenerating again changes nothing: the edit is now simply kept.
    again = statuses(api.generate(op / "relu6.yaml"))
    assert again["csrc/relu6.h"] is Status.KEEP
    assert {s for p, s in again.items() if p != "csrc/relu6.h"} == {Status.IDENTICAL}
    # --check stays a drift check: an edited generated file differs from a fresh render.
    check = run_opgen("generate", "--check", str(op / "relu6.yaml"))
    assert check.returncode == 1 and "csrc/relu6.h (differs)" in check.stderr


def test_conflicting_edits_get_markers_are_listed_and_exit_1(op):
    header = op / "csrc" / "relu6.h"
    edit(header, BACKWARD_BODY, MY_BACKWARD)
    add_slope(op / "relu6.yaml")  # changes the very line the user edited

    result = run_opgen("generate", str(op / "relu6.yaml"))

    assert result.returncode == 1, result.stdout + result.stderr
    assert "conflict" in result.stdout and "csrc/relu6.h" in result.stdout
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert "1 file has merge conflicts (csrc/relu6.h)" in result.stderr
    text = header.read_text()
    assert (f"<<<<<<< ours\n{MY_BACKWARD}=======\n"
            "    grad_x = opgen::where(out > MT(0) && out < threshold, grad_out * slope, MT(0));\n"
            ">>>>>>> new render\n") in text
    assert "  MT slope;\n" in text  # the rest of the file merged
    assert "slope: float = 1.0" in (op / "relu6.py").read_text()  # other files updated

    # Until the markers are resolved: regenerating the same spec still reports the conflict,
    # and a spec change that would merge into the file again is refused, writing nothing.
    assert run_opgen("generate", str(op / "relu6.yaml")).returncode == 1
    edit(op / "relu6.yaml", "grad_out * slope, 0)", "grad_out * slope * 2, 0)")
    before = tree_snapshot(op)
    refused = run_opgen("generate", str(op / "relu6.yaml"))
    assert refused.returncode == 1
    assert "unresolved conflict markers" in refused.stderr and "csrc/relu6.h" in refused.stderr
    assert tree_snapshot(op) == before

    edit(op / "relu6.yaml", "grad_out * slope * 2, 0)", "grad_out * slope, 0)")
    resolved = [line for line in text.splitlines(keepends=True)
                if not line.startswith(("<<<<<<<", "=======", ">>>>>>>", "    grad_x = opgen"))]
    header.write_text("".join(resolved))
    assert run_opgen("generate", str(op / "relu6.yaml")).returncode == 0
    assert MY_BACKWARD in header.read_text()


def test_a_deleted_file_stays_deleted(op):
    (op / "README.md").unlink()
    add_slope(op / "relu6.yaml")
    result = api.generate(op / "relu6.yaml")
    assert statuses(result)["README.md"] is Status.KEEP_DELETED
    assert not (op / "README.md").exists()
    assert statuses(api.generate(op / "relu6.yaml"))["README.md"] is Status.KEEP_DELETED


def test_a_folder_in_place_of_a_generated_file_is_refused_not_kept_deleted(op):
    (op / "README.md").unlink()
    (op / "README.md").mkdir()
    add_slope(op / "relu6.yaml")
    before = tree_snapshot(op)
    with pytest.raises(MergeError, match="README.md: is a folder, where opgen writes a file"):
        api.generate(op / "relu6.yaml")
    assert tree_snapshot(op) == before


def test_a_file_where_a_generated_folder_goes_is_refused_not_kept_deleted(op):
    """csrc/ made a file: every source under it was reported keep-deleted."""
    shutil.rmtree(op / "csrc")
    (op / "csrc").write_text("not a folder\n")
    add_slope(op / "relu6.yaml")
    before = tree_snapshot(op)
    with pytest.raises(MergeError, match="csrc: is a file, where opgen needs a folder"):
        api.generate(op / "relu6.yaml")
    assert tree_snapshot(op) == before


def test_a_regenerated_file_keeps_its_permissions(op):
    """A generated file made read-only (or executable) by its user stays so; the new version
    used to come back 0644."""
    (op / "relu6.py").chmod(0o444)
    (op / "test_relu6.py").chmod(0o755)
    add_slope(op / "relu6.yaml")
    changed = statuses(api.generate(op / "relu6.yaml"))
    assert changed["relu6.py"] is Status.OVERWRITE and changed["test_relu6.py"] is Status.OVERWRITE
    assert "slope" in (op / "relu6.py").read_text()
    assert (op / "relu6.py").stat().st_mode & 0o777 == 0o444
    assert (op / "test_relu6.py").stat().st_mode & 0o777 == 0o755


def test_permissions_are_kept_without_set_id_bits_and_where_the_filesystem_has_none(
        op, monkeypatch):
    """A set-user-ID bit would make the new file (owned by whoever regenerates) set-user-ID as
    them; a filesystem without permissions (vfat) refuses chmod, which must not fail the
    regenerate."""
    (op / "test_relu6.py").chmod(0o4755)
    add_slope(op / "relu6.yaml")
    api.generate(op / "relu6.yaml")
    assert (op / "test_relu6.py").stat().st_mode & 0o7777 == 0o755

    def refused(fd, mode):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(journal.os, "fchmod", refused)
    (op / "relu6.py").chmod(0o444)
    edit(op / "relu6.yaml", "slope: {type: float, default: 1.0}", "slope: {type: float, "
         "default: 2.5}")
    changed = statuses(api.generate(op / "relu6.yaml"))
    assert changed["relu6.py"] is Status.OVERWRITE and "2.5" in (op / "relu6.py").read_text()


def test_pretend_shows_every_outcome_and_writes_nothing(op):
    edit(op / "csrc" / "relu6.h", FORWARD_BODY, HAND_TUNED)  # merged
    edit(op / "csrc" / "relu6.h", BACKWARD_BODY, MY_BACKWARD)  # ... with a conflict
    edit(op / "relu6.py", '    """', '    """Mine.\n')  # merged
    (op / "README.md").unlink()  # keep-deleted
    add_slope(op / "relu6.yaml")
    before = tree_snapshot(op.parent)

    result = run_opgen("generate", str(op / "relu6.yaml"), "--pretend")

    assert result.returncode == 1
    assert "would have merge conflicts (csrc/relu6.h)" in result.stderr
    for line in ("would keep-deleted  ", "would  conflict  ", "would    merged  ",
                 "would overwrite  ", "would identical  "):
        assert line in result.stdout, (line, result.stdout)
    assert "would    merged  " + str(op / "relu6.py") in result.stdout
    assert tree_snapshot(op.parent) == before
    assert sorted(p.name for p in op.parent.iterdir()) == ["relu6"]  # not even a lock file


def test_an_edited_file_the_new_render_drops_is_kept(op):
    edit(op / "relu6.py", "import paddle\n", "import paddle  # mine\n")
    spec = op / "relu6.yaml"
    edit(spec, "name: relu6 ", "name: clip6 ")
    edit(spec, "op_name: custom_relu6", "op_name: custom_clip6")

    status = statuses(api.generate(spec))

    assert status["relu6.py"] is Status.KEEP and "# mine" in (op / "relu6.py").read_text()
    assert status["csrc/relu6.h"] is Status.REMOVE and not (op / "csrc/relu6.h").exists()
    assert status["csrc/clip6.h"] is Status.CREATE and (op / "csrc/clip6.h").exists()
    assert spec.exists()  # the spec is the input: never merged, never removed
    assert not (op / BASE_DIR / "relu6.py").exists() and (op / BASE_DIR / "clip6.py").exists()


def test_an_op_without_a_base_snapshot_merges_without_losing_edits(op):
    shutil.rmtree(op / ".opgen")  # e.g. generated by an opgen that kept no snapshot
    edit(op / "csrc" / "relu6.h", FORWARD_BODY, HAND_TUNED)
    add_slope(op / "relu6.yaml")

    status = statuses(api.generate(op / "relu6.yaml"))

    # Unedited files still match their recorded hash, so they are their own base.
    assert status["relu6.py"] is Status.OVERWRITE
    # An edited one has no base to merge from: both versions are kept, as a conflict.
    assert status["csrc/relu6.h"] is Status.CONFLICT
    text = (op / "csrc" / "relu6.h").read_text()
    assert HAND_TUNED in text and "grad_out * slope, MT(0));" in text
    assert (op / BASE_DIR / "csrc/relu6.h").is_file()  # from now on there is a base


def test_a_file_in_the_way_of_a_first_render_is_refused_and_kept(tmp_path):
    """A folder opgen never generated into (no answers file, no snapshot) whose README.md the
    render would write: refused, nothing written (merging put conflict markers in the user's
    file). An identical file is no clash."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "README.md").write_text("# my notes\n")
    before = tree_snapshot(out)
    with pytest.raises(WriteError, match="README.md already exists and opgen did not write it"):
        api.generate(RELU6 / "relu6.yaml", out)
    assert tree_snapshot(out) == before
    (out / "README.md").write_bytes((RELU6 / "README.md").read_bytes())
    assert statuses(api.generate(RELU6 / "relu6.yaml", out))["README.md"] is Status.IDENTICAL


def test_regenerating_from_the_copied_spec_keeps_it(tmp_path):
    out = tmp_path / "out"
    api.generate(RELU6 / "relu6.yaml", out)  # copies the spec into out/
    result = api.generate(out / "relu6.yaml")
    assert (out / "relu6.yaml").read_bytes() == (RELU6 / "relu6.yaml").read_bytes()
    assert "relu6.yaml" not in statuses(result)
    assert not (out / BASE_DIR / "relu6.yaml").exists()


def test_an_edited_copy_of_the_spec_is_refused_and_a_deleted_one_comes_back(tmp_path):
    """Generating from the outer spec over an edited copy kept the copy (a merge of the spec!),
    leaving the op unlike the spec beside it and `--check` failing from both."""
    out = tmp_path / "out"
    api.generate(RELU6 / "relu6.yaml", out)
    edit(out / "relu6.yaml", "default: 6.0", "default: 5.0")
    before = tree_snapshot(out)
    with pytest.raises(UsageError, match=r"relu6.yaml: edited since opgen copied .*relu6.yaml "
                                         r"there; generate from it"):
        api.generate(RELU6 / "relu6.yaml", out)
    assert tree_snapshot(out) == before
    (out / "relu6.yaml").unlink()
    assert statuses(api.generate(RELU6 / "relu6.yaml", out))["relu6.yaml"] is Status.CREATE
    assert (out / "relu6.yaml").read_bytes() == (RELU6 / "relu6.yaml").read_bytes()
    api.generate(RELU6 / "relu6.yaml", out, check=True)
    # --check --allow-edits allows edits of generated files, not of the spec's copy
    edit(out / "relu6.yaml", "default: 6.0", "default: 5.0")
    with pytest.raises(DriftError, match="its relu6.yaml is not .*relu6.yaml's copy"):
        api.generate(RELU6 / "relu6.yaml", out, check=True, allow_edits=True)
    # line endings are no edit: the copy is taken again
    (out / "relu6.yaml").write_bytes((RELU6 / "relu6.yaml").read_bytes().replace(b"\n", b"\r\n"))
    api.generate(RELU6 / "relu6.yaml", out, check=True, allow_edits=True)
    assert statuses(api.generate(RELU6 / "relu6.yaml", out))["relu6.yaml"] is Status.OVERWRITE
    api.generate(RELU6 / "relu6.yaml", out, check=True)


def test_a_spec_an_op_was_generated_from_in_place_is_not_a_copy_to_replace(tmp_path):
    out = tmp_path / "op"
    out.mkdir()
    shutil.copy(RELU6 / "relu6.yaml", out)
    api.generate(out / "relu6.yaml")
    edit(out / "relu6.yaml", "default: 6.0", "default: 5.0")
    before = tree_snapshot(out)
    with pytest.raises(UsageError, match=r"relu6.yaml: the spec the op there was generated "
                                         r"from, and not .*relu6.yaml's copy"):
        api.generate(RELU6 / "relu6.yaml", out)
    assert tree_snapshot(out) == before


@pytest.mark.parametrize(("text", "why"), [
    ("files: [not, a, mapping]\n", "no 'files:' mapping in it"),
    ("", "no 'files:' mapping in it"),
    ("files:\n  a: 1\n b: [\n", "not YAML at line 3"),
])
def test_a_damaged_answers_file_is_one_error_line(op, text, why):
    (op / ANSWERS_FILE).write_text(text)
    before = tree_snapshot(op)
    result = run_opgen("generate", str(op / "relu6.yaml"))
    assert result.returncode == 1
    assert result.stderr == (f"error: {op / ANSWERS_FILE}: not an opgen answers file ({why}); "
                             "restore it from version control, or delete it to merge every "
                             "edited file as a conflict\n")
    assert tree_snapshot(op) == before


def test_an_answers_file_cannot_point_outside_the_op(op):
    (op / ANSWERS_FILE).write_text("files:\n  ../../etc/passwd: abc\n")
    with pytest.raises(MergeError, match="not a path inside the op folder"):
        api.generate(op / "relu6.yaml")


@pytest.mark.parametrize("before, base, ours, theirs, expected, data", [
    (False, None, None, b"new", Status.CREATE, b"new"),
    (True, b"old", None, b"new", Status.KEEP_DELETED, None),
    (True, b"old", b"new", b"new", Status.IDENTICAL, None),
    (True, b"old", b"old", b"new", Status.OVERWRITE, b"new"),
    (True, b"old", b"mine", b"old", Status.KEEP, None),
    (True, b"old", b"old", None, Status.REMOVE, None),
    (True, b"old", b"mine", None, Status.KEEP, None),
    (True, None, b"mine", None, Status.KEEP, None),
    (True, b"a\nb\nc\n", b"A\nb\nc\n", b"a\nb\nC\n", Status.MERGED, b"A\nb\nC\n"),
    (True, b"a\nb\nc\n", b"A\nb\nc\n", b"a2\nb\nc\n", Status.CONFLICT,
     b"<<<<<<< ours\nA\n=======\na2\n>>>>>>> new render\nb\nc\n"),
])
def test_decide(before, base, ours, theirs, expected, data):
    assert merge.decide(before, base, ours, theirs) == (expected, data)


def test_the_users_conflict_style_does_not_change_the_markers(tmp_path, monkeypatch):
    config = tmp_path / "gitconfig"
    config.write_text("[merge]\n\tconflictStyle = diff3\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    merged, conflicted = merge.merge3(b"A\n", b"a\n", b"a2\n")
    assert conflicted and merged == b"<<<<<<< ours\nA\n=======\na2\n>>>>>>> new render\n"


def test_no_git_is_one_error(op, monkeypatch):
    edit(op / "csrc" / "relu6.h", FORWARD_BODY, HAND_TUNED)
    add_slope(op / "relu6.yaml")
    monkeypatch.setattr(merge.shutil, "which", lambda name: None)
    with pytest.raises(MergeError, match="git is needed"):
        api.generate(op / "relu6.yaml")
