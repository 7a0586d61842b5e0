"""AppTest of the Time and cost page: ranked options, spot, downloads, bad price sheets."""

import re

import pandas as pd
import pytest

from calculators.cost.options import cost_options
from calculators.cost.prices import load_prices
from calculators.hardware.catalogue import load_gpu_catalogue
from calculators.models.presets import get_preset
from calculators.timing.settings import TimeSettings
from calculators.workload.training import TrainingSettings
from tests.apptest_helpers import open_app
from tests.test_cost import option, price
from ui.cost_table import ranked_rows
from ui.memo import FrozenKey


def test_the_ranked_table_matches_the_calculator_and_is_cheapest_first():
    app = open_cost(model="gpt2", tokens_b="2")
    table = app.dataframe[0].value
    assert list(table["usd"]) == sorted(table["usd"])
    expected = cost_options(
        get_preset("gpt2"), TrainingSettings(), TimeSettings(dataset_tokens=2e9), load_prices(), load_gpu_catalogue()
    )
    on_demand = table[table["pricing"] == "on demand"]
    assert on_demand["usd"].iloc[0] == pytest.approx(min(o.usd_on_demand for o in expected))
    assert {"on demand", "spot"} <= set(table["pricing"])


def test_the_gpus_no_rental_row_prices_are_named_with_why():
    app = open_cost(model="gpt2", tokens_b="2")
    (uncosted,) = [e for e in app.expander if e.label.startswith("Not costed")]
    assert uncosted.label == "Not costed: 4 GPUs without a rental price"
    text = uncosted.markdown[0].value
    assert "- MI250X-128GB: no provider in the price sheet rents it; owned, it costs its purchase price" in text
    assert "- Trainium3-144GB: AWS offers Trn3 as UltraServers of 64 or 144 Trainium3 chips" in text


def test_only_fitting_gpus_are_listed_by_default():
    app = open_cost(model="llama-3.1-8b", zero="3", gpus="8", ckpt="full")
    table = app.dataframe[0].value
    assert table["fits"].all()
    assert "RTX-4090-24GB" not in set(table["gpu"])


def test_a_discount_lowers_every_price():
    app = open_cost(model="gpt2")
    before = app.dataframe[0].value["usd"].min()
    app.number_input(key="cost_discount_pct").set_value(20.0).run()
    assert app.dataframe[0].value["usd"].min() == pytest.approx(0.8 * before)
    assert app.query_params["discount"] == "20"


def test_no_interruptions_make_spot_cost_the_plain_spot_price():
    app = open_cost(model="gpt2", rate_set="1", rate="0")
    table = app.dataframe[0].value
    spot = table[table["pricing"] == "spot"].iloc[0]
    on_demand = table[(table["pricing"] == "on demand") & (table["instance"] == spot["instance"])].iloc[0]
    assert spot["hours"] == pytest.approx(on_demand["hours"])


def test_downloads_are_offered_and_read_back():
    app = open_cost(model="gpt2")
    labels = [button.label for button in app.get("download_button")]
    assert labels == ["Price-sheet template (CSV)", "Download CSV", "Download Excel"]


def test_a_malformed_price_sheet_is_explained_and_the_page_keeps_working():
    app = open_cost(model="gpt2")
    bad = (
        b"provider,instance_type,gpu,gpu_count,region,on_demand_usd_per_hour,source,as_of\n"
        b"Me,box,H100-SXM5-80GB,8,eu,-3,me,2026-11-01\n"
    )
    app.file_uploader(key="price_upload").set_value(("mine.csv", bad, "text/csv")).run()
    assert not app.exception
    assert any("mine.csv row 1" in e.value and "on_demand_usd_per_hour" in e.value for e in app.error)
    assert len(app.dataframe[0].value) > 10


def test_an_uploaded_price_sheet_can_be_used_alone():
    app = open_cost(model="gpt2")
    sheet = (
        b"provider,instance_type,gpu,gpu_count,region,on_demand_usd_per_hour,source,as_of\n"
        b"OurDC,rack-1,H100-SXM5-80GB,8,home,10,contract 2026,2026-11-01\n"
    )
    app.file_uploader(key="price_upload").set_value(("ours.csv", sheet, "text/csv")).run()
    app.checkbox(key="cost_only_mine").check().run()
    table = app.dataframe[0].value
    assert set(table["provider"]) == {"OurDC"} and list(table["pricing"]) == ["on demand"]
    # 1 instance x $10/h x hours
    assert table["usd"].iloc[0] == pytest.approx(10 * table["hours"].iloc[0])


