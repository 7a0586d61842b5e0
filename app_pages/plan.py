"""Plan a run: the cheapest or fastest way to train the sidebar's model on N tokens, by a
deadline, within a budget."""

import streamlit as st

from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.plan.exports import plans_csv_bytes, plans_excel_bytes, plans_table
from calculators.plan.figures import hours_range_text, hours_text, usd_range_text, usd_text
from calculators.plan.launch import launch_files
from ui import state
from ui.calibration_state import measured_matmul_fraction
from ui.cost_inputs import dataset_controls, kept_ownership, kept_prices
from ui.layout import EMPTY_CELL, wrapping_row
from ui.messages import in_words
from ui.plan_view import (
    RESULT_KEY,
    apply_plan,
    batch_text,
    calibration_caption,
    front_figure,
    plan_label,
    plan_request,
    plans_display,
    price_basis,
    run_search,
    share_query,
)
from ui.serve_plan_view import serve_plan_section
from ui.table_labels import column_config
from ui.user_gpus import user_gpus
from ui.vision_cost_view import vision_plan_section
from ui.workload import require_training

# what each launch file is, for a reader who has not met the framework
LAUNCH_FILE_TEXT = {
    "deepspeed_config.json": "DeepSpeed configuration (ZeRO stage, batch, precision)",
    "torchtune_overrides.txt": "torchtune command-line overrides",
    "torchtitan_fragment.toml": "part of a torchtitan job file",
    "accelerate_fsdp.yaml": "Hugging Face Accelerate config for FSDP (accelerate launch --config_file)",
    "launch_note.txt": "how to run this plan on its accelerator, in words",
}

st.title("Plan a run")
workload = st.session_state["workload"]
if workload.ready and workload.is_inference:  # Serve: the cheapest way to serve a request rate at latency targets
    serve_plan_section(workload, list(load_gpu_catalogue()) + user_gpus(), kept_prices())
    st.stop()
if workload.is_vision:  # an image model of the vision library: GPUs, counts, ZeRO stage, epochs
    vision_plan_section(workload)
    st.stop()
st.caption(
    "What to rent (or buy), how many, with which settings, how long and for how much: every GPU, GPU count, "
    "layout, provider and pricing is searched; only layouts that fit in memory and whose software runs on the "
    "GPU are kept. The model, sequence length, precision and optimizer come from the sidebar."
)
require_training(workload, "Plans", "plan a run")

spec, settings = workload.spec, workload.settings
catalogue = list(load_gpu_catalogue()) + user_gpus()
gpu_names = {gpu.name for gpu in catalogue}
prices = kept_prices()
# the run's dataset and epochs: the same kept values as on Time and cost
columns = st.columns(3)
dataset_controls(columns[1], columns[2], unit_column=columns[0])
columns = st.columns(4)
state.number(columns[0], "plan_deadline_hours")
state.number(columns[1], "plan_budget_usd")
state.number(columns[2], "plan_max_gpus")
state.number(columns[3], "plan_global_batch")
state.multiselect(st, "plan_providers", sorted({price.provider for price in prices}))
switches = wrapping_row()  # each as wide as its label, wrapping on a narrow window rather than cut
state.checkbox(switches, "plan_spot")
state.checkbox(switches, "plan_owned")
state.checkbox(switches, "plan_pessimistic")
st.caption(
    "The step's assumptions (network, overlap, kernels, compiler), checkpoint and restart times, the discount, "
    "interruption rate and price sheet, and the cost of owning GPUs are the Time and cost page's: set them there."
)

request, time_settings, problem = plan_request(workload.mode, settings.seq_len)
ownership, ownership_problem = kept_ownership()
problem = problem or ownership_problem
if problem:
    st.error(f"Check the plan's settings: {problem}")
    st.stop()
calibrated = measured_matmul_fraction(settings.precision)
if caption := calibration_caption(calibrated):
    st.caption(caption)
asked = (
    spec.model_dump_json(),
    settings.model_dump_json(),
    request.model_dump_json(),
    time_settings.model_dump_json(),
    ownership.model_dump_json(),
    hash(tuple(price.model_dump_json() for price in prices)),
    len(catalogue),
    tuple(sorted(calibrated.items())),
)
kept = st.session_state.get(RESULT_KEY)
if kept is not None and kept[0] != asked:
    # the ask changed since the search: its plans, and the plan chosen among them, are no longer the answer
    st.session_state.pop(RESULT_KEY)
    state.forget("plan_chosen")
    kept = None
pressed = st.button("Find plans", type="primary")
linked = kept is None and state.value("plan_chosen") > 0  # a link names a plan: search as its sender did
if pressed or linked:
    try:
        result = run_search(spec, settings, request, catalogue, prices, time_settings, ownership, calibrated)
    except ValueError as error:
        st.error(in_words(error))
        st.stop()
    st.session_state[RESULT_KEY] = kept = (asked, result)
    if pressed:
        state.forget("plan_chosen")  # a new search starts at its cheapest plan within the limits
