"""ui.layout.light_table's Markdown: one table per frame, every cell the text it shows."""

import math

import pandas as pd

from ui.layout import markdown_table, table_cell


def test_a_frame_with_its_index_is_one_markdown_table_with_numbers_aligned_right():
    frame = pd.DataFrame(
        {"GPU": ["H100", "A100"], "TFLOPS": [989.0, 312.5], "count": [8, 4]},
        index=pd.Index(["a", "b"], name="id"),
    )
    assert markdown_table(frame) == (
        "| id | GPU | TFLOPS | count |\n|---|---|---:|---:|\n| a | H100 | 989 | 8 |\n| b | A100 | 312.5 | 4 |"
    )


def test_without_the_index_and_with_a_nameless_one():
    frame = pd.DataFrame({"change": ["ZeRO-3 over 4 GPUs"], "fits": ["yes"]}, index=["fewest GPUs"])
    assert markdown_table(frame, hide_index=True) == "| change | fits |\n|---|---|\n| ZeRO-3 over 4 GPUs | yes |"
    # a row label stays on one line (no-break spaces); the cells wrap
    assert markdown_table(frame).splitlines() == [
        "|  | change | fits |",
        "|---|---|---|",
        "| fewest\u00a0GPUs | ZeRO-3 over 4 GPUs | yes |",
    ]


def test_cells_read_as_their_text():
    assert table_cell("-") == "\\-"  # a lone "-" is a list item in Markdown, drawn as a bullet
    assert table_cell(None) == "\\-" and table_cell(math.nan) == "\\-"
    assert table_cell("tp | pp") == "tp \\| pp"  # a pipe would end the cell
    assert table_cell("two\nlines") == "two lines"  # a row is one line
    assert table_cell(0.8100) == "0.81" and table_cell(1_234_567.0) == "1234567" and table_cell(2.0) == "2"
    assert table_cell(1 / 3) == "0.3333"