def test_excel_export_reads_back_with_pandas():
    import io

    from calculators.cost.exports import options_excel_bytes

    options = cost_options(
        get_preset("gpt2"), TrainingSettings(), TimeSettings(dataset_tokens=1e9), load_prices(), load_gpu_catalogue()
    )
    sheets = pd.read_excel(io.BytesIO(options_excel_bytes(options, {"model": "gpt2"}, {}, ["f"])), sheet_name=None)
    assert set(sheets) == {"options", "assumptions"} and len(sheets["options"]) == len(options)


def test_spot_that_never_finishes_is_explained_in_words_never_inf():
    # 100 interruptions per instance-hour and 24 h restarts: lambda x R = 2400, far above 1, for every row.
    app = open_cost(model="gpt2", rate_set="1", rate="100", restart_min="1440.0")
    table = app.dataframe[0].value
    assert set(table["pricing"]) == {"on demand"}
    notes = set(table["note"]) - {""}
    assert notes and all(
        note.startswith("not worth running on spot: an interruption comes every 36 s on average (100 per hour)")
        for note in notes
    )
    texts = [element.value for kind in ("markdown", "warning", "caption", "info") for element in app.get(kind)]
    texts += [str(cell) for cell in table.to_numpy().ravel()]
    assert not [text for text in texts if re.search(r"\b(inf|nan)\b", str(text), re.IGNORECASE)]
    assert any("No option is worth running on spot" in text for text in texts)


def test_dollar_signs_in_markdown_are_escaped():
    app = open_cost(model="gpt2")
    headline = next(m.value for m in app.markdown if m.value.startswith("Cheapest on demand"))
    assert "\\$" in headline and not re.search(r"(?<!\\)\$", headline)


def test_a_workload_too_big_for_the_sidebar_gpu_is_warned_about_and_the_rest_left_out():
    # Llama-3.1-8B on one GPU in bf16-mixed with AdamW: 8.03e9 parameters x 16 bytes (bf16 weights and
    # gradients, fp32 master copy and two Adam states) = 119.7 GiB before any activation; an H100 has 80.
    app = open_cost(model="llama-3.1-8b", gpu="H100-SXM5-80GB")
    (warning,) = [w.value for w in app.warning if w.value.startswith("Does not fit")]
    found = re.fullmatch(
        r"Does not fit on 1 x H100-SXM5-80GB: the workload needs ([\d.]+) GiB per GPU, the GPU has 80 GiB; "
        r"priced options below only include GPUs it fits\.",
        warning,
    )
    assert found and float(found.group(1)) > 119.7
    table = app.dataframe[0].value
    assert table["fits"].all() and "H100-SXM5-80GB" not in set(table["gpu"])
    # set apart in a section that starts closed and is drawn only once opened (open_app opens it, as a reader would)
    closed = open_app("app_pages/cost.py", open_sections=False, model="llama-3.1-8b", gpu="H100-SXM5-80GB")
    (left_out,) = [e for e in closed.expander if e.label.startswith("Left out:")]
    assert left_out.proto.expanded is False
    assert not [frame for frame in closed.dataframe if "reason" in frame.value.columns]  # the list is not drawn
    reasons = app.dataframe[1].value
    # the closed title counts the options set apart (not priced until opened); opened, they are all listed
    assert left_out.label == f"Left out: {len(reasons)} options that do not fit or cannot run" and len(reasons) > 50
    h100 = reasons[reasons["gpu"] == "H100-SXM5-80GB"]["reason"]
    assert len(h100) > 0
    for reason in h100:
        stated = re.fullmatch(
            r"does not fit: the workload needs ([\d.]+) GiB per GPU, H100-SXM5-80GB has 80 GB", reason
        )
        assert stated and stated.group(1) == found.group(1)
    inferentia = reasons[reasons["gpu"] == "Inferentia2-32GB"]["reason"]
    assert all("built for serving" in reason for reason in inferentia)


