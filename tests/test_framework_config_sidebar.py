"""The sidebar's framework-config upload: the file's settings become the sidebar's once, unknown keys are
named, a bad file changes nothing. AppTest cannot upload a file, so the upload's callback work
(apply_stack_file) is driven directly on the app's session state."""

from __future__ import annotations

import pytest

from tests.apptest_helpers import open_app
from tests.test_framework_config import ACCELERATE_FSDP, AXOLOTL_QLORA, WRONG_TYPE_IDS, WRONG_TYPES
from ui.state import VALUE_PREFIX
from ui.workload import STACK_REPORT_KEY, apply_stack_file


def test_an_axolotl_file_sets_the_sidebar_values_it_gives():
    session = {VALUE_PREFIX + "gpu": "A100-SXM4-40GB", VALUE_PREFIX + "micro_batch": 7}
    report = apply_stack_file(AXOLOTL_QLORA.encode(), "qlora.yml", session)
    assert report.error is None
    assert report.warning == "qlora.yml: unknown axolotl keys ignored: learnig_rate; the other settings were read"
    assert session[VALUE_PREFIX + "mode"] == "finetune-qlora"
    assert session[VALUE_PREFIX + "micro_batch"] == 2 and session[VALUE_PREFIX + "seq_len"] == 4096
    assert session[VALUE_PREFIX + "precision"] == "amp-bf16" and session[VALUE_PREFIX + "optimizer"] == "paged-adamw"
    assert session[VALUE_PREFIX + "lora_rank"] == 32 and session[VALUE_PREFIX + "framework"] == "axolotl"
    assert session[VALUE_PREFIX + "gpu"] == "A100-SXM4-40GB"  # what the file does not give is kept
    assert "Micro-batch 2" in report.applied and "Mode finetune-qlora" in report.applied


def test_torch_compile_goes_to_the_shared_compile_switch():
    session: dict = {}
    apply_stack_file(b"base_model: m\ntorch_compile: true\n", "a.yml", session)
    assert session[VALUE_PREFIX + "cost_compile"] is True


def test_a_bad_file_changes_nothing_and_says_why():
    session = {VALUE_PREFIX + "micro_batch": 7}
    report = apply_stack_file(b"distributed_type: XLA\nnum_processes: 8\n", "a.yaml", session)
    assert report.error == "distributed_type: 'XLA' is not one the engine models (NO, MULTI_GPU, FSDP, DEEPSPEED)"
    assert session == {VALUE_PREFIX + "micro_batch": 7}
    assert apply_stack_file(b"\xff\xfe", "a.json", session).error == "a.json: not a text file"


def _applied(app, text: str, name: str):
    report = apply_stack_file(text.encode(), name, app.session_state)
    app.session_state[STACK_REPORT_KEY] = report
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def test_the_sidebar_shows_what_the_file_set_and_later_edits_win():
    app = _applied(open_app(), ACCELERATE_FSDP, "default_config.yaml")
    assert app.number_input(key="gpus").value == 16
    assert app.selectbox(key="zero").value == 2 and app.selectbox(key="precision").value == "bf16-mixed"
    assert app.selectbox(key="checkpointing").value == "full"
    assert any(c.value.startswith("default_config.yaml set: ") and "Data-parallel GPUs 16" in c.value
               for c in app.caption)  # fmt: skip
    assert any("fsdp_config.fsdp_colour" in warning.value for warning in app.warning)
    app.number_input(key="gpus").set_value(4).run()
    assert app.number_input(key="gpus").value == 4  # applied once, not on every run
    assert app.query_params["gpus"] == "4" and app.query_params["fw"] == "hf-trainer"


def test_a_bad_file_is_an_error_in_the_sidebar_not_a_traceback():
    app = open_app()
    report = apply_stack_file(b"base_model: m\noptimizer: lion_8bit\n", "bad.yml", app.session_state)
    app.session_state[STACK_REPORT_KEY] = report
    app.run()
    assert not app.exception
    assert any(e.value.startswith("optimizer: 'lion_8bit' is not one") and "Nothing was changed" in e.value
               for e in app.error)  # fmt: skip


class _Upload:
    name = "qlora.yml"

    def getvalue(self) -> bytes:
        return AXOLOTL_QLORA.encode()


def test_the_upload_callback_keeps_the_file_and_applies_it(monkeypatch):
    import streamlit

    import ui.workload

    session: dict = {"stack_config_upload": _Upload()}
    monkeypatch.setattr(streamlit, "session_state", session)
    ui.workload._apply_stack_upload()
    assert session[ui.workload.STACK_FILE_KEY] == ("qlora.yml", AXOLOTL_QLORA.encode())
    assert session[VALUE_PREFIX + "micro_batch"] == 2 and session[STACK_REPORT_KEY].name == "qlora.yml"
    session["stack_config_upload"] = None  # the file removed: its report goes, the values stay
    ui.workload._apply_stack_upload()
    assert STACK_REPORT_KEY not in session and session[VALUE_PREFIX + "micro_batch"] == 2


@pytest.mark.parametrize(("text", "name", "message"), WRONG_TYPES, ids=WRONG_TYPE_IDS)
def test_an_upload_with_a_field_of_the_wrong_type_changes_nothing_and_names_it(text, name, message):
    session = {VALUE_PREFIX + "micro_batch": 7}
    report = apply_stack_file(text.encode(), name, session)
    assert (report.error, report.applied) == (message, [])
    assert session == {VALUE_PREFIX + "micro_batch": 7}


def test_the_sidebar_shows_a_wrong_type_as_one_error_not_an_exception():
    app = open_app()
    text = b"base_model: m\nadapter: lora\nlora_target_modules: [[q_proj], v_proj]\n"
    app.session_state[STACK_REPORT_KEY] = apply_stack_file(text, "lora.yml", app.session_state)
    app.run()
    assert not app.exception
    assert [e.value for e in app.error if "lora_target_modules" in e.value] == [
        "lora_target_modules: expected a list of names, got [['q_proj'], 'v_proj']. Nothing was changed."
    ]
