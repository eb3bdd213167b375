"""opgen/deploy.py without a build: reading a saved model's custom ops, and the errors."""

from __future__ import annotations

import json

import pytest

import opgen
from opgen import deploy
from opgen.errors import DeployError, UsageError


def _pir_model(tmp_path, ops):
    """A Paddle 3 ``.json`` program (the shape paddle.jit.save writes) calling ``ops``."""
    inner = {"#": "1.if", "regions": [{"blocks": [{"ops": [{"#": op} for op in ops[1:]]}]}]}
    program = {"base_code": {"magic": "pir", "version": 4},
               "program": {"regions": [{"blocks": [{"ops": [
                   {"#": "p"}, {"#": "1.data"}, {"#": ops[0]}, inner, {"#": "1.fetch"}]}]}]}}
    (tmp_path / "model.json").write_text(json.dumps(program))
    return tmp_path / "model"


def test_custom_ops_are_read_from_a_paddle3_program_nested_blocks_included(tmp_path):
    model = _pir_model(tmp_path, ["3.custom_relu6", "3.custom_bias_gelu", "1.matmul"])
    assert deploy.saved_op_names(model) == ["custom_bias_gelu", "custom_relu6"]
    assert deploy.saved_op_names(tmp_path / "model.json") == ["custom_bias_gelu", "custom_relu6"]


def test_an_unregistered_op_is_named_with_how_to_register_it(tmp_path):
    model = _pir_model(tmp_path, ["3.custom_never_registered_op"])
    with pytest.raises(DeployError, match=r"needs custom op custom_never_registered_op, not "
                                          r"registered in this process; .*opgen\.register"):
        opgen.check_model(model)
    with pytest.raises(DeployError, match="custom_never_registered_op"):
        opgen.load_model(model)  # before paddle.jit.load, which would crash


def test_a_model_of_builtin_ops_passes_the_check(tmp_path):
    opgen.check_model(_pir_model(tmp_path, ["1.relu", "1.matmul"]))


def test_a_missing_or_broken_model_is_a_clear_error(tmp_path):
    with pytest.raises(DeployError, match=r"no saved model there \(expected .*model\.json"):
        opgen.check_model(tmp_path / "model")
    (tmp_path / "model.json").write_text("{not json")
    with pytest.raises(DeployError, match="not a Paddle program saved by paddle.jit.save"):
        opgen.check_model(tmp_path / "model")


def test_register_refuses_what_is_not_a_library(tmp_path):
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(UsageError, match="not an op folder, a wheel"):
        opgen.register(tmp_path / "notes.txt")
    with pytest.raises(UsageError, match="no such op folder, file or importable module"):
        opgen.register("no_such_op_module_anywhere")
    (tmp_path / "broken.whl").write_bytes(b"not a zip")
    with pytest.raises(UsageError, match="cannot read the wheel"):
        opgen.register(tmp_path / "broken.whl")