def test_the_table_ranks_what_fits_first_then_the_cheapest_on_demand_or_spot():
    # A ($10) does not fit: last. B fits, on demand $50 and on spot $20; C was not checked ($30): it counts
    # as fitting. So B's spot row, C, B on demand, then A.
    options = [
        option(1.0, 10.0, gpu="A", fits_in_memory=False),
        option(2.0, 50.0, gpu="B", fits_in_memory=True, usd_spot_expected=20.0, spot_hours_expected=2.5),
        option(1.5, 30.0, gpu="C"),
    ]
    table = ranked_rows(options)
    assert list(zip(table["gpu"], table["pricing"], table["usd"], strict=True)) == [
        ("B", "spot", 20.0),
        ("C", "on demand", 30.0),
        ("B", "on demand", 50.0),
        ("A", "on demand", 10.0),
    ]
    assert list(table.index) == [0, 1, 2, 3] and list(table["hours"]) == [2.5, 1.5, 2.0, 1.0]
    assert str(table["usd"].dtype) == "float64"


def test_the_price_rows_key_the_options_by_every_field():
    """The page keys what it keeps on the price rows and GPUs themselves (FrozenKey), not their JSON."""
    rows = [price(), price(instance_type="other")]
    same = [price(), price(instance_type="other")]  # other objects, equal field by field
    assert FrozenKey(rows) == FrozenKey(same) and hash(FrozenKey(rows)) == hash(FrozenKey(same))
    assert FrozenKey(rows) != FrozenKey([price(), price(instance_type="other", on_demand_usd_per_hour=2.7)])
    assert FrozenKey(rows) != FrozenKey(rows[:1]) and FrozenKey(rows) != FrozenKey(reversed(rows))
    with pytest.raises(TypeError):  # a model that can change in place has no hash: never a key
        FrozenKey([TimeSettings(dataset_tokens=1e9)])


def test_unticking_fits_only_shows_what_does_not_fit_but_never_what_cannot_run():
    app = open_cost(model="llama-3.1-8b", fits_only="0")
    table = app.dataframe[0].value
    assert not table["fits"].all() and "H100-SXM5-80GB" in set(table["gpu"])
    assert "Inferentia2-32GB" not in set(table["gpu"])
    assert set(app.dataframe[1].value["gpu"]) == {"Inferentia2-32GB"}


def test_qlora_leaves_out_tpus_and_aws_chips_with_the_reason():
    app = open_cost(model="gpt2", mode="finetune-qlora", gpu="TPU-v5e")
    assert [w.value for w in app.warning] == [
        "TPU-v5e cannot run QLoRA: its 4-bit NF4 base needs bitsandbytes, which has no Google TPU (XLA) backend. "
        "Priced options below leave it out."
    ]
    ranked_gpus = set(app.dataframe[0].value["gpu"])
    assert not [gpu for gpu in ranked_gpus if gpu.startswith(("TPU", "Trainium", "Inferentia"))]
    reasons = app.dataframe[1].value.drop_duplicates("gpu").set_index("gpu")["reason"]
    assert reasons["TPU-v6e"] == (
        "TPU-v6e cannot run QLoRA: its 4-bit NF4 base needs bitsandbytes, which has no Google TPU (XLA) backend"
    )
    assert reasons["Inferentia2-32GB"] == (
        "Inferentia2-32GB is built for serving only: AWS documents training on Trainium, not on Inferentia"
    )


def open_cost(**query: str):
    return open_app("app_pages/cost.py", **query)


def test_the_throughput_and_interruption_settings_are_summed_up_in_their_sections_title():
    """Closed, the section shows only its title: it must say what the seven settings inside assume."""
    app = open_app("app_pages/cost.py", open_sections=False, model="gpt2")
    titles = [expander.label for expander in app.expander]
    assert (
        "Throughput and interruptions: each GPU's own utilisation, 400 Gb/s between nodes, 100% of data-parallel "
        "traffic hidden; checkpoint write 3 min, restart 15 min, the price sheet's interruption rate"
    ) in titles
    assert not any(number.key == "cost_utilisation_pct" for number in app.number_input)  # closed: not drawn

    app = open_cost(model="gpt2", mfu="45", overlap="50", ckpt_min="6")
    app.checkbox(key="cost_override_rate").check().run()
    title = next(e.label for e in app.expander if e.label.startswith("Throughput and interruptions"))
    assert title == (
        "Throughput and interruptions: 45% of dense peak, 400 Gb/s between nodes, 50% of data-parallel traffic "
        "hidden; checkpoint write 6 min, restart 15 min, 0.5 interruptions per instance-hour"
    )
