"""Team repositories: `opgen init` from the copier template in templates/team, its CI script, and
`opgen update` / `copier update` from one template version to the next over local changes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import RELU6, ROOT, run_opgen, tree_snapshot

from opgen import api, team
from opgen.errors import DriftError, TeamError

TEMPLATE = ROOT / "templates" / "team"
OPGEN = f"{sys.executable} -m opgen"


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """A template store of the test's own, and git without the user's configuration."""
    monkeypatch.setenv(team.STORE_ENV, str(tmp_path / "store"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "test@example.com")


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def commit_all(repo: Path, message: str) -> None:
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", message, cwd=repo)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def ci(team_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPGEN": OPGEN, "GLOG_minloglevel": "3"}
    return subprocess.run(["bash", "ci/run.sh", *args], cwd=team_dir, env=env,
                          capture_output=True, text=True, check=False)


def template_repo(tmp_path: Path) -> Path:
    """A git repository of the team template at version 1.0.0, tagged like a template's own."""
    repo = tmp_path / "template"
    shutil.copytree(TEMPLATE, repo)
    git("init", "-q", cwd=repo)
    commit_all(repo, "template 1.0.0")
    git("tag", "1.0.0", cwd=repo)
    return repo


def make_v2(template: Path) -> None:
    """Version 2 of the template: a new CI step, a new docs paragraph, a new file."""
    edit(template / "ci" / "run.sh", 'echo "== $name"', 'echo "== $name (template v2)"')
    edit(template / "docs" / "onboarding.md.jinja", "## Set up\n",
         "## Set up\n\nNew in version 2 of the template.\n")
    (template / "CONTRIBUTING.md").write_text("Contributing: see docs/onboarding.md.\n")
    config = template / "copier.yml"
    config.write_text(re.sub(r'(?m)^_opgen_template_version: ".*"$',
                             '_opgen_template_version: "2.0.0"', config.read_text()))


def change_locally(team_dir: Path) -> None:
    """What a team does to its repository after init."""
    edit(team_dir / "pyproject.toml", '  "pytest>=8",\n', '  "pytest>=8",\n  "scipy",\n')
    with (team_dir / "docs" / "onboarding.md").open("a") as fh:
        fh.write("\n## Our notes\n\nAsk in #ops-help.\n")


def assert_local_changes_kept_and_v2_applied(team_dir: Path) -> None:
    assert '  "scipy",\n' in (team_dir / "pyproject.toml").read_text()
    onboarding = (team_dir / "docs" / "onboarding.md").read_text()
    assert "## Our notes\n\nAsk in #ops-help.\n" in onboarding
    assert "New in version 2 of the template." in onboarding
    assert 'echo "== $name (template v2)"' in (team_dir / "ci" / "run.sh").read_text()
    assert (team_dir / "CONTRIBUTING.md").is_file()


# -- opgen init ------------------------------------------------------------------------------


def test_init_renders_a_team_repository(tmp_path):
    team_dir = tmp_path / "Vision Ops"
    result = run_opgen("init", str(team_dir))
    assert result.returncode == 0, result.stderr

    for rel in ("pyproject.toml", "README.md", ".gitignore", ".pre-commit-config.yaml",
                ".github/workflows/ci.yml", "docs/onboarding.md", "docs/onboarding.zh.md",
                "ops/relu6/relu6.yaml", "ops/relu6/csrc/relu6.cu", "ops/relu6/test_relu6.py"):
        assert (team_dir / rel).is_file(), rel
    assert os.access(team_dir / "ci" / "run.sh", os.X_OK)
    assert (team_dir / ".git").is_dir()
    assert not list((team_dir / "ops").glob(".*.lock"))
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((team_dir / "pyproject.toml").read_text())
    assert project["project"]["name"] == "vision-ops-ops"
    answers = yaml.safe_load((team_dir / ".copier-answers.yml").read_text())
    assert answers["_src_path"] == os.environ[team.STORE_ENV]
    assert answers["_commit"].startswith(team.template_version(TEMPLATE) + "+")
    assert answers["team_name"] == "vision-ops"
    api.generate(team_dir / "ops" / "relu6" / "relu6.yaml", check=True)  # relu6, generated
    workflow = yaml.safe_load((team_dir / ".github/workflows/ci.yml").read_text())
    assert "bash ci/run.sh" in str(workflow["jobs"]["ops"]["steps"])
    hooks = (team_dir / ".pre-commit-config.yaml").read_text()
    assert "ruff-pre-commit" in hooks and "check-merge-conflict" in hooks


