"""The command line prints user-supplied text as it is (issue 10 §6): paths with rich markup
(``ops[/x]``, ``[bold]``) or emoji codes (``:fire:``) are echoed literally by every command that
echoes a path, instead of raising rich's MarkupError after the files are written.

Commands run through typer's CliRunner; the compile, the benchmark and copier are replaced by
stand-ins that return what they would, so only the printing is under test.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import RELU6, tree_snapshot
from typer.testing import CliRunner

from opgen import cli
from opgen import spec as spec_module
from opgen.bench import Row
from opgen.spec import load
from opgen.team import TeamResult

RUNNER = CliRunner()
#: Folder names that rich would read as markup or emoji codes.
ODD = ["ops[/x]", "a[bold]b", "x:fire:y", "back\\slash[/]"]


def _invoke(*args: str) -> str:
    result = RUNNER.invoke(cli.app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _spec_in(folder: Path) -> Path:
    folder.mkdir(parents=True)
    spec = folder / "relu6.yaml"
    shutil.copy(RELU6 / "relu6.yaml", spec)
    return spec


@pytest.mark.parametrize("odd", ODD)
def test_generate_echoes_odd_paths(tmp_path, odd):
    spec = _spec_in(tmp_path / odd / "spec")
    out = tmp_path / odd / "out"
    printed = _invoke("generate", str(spec), "--out", str(out))
    assert f"create  {out / 'relu6.py'}" in printed
    printed = _invoke("generate", str(spec), "--out", str(out), "--check")
    assert printed.startswith(f"{out}: up to date with relu6.yaml")


@pytest.mark.parametrize("odd", ODD)
def test_new_echoes_odd_paths(tmp_path, odd):
    folder = tmp_path / odd
    printed = _invoke("new", "scaled", "--elementwise", "--dir", str(folder))
    assert f"create  {folder / 'scaled' / 'scaled.yaml'}" in printed
    assert f"next: edit {folder / 'scaled' / 'scaled.yaml'}, then" in " ".join(printed.split())


@pytest.mark.parametrize("odd", ODD)
def test_build_echoes_odd_names_and_paths(tmp_path, odd, monkeypatch):
    from opgen import build

    library = tmp_path / odd / "lib.so"
    config = SimpleNamespace(name=odd, describe=lambda: "CPU [fast]", cuda=False)
    monkeypatch.setattr(build, "configure", lambda *a, **k: config)
    monkeypatch.setattr(build, "built_library", lambda c: None)
    monkeypatch.setattr(build, "ensure_built", lambda c, **k: build.Built(library, True, 1.0,
                                                                          False))
    printed = _invoke("build", str(tmp_path))
    assert printed == f"{odd}: built (CPU [fast]) in 1.0 s: {library}\n"


@pytest.mark.parametrize("odd", ODD)
def test_bench_echoes_odd_paths(tmp_path, odd, monkeypatch):
    from opgen import bench

    op_dir = tmp_path / odd
    op_dir.mkdir(parents=True)
    rows = [Row("op", "forward", "float32", 4096, 32768, 0.01, 3.3),
            Row("copy", "forward", "float32", 4096, 32768, 0.01, 3.3)]
    monkeypatch.setattr(bench, "run", lambda *a, **k: rows)
    monkeypatch.setattr(bench, "op_spec", lambda op_dir: load(RELU6 / "relu6.yaml"))
    json_path = op_dir / "bench[bold].json"
    printed = _invoke("bench", str(op_dir), "--json", str(json_path))
    assert f"{op_dir.name} on cpu" in printed
    assert printed.endswith(f"wrote {json_path}\n")
    assert json_path.is_file()


def test_bench_table_lists_dtypes_as_measured_and_forwards_first(tmp_path, monkeypatch):
    from opgen import bench

    rows = [Row(kernel, direction, dtype, 4096, 32768, 0.01, 3.3)
            for dtype in ("bfloat16", "float16", "float32")
            for direction in ("backward", "forward") for kernel in ("copy", "op")
            if not (kernel == "copy" and direction == "backward")]
    monkeypatch.setattr(bench, "run", lambda *a, **k: k["results"].rows.extend(rows))
    monkeypatch.setattr(bench, "op_spec", lambda op_dir: load(RELU6 / "relu6.yaml"))
    printed = _invoke("bench", str(tmp_path))
    listed = [tuple(word for word in line.replace("│", " ").split()
                    if word in ("float32", "float16", "bfloat16", "forward", "backward", "op",
                                "copy"))
              for line in printed.splitlines() if "4,096" in line]
    assert listed == [(dtype, direction, kernel) for dtype in ("float32", "float16", "bfloat16")
                      for direction, kernel in (("forward", "op"), ("forward", "copy"),
                                                ("backward", "op"))]


def test_bench_times_a_repeated_dtype_once(tmp_path, monkeypatch):
    from opgen import bench

    seen = []
    monkeypatch.setattr(bench, "run", lambda *a, **k: seen.append(k["dtypes"]) or [])
    monkeypatch.setattr(bench, "op_spec", lambda op_dir: load(RELU6 / "relu6.yaml"))
    _invoke("bench", str(tmp_path), "--dtype", "float16", "--dtype", "float32", "--dtype",
            "float16")
    assert seen == [["float16", "float32"]]


@pytest.mark.parametrize("odd", ODD)
def test_init_and_update_echo_odd_paths(tmp_path, odd, monkeypatch):
    from opgen import team

    dest = tmp_path / odd
    made = TeamResult(dest, "v1[/x]", ["ops/r[/x]/r[/x].yaml"], [], True)
    monkeypatch.setattr(team, "init", lambda *a, **k: made)
    monkeypatch.setattr(team, "update", lambda *a, **k: made)
    printed = " ".join(_invoke("init", str(dest)).split())
    assert f"create {dest / 'ops/r[/x]/r[/x].yaml'}" in printed
    assert f"{dest}: team repository, template version v1[/x]. next: cd {dest}," in printed
    printed = " ".join(_invoke("update", str(dest)).split())
    assert f"update {dest / 'ops/r[/x]/r[/x].yaml'}" in printed
    assert f"{dest}: now at template version v1[/x]" in printed


@pytest.mark.parametrize("odd", ODD)
def test_an_error_echoes_an_odd_path(tmp_path, odd, capsys):
    spec = tmp_path / odd / "missing.yaml"
    with pytest.raises(SystemExit) as info:
        cli.main(["generate", str(spec)])
    assert info.value.code == 2
    assert capsys.readouterr().err == f"error: {spec}: no such spec file\n"


def test_build_is_one_call_of_the_api(tmp_path, monkeypatch):
    """`opgen build` parses its flags into api.build_op and prints what came back."""
    calls = []

    def build_op(op_dir, **kwargs):
        calls.append((op_dir, kwargs))
        return SimpleNamespace(config=SimpleNamespace(name="relu6", cuda=True),
                               wheel=SimpleNamespace(path=tmp_path / "r.whl",
                                                     summary=lambda: "CPU only"))

    monkeypatch.setattr(cli.api, "build_op", build_op)
    output = _invoke("build", str(tmp_path), "--cpu-only", "--arch", "80, 90", "--wheel",
                     "--wheel-version", "1.0")
    ((op_dir, kwargs),) = calls
    assert op_dir == tmp_path
    assert {k: kwargs[k] for k in ("cpu_only", "arch", "wheel", "wheel_dir", "wheel_version")} \
        == {"cpu_only": True, "arch": "80, 90", "wheel": True, "wheel_dir": None,
            "wheel_version": "1.0"}
    assert f"relu6: wheel {tmp_path / 'r.whl'} (CPU only)" in output



def test_an_arch_that_changes_nothing_is_said(tmp_path, monkeypatch):
    monkeypatch.setattr(cli.api, "build_op", lambda op_dir, **kwargs: SimpleNamespace(
        config=SimpleNamespace(name="relu6", cuda=False), wheel=None))
    output = _invoke("build", str(tmp_path), "--arch", "90")
    assert "warning: --arch 90 had no effect: this build has no CUDA part (Paddle here is " \
           "CPU-only, or the op has no .cu source)" in " ".join(output.split())

def test_generate_takes_an_op_folder(tmp_path):
    op = tmp_path / "op"
    shutil.copytree(RELU6, op, ignore=shutil.ignore_patterns("__pycache__", "build"))
    assert "up to date with relu6.yaml" in " ".join(_invoke("generate", str(op), "--check")
                                                    .split())
    (op / "other.yaml").write_text("name: other\n")  # the answers file still names relu6.yaml
    assert "up to date with relu6.yaml" in " ".join(_invoke("generate", str(op), "--check")
                                                    .split())


def test_generate_refuses_a_folder_without_one_spec(tmp_path, capsys):
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text("name: x\n")
    with pytest.raises(SystemExit) as info:
        cli.main(["generate", str(tmp_path)])
    assert info.value.code == 2
    assert capsys.readouterr().err == (f"error: {tmp_path}: a folder; name its spec "
                                       "(YAML files there: a.yaml, b.yaml)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "b.yaml"]
    only_yml = tmp_path / "yml"
    only_yml.mkdir()
    (only_yml / "op.yml").write_text("name: op\n")
    (only_yml / ".opgen-answers.yml").write_text("spec: gone.yaml\n")  # not listed
    with pytest.raises(SystemExit):
        cli.main(["generate", str(only_yml)])
    assert capsys.readouterr().err == (f"error: {only_yml}: a folder; name its spec (YAML files "
                                       "there: none; op.yml: a spec's name ends in .yaml)\n")


# -- the file system's refusals: one line each, nothing written ---------------------------------

@pytest.mark.parametrize(("code", "reason"), [(28, "no space left on device"),
                                              (30, "read-only file system"),
                                              (13, "permission denied")])
def test_a_refused_write_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys, code,
                                                        reason):
    """A full disk, a read-only or a forbidden folder (simulated: the tests may run as root)
    fails the first file the writer puts down: one ``error:`` line naming it, exit code 1, and
    the op's folder as it was (its spec alone)."""
    import os

    from opgen import journal

    spec = _spec_in(tmp_path / "op")
    before = tree_snapshot(tmp_path)
    written = []

    def refuse(path, data):
        written.append(path)
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(journal, "_write", refuse)
    with pytest.raises(SystemExit) as info:
        cli.main(["generate", str(spec)])
    assert info.value.code == 1
    assert capsys.readouterr().err == f"error: {written[0]}: {reason}\n"
    after = tree_snapshot(tmp_path)
    assert after.pop(".op.opgen.lock") == b""  # the writer's lock, beside the folder
    assert after == before


