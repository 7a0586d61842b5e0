"""The published serving results outside shared/ load, name public documents, and are all estimated."""

from __future__ import annotations

import csv

import pytest

from calculators.hardware.catalogue import find_gpu
from calculators.hardware.csv_rows import check_public_source
from calculators.models.library import resolve_model
from calculators.validation.serving_published import (
    PUBLISHED_PATH,
    PublishedServingError,
    load_published_rows,
    published_serving_table,
)


def test_the_file_loads_and_every_row_names_a_public_document():
    rows = load_published_rows()
    assert len(rows) == 14
    assert len({row.id for row in rows}) == len(rows)
    for row in rows:
        assert check_public_source(row.source) == row.source
        assert row.quote
        resolve_model(row.model)  # a bundled model
        find_gpu(row.gpu)  # a catalogue GPU


def test_every_row_is_estimated_in_its_own_reading():
    table = published_serving_table()
    assert [row.why_not for row in table] == [None] * 14
    # TensorRT-LLM v0.9.0 H200 FP8, Mistral 7B, batch 896, 128/128: 20,460 out tok/s/GPU as printed.
    assert table[0].measured == 20460
    assert table[0].reading == "output tokens/s per GPU"
    assert table[9].reading == "time to first token, ms"


def _write_one_row(tmp_path, **changes):
    with PUBLISHED_PATH.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        row = {**next(reader), **changes}
        columns = reader.fieldnames
    path = tmp_path / "published.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerow(row)
    return path


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"source": "internal spreadsheet"}, "source"),
        ({"value": "-5"}, "value"),
        ({"metric": "requests_per_s"}, "metric"),
        ({"weight_precision": "fp3"}, "weight_precision"),
    ],
)
def test_a_bad_row_is_refused_in_one_line_naming_the_field(tmp_path, changes, words):
    with pytest.raises(PublishedServingError) as caught:
        load_published_rows(_write_one_row(tmp_path, **changes))
    message = str(caught.value)
    assert "\n" not in message
    assert "line 2" in message and words in message