def _opgen_dependency(team_dir: Path) -> str:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((team_dir / "pyproject.toml").read_text())
    (requirement,) = [d for d in project["project"]["dependencies"] if d.startswith("opgen")]
    return requirement


def test_init_writes_an_opgen_requirement_that_pip_can_install(tmp_path):
    team_dir = tmp_path / "acme"
    result = run_opgen("init", str(team_dir))
    assert result.returncode == 0, result.stderr
    requirement = _opgen_dependency(team_dir)
    assert requirement == f"opgen @ {ROOT.as_uri()}"  # this opgen runs from its checkout
    assert f"installs opgen as: {requirement} (a path on this machine" in result.stdout
    assert yaml.safe_load((team_dir / ".copier-answers.yml").read_text())[
        "opgen_requirement"] == requirement  # kept by opgen update

    report = tmp_path / "report.json"
    egg_info = ROOT / "opgen.egg-info"
    existed = egg_info.exists()
    try:  # pip's resolver on the written requirement, as `pip install -e .` would meet it
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                              "--ignore-installed", "--quiet", "--report", str(report),
                              requirement], capture_output=True, text=True, check=False)
    finally:
        if not existed:  # setuptools leaves its metadata in the source folder
            shutil.rmtree(egg_info, ignore_errors=True)
    assert pip.returncode == 0, pip.stderr[-2000:]
    installs = json.loads(report.read_text())["install"]
    assert [(i["metadata"]["name"], i["download_info"]["url"]) for i in installs] == \
        [("opgen", ROOT.as_uri())]


@pytest.mark.parametrize("given, written", [
    ("git+https://example.com/opgen.git@v0.1.0", "opgen @ git+https://example.com/opgen.git@v0.1.0"),
    ("opgen @ git+https://example.com/opgen.git", "opgen @ git+https://example.com/opgen.git"),
    ("opgen==0.1.0", "opgen==0.1.0"),
    ("{tmp}/opgen-0.1.0-py3-none-any.whl", "opgen @ file://{tmp}/opgen-0.1.0-py3-none-any.whl"),
])
def test_the_opgen_requirement_can_be_named(tmp_path, given, written):
    (tmp_path / "opgen-0.1.0-py3-none-any.whl").write_bytes(b"")
    given, written = (s.format(tmp=tmp_path.resolve()) for s in (given, written))
    assert team.opgen_requirement(given) == written


@pytest.mark.parametrize("given", ["numpy", "no/such/folder", "", 'opgen; python_version > "3"'])
def test_a_bad_opgen_requirement_is_one_error_and_writes_nothing(tmp_path, given):
    result = run_opgen("init", str(tmp_path / "acme"), "--opgen-requirement", given)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: --opgen-requirement ")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("direct_url, expected", [
    ({"url": "https://example.com/opgen.git", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
     "opgen @ git+https://example.com/opgen.git@abc123"),
    ({"url": "file:///src/opgen", "dir_info": {}}, "opgen @ file:///src/opgen"),
    ({"url": "file:///dist/opgen-0.1.0-py3-none-any.whl", "archive_info": {}},
     "opgen @ file:///dist/opgen-0.1.0-py3-none-any.whl"),
    (None, "opgen==0.1.0"),  # from a package index
])
def test_the_default_requirement_is_where_opgen_was_installed_from(monkeypatch, direct_url,
                                                                   expected):
    class Installed:
        def read_text(self, name: str) -> str | None:
            assert name == "direct_url.json"
            return json.dumps(direct_url) if direct_url is not None else None

    monkeypatch.setattr(team, "_source_checkout", lambda: None)  # an installed opgen
    monkeypatch.setattr(team.importlib.metadata, "distribution", lambda name: Installed())
    assert team.default_opgen_requirement() == expected