def test_new_refuses_a_dir_that_is_a_file(tmp_path, capsys, monkeypatch):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine\n")
    for where in (afile, afile / "deeper"):
        with pytest.raises(SystemExit) as info:
            cli.main(["new", "my_op", "--elementwise", "--dir", str(where)])
        assert info.value.code == 2
        assert capsys.readouterr().err == (f"error: --dir {where}: {afile}: exists and is not "
                                           "a folder\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert afile.read_text() == "mine\n"
    monkeypatch.chdir(tmp_path)  # no --dir: the folder it would make is named alone
    (tmp_path / "my_op").write_text("mine\n")
    with pytest.raises(SystemExit) as info:
        cli.main(["new", "my_op", "--elementwise"])
    assert info.value.code == 2
    assert capsys.readouterr().err == "error: my_op: exists and is not a folder\n"


@pytest.mark.parametrize("info", [None, "no GPU"])
def test_test_on_the_gpu_alone_refuses_a_machine_without_one(tmp_path, monkeypatch, capsys,
                                                             info):
    """``opgen test --device gpu`` where Paddle sees no GPU (or no Paddle answers) would skip
    every test and pass: refused before the build, as ``opgen bench --device gpu`` is."""
    from opgen import probe

    op = tmp_path / "relu6"
    shutil.copytree(RELU6, op, ignore=shutil.ignore_patterns("__pycache__", "build"))
    answer = None if info is None else probe.PaddleInfo(
        version="3.3.1", with_cuda=False, cuda_version=None, gpu_count=0, gpu_arches=())
    monkeypatch.setattr(probe, "paddle_info", lambda: answer)
    built = []
    monkeypatch.setattr(cli, "_build", lambda config: built.append(config))
    with pytest.raises(SystemExit) as info_:
        cli.main(["test", str(op), "--device", "gpu"])
    assert info_.value.code == 2
    assert capsys.readouterr().err == "error: --device gpu: no GPU visible to Paddle\n"
    assert built == []


def test_generate_out_refuses_the_folder_of_another_op(tmp_path, capsys):
    """``--out`` into an op generated from another spec would turn that op into this one."""
    op = tmp_path / "relu6"
    shutil.copytree(RELU6, op, ignore=shutil.ignore_patterns("__pycache__", "build"))
    other = _spec_in(tmp_path / "specs")
    renamed = other.with_name("clip6.yaml")
    renamed.write_text(other.read_text().replace("name: relu6", "name: clip6")
                       .replace("op_name: custom_relu6", "op_name: custom_clip6"))
    before = tree_snapshot(op)
    with pytest.raises(SystemExit) as info:
        cli.main(["generate", str(renamed), "--out", str(op)])
    assert info.value.code == 2
    assert capsys.readouterr().err == (f"error: --out {op}: holds the op generated from "
                                       "relu6.yaml; generating clip6.yaml there would replace "
                                       "it: name another folder\n")
    assert tree_snapshot(op) == before
    # a spec of the op's own name still regenerates it there
    _invoke("generate", str(other), "--out", str(op), "--pretend")
    # and a second spec beside the op's own is refused too, while renaming the spec is not
    beside = op / "clip6.yaml"
    shutil.copy(renamed, beside)
    with pytest.raises(SystemExit) as info:
        cli.main(["generate", str(beside)])
    assert info.value.code == 2
    assert capsys.readouterr().err == (f"error: {op}: holds the op generated from relu6.yaml; "
                                       "generating clip6.yaml there would replace it: give "
                                       "clip6.yaml a folder of its own\n")
    (op / "relu6.yaml").unlink()
    _invoke("generate", str(beside), "--pretend")


def test_new_force_refuses_to_keep_a_spec_of_another_kind(tmp_path, capsys):
    """``--force`` keeps an existing spec, so ``new x --rowwise --force`` over an elementwise x
    would leave it elementwise while the user asked for a row-wise op: refused, saying so."""
    _invoke("new", "twin", "--elementwise", "--dir", str(tmp_path))
    before = tree_snapshot(tmp_path / "twin")
    for kind in ("rowwise", "custom"):
        with pytest.raises(SystemExit) as info:
            cli.main(["new", "twin", f"--{kind}", "--force", "--dir", str(tmp_path)])
        assert info.value.code == 2
        spec = tmp_path / "twin" / "twin.yaml"
        assert capsys.readouterr().err == (f"error: {spec}: an op of kind elementwise, which "
                                           f"--force keeps as it is, not a new {kind} op: change "
                                           "its kind: there, or use another folder\n")
    assert tree_snapshot(tmp_path / "twin") == before
    _invoke("new", "twin", "--elementwise", "--force", "--dir", str(tmp_path))  # its own kind


def test_new_force_refuses_a_folder_holding_another_op(tmp_path, capsys):
    """A folder of another op (renamed, say) is not turned into this one by ``--force``: that
    deleted the other op's sources and tests and left its spec and wrapper beside the new op's
    (``opgen generate --out`` refused the same already)."""
    _invoke("new", "bar", "--elementwise", "--dir", str(tmp_path))
    (tmp_path / "bar").rename(tmp_path / "foo")
    before = tree_snapshot(tmp_path / "foo")
    for pretend in ([], ["--pretend"]):
        with pytest.raises(SystemExit) as info:
            cli.main(["new", "foo", "--elementwise", "--force", "--dir", str(tmp_path), *pretend])
        assert info.value.code == 2
        assert capsys.readouterr().err == (
            f"error: {tmp_path / 'foo'}: holds the op generated from bar.yaml; generating "
            "foo.yaml there would replace it: give foo.yaml a folder of its own\n")
    assert tree_snapshot(tmp_path / "foo") == before


def test_a_build_from_a_spec_edited_since_generate_warns(tmp_path, monkeypatch):
    """Editing the spec and building without ``opgen generate`` compiles the old sources:
    ``opgen build`` and ``opgen test`` say so before they build."""
    from opgen import api

    op = tmp_path / "relu6"
    shutil.copytree(RELU6, op, ignore=shutil.ignore_patterns("__pycache__", "build"))
    assert api.stale_spec(op) is None
    monkeypatch.setattr(cli.builder, "built_library", lambda config: "cached")
    monkeypatch.setattr(cli.builder, "ensure_built", lambda config, **kw: SimpleNamespace(
        compiled=False, waited=False, library=op / "lib.so"))
    result = RUNNER.invoke(cli.app, ["build", str(op), "--cpu-only"], catch_exceptions=False)
    assert result.exit_code == 0 and "warning" not in result.output
    spec = op / "relu6.yaml"
    spec.write_text(spec.read_text().replace("min(max(x, 0), threshold)", "max(x, 0)", 1))
    message = (f"{spec} changed since the op was generated from it; this builds the op as it "
               f"was: run `opgen generate {op}` first")
    assert api.stale_spec(op) == message
    result = RUNNER.invoke(cli.app, ["build", str(op), "--cpu-only"], catch_exceptions=False)
    assert result.exit_code == 0
    assert f"warning: {message}" in " ".join(result.output.split())
    monkeypatch.setattr(cli.api, "test", lambda *a, **k: 0)  # the warning comes before it
    result = RUNNER.invoke(cli.app, ["test", str(op)], catch_exceptions=False)
    assert result.exit_code == 0
    assert f"warning: {message}" in " ".join(result.output.split())
    _invoke("generate", str(op))
    assert api.stale_spec(op) is None


def test_new_names_the_name_not_a_spec_it_did_not_write(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["new", "os", "--elementwise", "--dir", str(tmp_path)])
    assert info.value.code == 2
    assert capsys.readouterr().err == ("error: opgen new os: op name 'os' would shadow the "
                                       "Python module 'os'\n")
    assert list(tmp_path.iterdir()) == []


def test_new_refuses_a_name_that_shadows_a_module_paddle_loads(tmp_path, capsys, monkeypatch):
    # setuptools.py in the op's folder broke its setup.py's `import paddle.utils.cpp_extension`
    monkeypatch.setattr(spec_module, "modules_paddle_loads", lambda: frozenset({"google"}))
    for name, why in (("setuptools", ""), ("google", ", which importing Paddle loads")):
        with pytest.raises(SystemExit) as info:
            cli.main(["new", name, "--elementwise", "--dir", str(tmp_path)])
        assert info.value.code == 2
        assert capsys.readouterr().err == (f"error: opgen new {name}: op name '{name}' would "
                                           f"shadow the Python module '{name}'{why}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["build", "test", "bench"])
def test_a_folder_that_is_not_an_op_is_named_as_given(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    for folder, why in (("missing", "no such op folder"),
                        ("empty", "not a generated op folder (expected one csrc/<name>.cc; run "
                                  "`opgen generate` first)")):
        with pytest.raises(SystemExit) as info:
            cli.main([command, folder])
        assert info.value.code == 2
        assert capsys.readouterr().err == f"error: {folder}: {why}\n"


@pytest.mark.parametrize(("args", "where"), [
    (["new", "my_op", "--elementwise", "--dir", ""], "new: Invalid value for '--dir'"),
    (["generate", ""], "generate: Invalid value for 'spec'"),
    (["generate", "relu6.yaml", "--out", ""], "generate: Invalid value for '--out'"),
    (["build", ""], "build: Invalid value for 'op_dir'"),
    (["build", "relu6", "--wheel", "--wheel-dir", ""], "build: Invalid value for '--wheel-dir'"),
    (["test", ""], "test: Invalid value for 'op_dir'"),
    (["bench", ""], "bench: Invalid value for 'op_dir'"),
    (["bench", "relu6", "--json", ""], "bench: Invalid value for '--json'"),
    (["bench", "relu6", "--plot", ""], "bench: Invalid value for '--plot'"),
    (["init", ""], "init: Invalid value for 'team_dir'"),
    (["update", ""], "update: Invalid value for 'team_dir'"),
])
def test_an_empty_path_is_refused_not_read_as_here(tmp_path, monkeypatch, capsys, args, where):
    """``Path("")`` is the current folder: an empty path (an unset shell variable, mostly) would
    scaffold, write a team repository or a JSON file here. Every path flag and argument refuses
    it by name, before anything runs."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        cli.main(args)
    assert info.value.code == 2
    assert capsys.readouterr().err == f"error: opgen {where}: an empty path\n"
    assert list(tmp_path.iterdir()) == []


def test_opgen_alone_prints_its_help_and_no_empty_error(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([])
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert "Usage: opgen" in captured.out and "generate" in captured.out
    assert captured.err == ""


def test_test_refuses_an_unknown_flag_and_passes_what_follows_dashes_to_pytest(monkeypatch,
                                                                               capsys):
    """A misspelt flag went on to pytest after the build (and --device stayed all)."""
    from opgen import api

    calls = []
    monkeypatch.setattr(api, "test", lambda op_dir, **kw: calls.append(kw) or 0)
    monkeypatch.setattr(api, "stale_spec", lambda op_dir: None)
    with pytest.raises(SystemExit) as info:
        cli.main(["test", "op", "--devcie", "cpu"])
    assert info.value.code == 2 and calls == []
    assert capsys.readouterr().err == ("error: opgen test: No such option: --devcie (Possible "
                                       "options: --device)\n")
    cli.main(["test", "op", "--device", "cpu", "--", "-q", "-k", "float16 or x"])
    assert [(c["device"], c["pytest_args"]) for c in calls] == [("cpu", ["-q", "-k",
                                                                         "float16 or x"])]
    # a second word before -- went to pytest as a test path, after the build
    for argv in (["test", "op", "extra"], ["test", "op", "extra", "--", "-q"]):
        with pytest.raises(SystemExit) as info:
            cli.main(argv)
        assert info.value.code == 2 and len(calls) == 1
        assert capsys.readouterr().err == ("error: opgen test: Invalid value for OP_DIR: "
                                           "unexpected 'extra': one op folder; pytest's own "
                                           "arguments go after --\n")
    cli.main(["test", "op", "--", "op", "--"])  # words after -- are pytest's, -- included
    assert calls[-1]["pytest_args"] == ["op", "--"]
    cli.main(["test", "--", "op", "-q", "-k", "x"])  # OP_DIR itself after --: the rest is pytest's
    assert calls[-1]["pytest_args"] == ["-q", "-k", "x"]


@pytest.mark.parametrize(("name", "shown"), [("a\nb", "a\\nb"), ("a\x1b[31mb", "a\\x1b[31mb")])
def test_a_line_break_or_escape_in_a_name_is_shown_not_sent(tmp_path, capsys, name, shown):
    """An error is one line: a newline in a name or path made two, and an escape sequence
    reached the terminal."""
    with pytest.raises(SystemExit) as info:
        cli.main(["new", name, "--elementwise", "--dir", str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err
    assert err.startswith(f"error: op name '{shown}' contains ")
    with pytest.raises(SystemExit):
        cli.main(["generate", str(tmp_path / f"{name}.yaml")])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{shown}.yaml" in err
    assert list(tmp_path.iterdir()) == []


def test_a_folder_to_write_through_a_dangling_link_is_refused(tmp_path, capsys):
    """Writing through a link to nothing made its target, wherever it pointed."""
    link = tmp_path / "ops"
    link.symlink_to(tmp_path / "elsewhere" / "ops")
    for args in (["new", "my_op", "--elementwise", "--dir", str(link)],
                 ["generate", str(RELU6 / "relu6.yaml"), "--out", str(link / "relu6")]):
        with pytest.raises(SystemExit) as info:
            cli.main(args)
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"{link}: a link to {tmp_path / 'elsewhere' / 'ops'}, which does not exist" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ops"]


@pytest.mark.parametrize("command", [[], ["new"], ["generate"], ["build"], ["test"], ["doctor"],
                                     ["bench"], ["init"], ["update"]])
def test_help_shows_no_value_after_a_flag(command):
    output = _invoke(*command, "--help")
    assert "--help" in output and "<bool>" not in output, output