if kept is None:
    st.info("Press **Find plans** to search.")
    st.stop()
result = kept[1]

st.caption(
    f"{result.searched:,} configurations examined in {result.seconds:.2f} s; {len(result.plans)} plans on the front."
)
for message in result.problems:
    st.warning(message)
if result.unpriced:
    st.info("Not costed, so not in the plans:\n\n" + "\n".join(f"- {line}" for line in result.unpriced))
best = result.best_under_deadline
fastest = result.best_under_budget
if best is not None:
    ranges = f"range {hours_range_text(best.hours_range)}, {usd_range_text(best.usd_range)}"
    st.success(
        f"Cheapest within the limits: **{best.gpus} x {best.gpu}** on {best.provider} {best.instance_type}, "
        f"ZeRO-{best.zero}, {batch_text(best)}, "
        f"checkpointing {best.checkpointing}: {hours_text(best.hours)}, {usd_text(best.usd)} "
        f"({ranges}; {price_basis(best)})".replace("$", "\\$")
    )
if fastest is not None and fastest != best:
    st.success(
        f"Fastest within the limits: **{fastest.gpus} x {fastest.gpu}** on {fastest.provider}: "
        f"{hours_text(fastest.hours)}, {usd_text(fastest.usd)} ({price_basis(fastest)})".replace("$", "\\$")
    )
if not result.plans:
    st.stop()

labels = [plan_label(number, plan) for number, plan in enumerate(result.plans, start=1)]
numbers = list(range(1, len(result.plans) + 1))
best_number = result.plans.index(best) + 1 if best in result.plans else 1
if state.value("plan_chosen") not in numbers:
    if state.value("plan_chosen") > 0:
        st.warning(
            f"Plan {state.value('plan_chosen')} from the link is not on this front of {len(numbers)} plans; "
            f"showing plan {best_number}, the cheapest within the limits.",
            icon=":material/warning:",
        )
    state.set_value("plan_chosen", best_number)
chosen_number = state.widget(
    st.selectbox,
    "plan_chosen",
    "Plan",
    labels,
    to_widget=lambda number: labels[number - 1],
    from_widget=lambda label: labels.index(label) + 1,
)
chosen = result.plans[chosen_number - 1]
st.plotly_chart(front_figure(result.plans, chosen), width="stretch")
st.markdown(f"**Why this plan:** {chosen.reason}".replace("$", "\\$"))
st.caption(
    f"Plan {chosen_number}: {hours_text(chosen.hours)}, {usd_text(chosen.usd)} ({price_basis(chosen)}). The Time and "
    "cost page heads with the hours on demand and lists spot's expected hours beside them."
)
actions = wrapping_row()  # buttons as wide as their labels, wrapping on a narrow window rather than cut
if actions.button("Open on the Memory page", key="plan_open_memory"):
    apply_plan(chosen, gpu_names)
    st.switch_page("app_pages/memory.py")
if actions.button("Open on the Time and cost page", key="plan_open_cost"):
    apply_plan(chosen, gpu_names)
    st.switch_page("app_pages/cost.py")
query = share_query(chosen, gpu_names, dict(st.query_params))
actions.markdown(f"Links: [Memory](./memory?{query}) · [Time and cost](./cost?{query})", width="content")

st.dataframe(
    plans_display(plans_table(result.plans)),
    hide_index=True,
    width="stretch",
    # not "%.1f" / "$%.0f" for hours and dollars: a plan of minutes or cents must not read 0.0 h or $0
    column_config=column_config(
        {"hours": "localized", "usd": "dollar", "peak GiB": "%.1f", "headroom GiB": "%.1f", "step s": "%.3f"}
    ),
    placeholder=EMPTY_CELL,
)
request_row = {"model": spec.name} | request.model_dump(mode="json")
downloads = wrapping_row()
# built when clicked, not on every rerun
downloads.download_button(
    "Plans (CSV)", lambda: plans_csv_bytes(result.plans), "plans.csv", "text/csv", on_click="ignore"
)
downloads.download_button(
    "Plans, request, assumptions and price dates (Excel)",
    lambda: plans_excel_bytes(result, request_row),
    "plans.xlsx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    on_click="ignore",
)
st.subheader("Launch settings for the chosen plan")
chosen_files = launch_files(chosen)  # only the stacks that run on the chosen plan's accelerator
st.markdown(
    "Files to start the chosen plan from, with its layout (parallelism, ZeRO stage, batch, checkpointing) "
    "filled in; check them against your own setup:\n"
    + "\n".join(f"- `{name}`: {LAUNCH_FILE_TEXT.get(name, 'settings for this plan')}" for name in chosen_files)
)
launch = st.columns(len(chosen_files))
for column, (name, text) in zip(launch, chosen_files.items(), strict=True):
    column.download_button(name, text.encode("utf-8"), name, "text/plain", key=f"launch_{name}", wrap=True)
with st.expander("Assumptions"):
    st.markdown("\n".join(f"- {line}" for line in result.assumptions))  # one element, not one a line