def test_onboarding_docs_cover_adding_testing_benchmarking_and_review(tmp_path):
    team_dir = tmp_path / "acme"
    team.init(team_dir)
    english = (team_dir / "docs" / "onboarding.md").read_text()
    chinese = (team_dir / "docs" / "onboarding.zh.md").read_text()
    for needle in ("opgen new my_op --elementwise --dir ops", "opgen test ops/my_op",
                   "opgen bench ops/my_op", "**Streams**", "**Device guard**", "**Backward**",
                   "**Dtypes**", "**Bandwidth figures**", "built-in", "opgen update ."):
        assert needle in english, needle
    for needle in ("opgen new my_op --elementwise --dir ops", "opgen test ops/my_op",
                   "opgen bench ops/my_op", "代码评审清单", "stream", "设备守卫", "反向",
                   "数据类型", "带宽", "内置算子"):
        assert needle in chinese, needle


#: A benchmark figure: a ratio ("0.9 x copy", "0.9 倍"), or a range of them ("0.89 to 0.90").
_FIGURE = re.compile(r"\d+\.\d+\s*(?:x\b|×|倍)|\d+\.\d+\s*(?:to|到|-|–)\s*\d+\.\d+")


def test_templates_quote_no_benchmark_figures():
    """Figures go stale in every generated repository: templates link to docs/benchmarks.md."""
    quoted = []
    for path in sorted((ROOT / "templates").rglob("*")):
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if _FIGURE.search(line) or ("H200" in line and re.search(r"\d\.\d", line)):
                quoted.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert quoted == []


