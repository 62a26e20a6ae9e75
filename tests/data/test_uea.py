"""The UEA .ts loader (checksums, the parser's errors) and the participants' label splits."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from secure_fedgraph.data.label_split import class_holders, split_cases
from secure_fedgraph.data.uea import UEA, load_uea, parse_ts
from secure_fedgraph.errors import ConfigError, DataNotFoundError
from tests.helpers import UEA_DIR, needs_uea

TS = """# a comment
@problemName tiny
@timeStamps false
@missing false
@classLabel true up down
@data
1,2,3:4,5,6:up
-1,0.5,2:7,8,9:down
"""


def test_parse_ts_reads_cases_channels_and_labels():
    parsed = parse_ts(TS)
    assert parsed.series.shape == (2, 2, 3) and parsed.series.dtype == np.float32
    np.testing.assert_array_equal(parsed.series[1, 0], [-1, 0.5, 2])
    assert parsed.labels.tolist() == [0, 1] and parsed.classes == ("up", "down")


@pytest.mark.parametrize("text,message", [
    (TS.replace("7,8,9:down", "7,8,9:sideways"), "line 8: label 'sideways'"),
    (TS.replace("7,8,9:down", "7,8:down"), "line 8: 2 dimensions of lengths"),
    (TS.replace("7,8,9", "7,x,9"), "line 8: a value is not a number"),
    (TS.replace("7,8,9", "7,nan,9"), "NaN"),
    (TS.replace("@missing false", "@missing true"), "@missing true is not supported"),
    (TS.replace("@data\n", ""), "expected a header line"),
])
def test_parse_ts_names_the_line_of_what_is_wrong(text, message):
    with pytest.raises(DataNotFoundError, match=message):
        parse_ts(text, source="tiny.ts")


def test_a_missing_file_is_named_with_where_it_was_looked_for(tmp_path):
    with pytest.raises(DataNotFoundError, match=r"missing file 'BasicMotions_TRAIN.ts'.*uea-basicmotions/SOURCE.md"):
        load_uea("basicmotions", tmp_path)


@needs_uea
def test_the_archives_load_and_a_changed_byte_is_refused(tmp_path):
    splits = load_uea("japanesevowels", UEA_DIR)
    assert splits.train_x.shape == (270, 12, 25) and splits.test_x.shape == (370, 12, 25)
    assert np.bincount(splits.train_y).tolist() == [30] * 9
    folder = tmp_path / "uea-basicmotions"
    shutil.copytree(UEA_DIR / "uea-basicmotions", folder)
    (folder / "BasicMotions_TEST.ts").chmod(0o644)
    data = bytearray((folder / "BasicMotions_TEST.ts").read_bytes())
    data[-3] = ord("9") if data[-3] != ord("9") else ord("8")
    (folder / "BasicMotions_TEST.ts").write_bytes(bytes(data))
    with pytest.raises(DataNotFoundError, match="has sha256"):
        load_uea("basicmotions", tmp_path)
    assert set(UEA) == {"basicmotions", "japanesevowels"}


@pytest.mark.parametrize("classes,parts", [(4, 2), (4, 3), (4, 5), (9, 2), (9, 5)])
def test_class_split_covers_every_class_and_skews_every_participant(classes, parts):
    labels = np.repeat(np.arange(classes), 10)
    held = split_cases(labels, parts=parts, how="class", n_classes=classes, rng=np.random.default_rng(0))
    assert sorted(np.concatenate(held).tolist()) == list(range(len(labels)))
    assert set(np.concatenate([labels[h] for h in held]).tolist()) == set(range(classes))
    assert all(len(set(labels[h].tolist())) < classes for h in held)
    assert [sorted(set(labels[h].tolist())) for h in held] == [sorted(c) for c in class_holders(classes, parts)]


def test_disjoint_and_iid_splits():
    labels = np.repeat(np.arange(9), 3)
    held = split_cases(labels, parts=3, how="disjoint", n_classes=9, rng=np.random.default_rng(0))
    assert [sorted(set(labels[h].tolist())) for h in held] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    iid = split_cases(labels, parts=4, how="iid", n_classes=9, rng=np.random.default_rng(0))
    assert sorted(len(h) for h in iid) == [6, 7, 7, 7]
    with pytest.raises(ConfigError, match="at most 9 participants"):
        split_cases(labels, parts=10, how="disjoint", n_classes=9, rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match="without a case"):
        split_cases(np.zeros(2, dtype=int), parts=3, how="iid", n_classes=1, rng=np.random.default_rng(0))