def test_the_team_repository_is_ruff_clean(tmp_path):
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    team.init(tmp_path / "acme")
    result = subprocess.run([ruff, "check", "."], cwd=tmp_path / "acme", capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_the_template_ships_the_relu6_example_spec():
    assert (TEMPLATE / "ops/relu6/relu6.yaml").read_bytes() == (RELU6 / "relu6.yaml").read_bytes()


def test_init_pretend_writes_nothing(tmp_path):
    result = run_opgen("init", str(tmp_path / "acme"), "--pretend")
    assert result.returncode == 0, result.stderr
    assert "would create" in result.stdout and "docs/onboarding.zh.md" in result.stdout
    assert list(tmp_path.iterdir()) == []  # neither the team repository nor the store


def test_init_pretend_refuses_what_the_init_refuses(tmp_path):
    """--pretend listed the files where the init itself then failed: an unknown --ref, and a
    folder below a file or behind a loop of links."""
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    cases = [((str(tmp_path / "acme"), "--ref", "v999"), 1, "copier: "),
             ((str(tmp_path / "notes.txt" / "acme"),), 2,
              f"error: {tmp_path / 'notes.txt'}: exists and is not a folder"),
             ((str(tmp_path / "loop"),), 2, f"error: {tmp_path / 'loop'}: a loop of symbolic "
                                            "links"),
             # root may write anywhere, os.access says, even in /proc: the init then failed on
             # its staging folder's name
             (("/proc/acme",), 2, "error: /proc/acme: /proc is not writable")]
    for args, code, start in cases:
        for pretend in ((), ("--pretend",)):
            result = run_opgen("init", *args, *pretend)
            assert result.returncode == code and result.stderr.count("\n") == 1, result.stderr
            assert result.stderr.startswith(start) or start in result.stderr, result.stderr
            assert "would create" not in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop", "notes.txt"]


def test_init_refuses_a_folder_that_is_not_empty(tmp_path):
    (tmp_path / "acme").mkdir()
    (tmp_path / "acme" / "notes.txt").write_text("mine")
    result = run_opgen("init", str(tmp_path / "acme"))
    assert result.returncode != 0
    assert result.stderr == (f"error: {tmp_path / 'acme'}: exists and is not empty; opgen init "
                             "makes a new team repository in a new or empty folder\n")
    assert tree_snapshot(tmp_path / "acme") == {"notes.txt": b"mine"}
    notes = tmp_path / "acme" / "notes.txt"
    result = run_opgen("init", str(notes))
    assert result.returncode != 0
    assert result.stderr == f"error: {notes}: exists and is not a folder\n"
    assert tree_snapshot(tmp_path / "acme") == {"notes.txt": b"mine"}


def test_init_rejects_a_bad_team_name(tmp_path):
    result = run_opgen("init", str(tmp_path / "acme"), "--name", "Vision Team")
    assert result.returncode == 2  # a wrong flag, refused before copier runs
    assert result.stderr == ("error: --name 'Vision Team': use lowercase letters, digits, '-' "
                             "and '_', starting with a letter\n")
    assert list(tmp_path.iterdir()) == []  # neither the team repository nor the store


def test_init_refuses_an_empty_team_name(tmp_path):
    result = run_opgen("init", str(tmp_path / "acme"), "--name", "")
    assert result.returncode == 2, result.stderr
    assert result.stderr == ("error: --name '': the team's name must not be empty; leave --name "
                             "out to name the team after its folder\n")
    assert list(tmp_path.iterdir()) == []  # neither the team repository nor the store


def test_init_from_a_folder_that_is_no_team_template_names_the_folder_given(tmp_path):
    """An op folder is no copier template, and a copier template that records no answers is no
    team template: either is one error naming --template as given, not a staging folder."""
    team_dir = tmp_path / "acme"
    op = run_opgen("init", str(team_dir), "--template", str(RELU6))
    assert op.returncode == 2 and op.stderr.count("\n") == 1, op.stderr
    assert op.stderr.startswith(f"error: --template {RELU6}: not a copier template (no "
                                "copier.yml)")

    other = tmp_path / "other-template"
    other.mkdir()
    (other / "copier.yml").write_text("greeting: {type: str, default: hi}\n")
    (other / "README.md").write_text("not a team repository\n")
    result = run_opgen("init", str(team_dir), "--template", str(other))
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: --template {other}: not a team template (it "
                                    "renders no .copier-answers.yml")
    assert ".opgen-init-" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-template"]

    missing = tmp_path / "no-such-template"
    for given, why in ((str(missing), "no such folder"), ("", "an empty path")):
        result = run_opgen("init", str(team_dir), "--template", given)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        flag = f"--template {given}" if given else "--template"
        assert result.stderr.startswith(f"error: {flag}: {why}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-template"]


def test_publish_tags_each_distinct_content_once(tmp_path):
    template = tmp_path / "template"
    shutil.copytree(TEMPLATE, template)
    first = team.publish(template)
    assert team.publish(template) == first
    (template / "NEW.md").write_text("new\n")
    second = team.publish(template)
    version = team.template_version(template)
    assert first != second and first.startswith(f"{version}+") and second.startswith(f"{version}+")
    store = Path(os.environ[team.STORE_ENV])
    assert git("status", "--porcelain", cwd=store) == ""  # copier would copy a dirty store
    assert sorted(git("tag", cwd=store).split()) == sorted([first, second])


def test_a_missing_version_is_restored_from_opgens_git_history(tmp_path, monkeypatch):
    checkout = tmp_path / "opgen-checkout"
    shutil.copytree(TEMPLATE, checkout / "templates" / "team")
    git("init", "-q", cwd=checkout)
    commit_all(checkout, "opgen with its team template")
    monkeypatch.setattr(team, "templates_root", lambda: checkout / "templates")
    tag = team.publish(store=str(tmp_path / "store-a"))  # made on one machine

    fresh = str(tmp_path / "store-b")  # another machine's store: empty
    team.restore_version(tag, store=fresh)
    assert git("rev-parse", f"{tag}^{{tree}}", cwd=Path(fresh)) == \
        git("rev-parse", "HEAD:templates/team", cwd=checkout)
    with pytest.raises(TeamError, match="neither the template store"):
        team.restore_version("1.0.0+0123456789ab", store=fresh)


@pytest.mark.parametrize("as_git_repository", [False, True])
def test_a_store_folder_opgen_did_not_make_is_refused_and_left_as_it_was(tmp_path,
                                                                         as_git_repository):
    """opgen replaces every file of its store: $OPGEN_TEMPLATE_STORE naming a folder of the
    user's is one error, and the folder (its git history too) is left as it was."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "notes.txt").write_text("precious\n")
    if as_git_repository:
        git("init", "-q", cwd=docs)
        commit_all(docs, "our notes")
    before = tree_snapshot(docs)
    history = git("log", "--all", "--format=%H", cwd=docs) if as_git_repository else ""

    result = run_opgen("init", str(tmp_path / "acme"), env={team.STORE_ENV: str(docs)})

    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: template store {docs}: is not empty and is not a "
                                    "store opgen made")
    assert tree_snapshot(docs) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs"]  # no lock file, no team folder
    if as_git_repository:
        assert git("log", "--all", "--format=%H", cwd=docs) == history
    with pytest.raises(TeamError, match="is not a store opgen made"):
        team.publish(store=str(docs))
    assert tree_snapshot(docs) == before


def test_a_store_made_before_the_marker_is_still_used(tmp_path):
    """A store an earlier opgen made has no marker; it is known by its commits, all opgen's."""
    store = Path(os.environ[team.STORE_ENV])
    first = team.publish()
    marker = store / ".git" / team.STORE_MARKER
    marker.unlink()  # as an earlier opgen left it

    template = tmp_path / "template"
    shutil.copytree(TEMPLATE, template)
    (template / "NEW.md").write_text("new\n")
    second = team.publish(template)

    assert marker.is_file()  # marked from now on
    assert sorted(git("tag", cwd=store).split()) == sorted([first, second])
    cut_short = tmp_path / "cut-short"  # an earlier opgen's first run, stopped after git init
    cut_short.mkdir()
    git("init", "-q", cwd=cut_short)
    assert team.publish(store=str(cut_short)) == first


# -- the team's CI -----------------------------------------------------------------------------


@pytest.mark.build
def test_the_ci_script_builds_and_tests_every_op_from_a_fresh_clone(tmp_path):
    team_dir = tmp_path / "acme"
    assert run_opgen("init", str(team_dir)).returncode == 0
    new = run_opgen("new", "my_op", "--elementwise", "--dir", str(team_dir / "ops"))
    assert new.returncode == 0, new.stderr
    commit_all(team_dir, "init, and my_op")
    clone = tmp_path / "clone"  # what CI checks out: only what the repository holds
    git("clone", "-q", str(team_dir), str(clone), cwd=tmp_path)

    result = ci(clone)

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "ci: 2 passed (my_op relu6), 0 failed" in result.stdout
    assert (clone / "ops" / "my_op" / "build").is_dir()
    assert git("status", "--porcelain", cwd=clone) == ""  # builds and caches are ignored


def test_the_ci_check_accepts_edits_but_not_a_stale_spec(tmp_path):
    team_dir = tmp_path / "acme"
    team.init(team_dir)
    relu6 = team_dir / "ops" / "relu6"
    assert ci(team_dir, "--check-only").returncode == 0

    edit(relu6 / "csrc" / "relu6.h", "    out = opgen::min_uniform(",
         "    // tuned by hand\n    out = opgen::min_uniform(")
    passed = ci(team_dir, "--check-only")
    assert passed.returncode == 0, passed.stdout + passed.stderr  # a hand edit is allowed

    edit(relu6 / "relu6.yaml", "default: 6.0", "default: 5.0")  # ... a forgotten regenerate not
    failed = ci(team_dir, "--check-only")
    assert failed.returncode == 1
    assert "not regenerated since relu6.yaml" in failed.stderr
    assert "ci: 0 passed, 1 failed (relu6)" in failed.stdout
    with pytest.raises(DriftError):
        api.generate(relu6 / "relu6.yaml", check=True, allow_edits=True)


# -- opgen update / copier update --------------------------------------------------------------


def test_update_from_v1_to_v2_keeps_local_changes(tmp_path):
    template = template_repo(tmp_path)
    team_dir = tmp_path / "acme"
    team.init(team_dir, template=str(template), ref="1.0.0")
    commit_all(team_dir, "init")
    change_locally(team_dir)
    commit_all(team_dir, "our changes")
    make_v2(template)
    commit_all(template, "template 2.0.0")
    git("tag", "2.0.0", cwd=template)

    before = tree_snapshot(team_dir)
    pretend = run_opgen("update", str(team_dir), "--pretend")
    assert pretend.returncode == 0, pretend.stderr
    assert "would   update" in pretend.stdout and "CONTRIBUTING.md" in pretend.stdout
    assert tree_snapshot(team_dir) == before

    result = run_opgen("update", str(team_dir))

    assert result.returncode == 0, result.stderr
    assert "at template version 2.0.0" in result.stdout
    assert_local_changes_kept_and_v2_applied(team_dir)
    assert yaml.safe_load((team_dir / ".copier-answers.yml").read_text())["_commit"] == "2.0.0"
    assert (team_dir / "ops" / "relu6" / "csrc" / "relu6.h").is_file()  # opgen's files untouched


def test_opgen_update_moves_to_this_opgens_template_and_plain_copier_update_works(
        tmp_path, monkeypatch):
    template = tmp_path / "template"  # stands for templates/team, one opgen release to the next
    shutil.copytree(TEMPLATE, template)
    monkeypatch.setattr(team, "template_dir", lambda: template)
    a, b = tmp_path / "a", tmp_path / "b"
    for team_dir in (a, b):
        team.init(team_dir)  # in this process: the CLI would see the real templates/team
        commit_all(team_dir, "init")
        change_locally(team_dir)
        commit_all(team_dir, "our changes")
    make_v2(template)

    updated = team.update(a)  # publishes the new template, then copier update
    assert updated.version.startswith("2.0.0+") and not updated.conflicts
    assert_local_changes_kept_and_v2_applied(a)

    import copier  # a teammate who only has copier: the answers name the store and the version

    copier.run_update(b, defaults=True, overwrite=True, quiet=True, skip_answered=True)
    assert_local_changes_kept_and_v2_applied(b)


def test_an_update_conflicting_with_a_local_change_is_listed_and_exits_1(tmp_path):
    template = template_repo(tmp_path)
    team_dir = tmp_path / "acme"
    team.init(team_dir, template=str(template), ref="1.0.0")
    commit_all(team_dir, "init")
    edit(team_dir / "ci" / "run.sh", 'echo "== $name"', 'echo "=== op: $name"')
    commit_all(team_dir, "our CI banner")
    make_v2(template)
    commit_all(template, "template 2.0.0")
    git("tag", "2.0.0", cwd=template)

    result = run_opgen("update", str(team_dir))

    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "conflicts with local changes in ci/run.sh" \
        in result.stderr
    text = (team_dir / "ci" / "run.sh").read_text()
    assert "<<<<<<< before updating" in text and 'echo "=== op: $name"' in text
    assert 'echo "== $name (template v2)"' in text
    assert (team_dir / "CONTRIBUTING.md").is_file()  # the rest of version 2 applied


def test_update_refuses_uncommitted_changes(tmp_path):
    team_dir = tmp_path / "acme"
    team.init(team_dir)
    commit_all(team_dir, "init")
    (team_dir / "README.md").write_text("mine, not committed\n")
    result = run_opgen("update", str(team_dir))
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "uncommitted changes" in result.stderr
    assert (team_dir / "README.md").read_text() == "mine, not committed\n"


def test_update_pretend_works_over_uncommitted_changes_and_writes_nothing(tmp_path):
    """Pretending writes nothing, so a dirty repository is fine: the preview starts from the
    files as they are, uncommitted changes included, and lists only what the update changes."""
    template = template_repo(tmp_path)
    team_dir = tmp_path / "acme"
    team.init(team_dir, template=str(template), ref="1.0.0")
    commit_all(team_dir, "init")
    make_v2(template)
    commit_all(template, "template 2.0.0")
    git("tag", "2.0.0", cwd=template)
    change_locally(team_dir)  # not committed
    (team_dir / "scratch.txt").write_text("untracked\n")
    git("add", "pyproject.toml", cwd=team_dir)  # one change staged, the others not
    before = tree_snapshot(team_dir)

    result = run_opgen("update", str(team_dir), "--pretend")

    assert result.returncode == 0, result.stderr
    assert "would be at template version 2.0.0" in result.stdout
    listed = {line.split()[-1] for line in result.stdout.splitlines() if "would" in line
              and "update" in line}
    assert {str(team_dir / r) for r in ("CONTRIBUTING.md", "ci/run.sh", "docs/onboarding.md")} \
        <= listed
    assert str(team_dir / "pyproject.toml") not in listed  # a local change, not the update's
    assert str(team_dir / "scratch.txt") not in listed
    assert tree_snapshot(team_dir) == before
    assert run_opgen("update", str(team_dir)).returncode == 1  # the real update still refuses


def test_update_outside_a_team_repository_is_one_error(tmp_path):
    result = run_opgen("update", str(tmp_path))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "not a team repository" in result.stderr


@pytest.mark.parametrize("content, why", [
    (b"\xff", "not UTF-8 text (byte 0)"),
    (b"a: " + b"[" * 10000 + b"\n", "not valid YAML (nested too deep)"),
    (b"_commit: !!int x\n", "not valid YAML (invalid literal"),
])
def test_a_damaged_answers_file_is_one_error_naming_it(tmp_path, content, why):
    answers = tmp_path / "acme" / ".copier-answers.yml"
    answers.parent.mkdir()
    answers.write_bytes(content)
    for args in ((), ("--pretend",)):
        result = run_opgen("update", str(answers.parent), *args)
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr[-2000:]
        assert result.stderr.startswith(f"error: {answers}: {why}")
    assert answers.read_bytes() == content


@pytest.mark.parametrize("src, why", [
    ("''", "no _src_path and _commit to update from"),
    ("/nonexistent/template", "_src_path /nonexistent/template: no such template folder on this "
                              "machine"),
])
def test_an_answers_file_naming_no_template_is_one_error(tmp_path, src, why):
    """An empty or missing ``_src_path`` made copier raise a TypeError (a 64-line traceback) or
    say "Local template must be a directory" without the path."""
    answers = tmp_path / "acme" / ".copier-answers.yml"
    answers.parent.mkdir()
    content = f"_commit: 0.1.0+abc\n_src_path: {src}\nteam_name: acme\n".encode()
    answers.write_bytes(content)
    for args in ((), ("--pretend",)):
        result = run_opgen("update", str(answers.parent), *args)
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr[-2000:]
        assert result.stderr.startswith(f"error: {answers}: {why}")
    assert answers.read_bytes() == content
