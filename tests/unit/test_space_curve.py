"""Clustering's layout orders against Apache Hudi's own code.

The expected keys and orders below were produced by running Apache Hudi's `BinaryUtil`
(`intTo8Byte`, `longTo8Byte`, `doubleTo8Byte`, `utf8To8Byte`, `interleaving`, `compareTo`) and
davidmoten's `HilbertCurve` (`transposedIndex`, `toIndex`, as `HilbertCurveUtils.indexBytes` calls it
with 63 bits) on JDK 17, with nulls mapped as `SpaceCurveSortingHelper` maps them, and written down.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from engine.data import space_curve as sc
from engine.errors import InvalidConfigError, InvalidInputError

ROWS = pa.table({
    "a": pa.array([3, -1, None, 0, 7, -100, 42, 3, 1 << 20, -5], pa.int32()),
    "b": pa.array([10, -20, 5, None, 0, 7, -1, 10, 123456789, 8], pa.int64()),
    "c": pa.array([1.5, -2.25, 0.0, None, -0.0, 1e10, -1e-3, 3.0, 2.5, float("nan")], pa.float64()),
    "d": pa.array(["paris", "rome", None, "", "berlin-mitte", "a", "zürich", "paris2", "longer than eight", "b"]),
})

# Hudi's interleaved bytes of (a, b) and (c, d), rows 0..9
Z_AB = ["4000000000000000800000000000004e", "15555555555555557ffffffffffffefa", "4000000000000000aaaaaaaaaaaaaabb",
        "5555555555555555d555555555555555", "4000000000000000800000000000002a", "40000000000000002aaaaaaaaaaa82b5",
        "1555555555555555d555555555555ddd", "4000000000000000800000000000004e", "40000000000000008015134550510111",
        "40000000000000002aaaaaaaaaaaaaca"]
Z_CD = ["8aaaaa80000015001401150414411505", "0aaaaaa2aaaaaaaabfaebeffbefbbebb", "00000000000000000000000000000000",
        "aaaaa8aaaaaaaaaaaaaaaaaaaaaaaaaa", "94041411150414501441145404511451", "a0080008880022aa0800000000001401",
        "20009deed2a7cf581da614e9362d144a", "a0000080150014011504144115050504", "b4501475145414151411150404001510",
        "2aaaaa80000000000000000000001404"]
# Hudi's Hilbert index (63 bits x 2 dimensions) of (a, b) and (c, d), rows 0..9
H_AB = ["e3", "2aaaaaaaaaaaaaaaaaaaaaaaaaaaab0f", "3fffffffffffffffffffffffffffffec", "15555555555555555555555555555555",
        "3f", "3fffffffffffffffffffffffffffc3e5", "15555555555555555555555555555999", "e3", "1538655a59a999",
        "3fffffffffffffffffffffffffffff25"]
H_CD = ["0555554000003faabeab150414eb1505", "3aaaaaac00000000150414ff14f13c3b", "15555555555555555555555555555555",
        "3fffffffffffffffffffffffffffffff", "140ebeb13fac3c503c413c540efb14f1", "3aac0004ec003bff0eaaaaaaaaaa96a9",
        "0555264ee409750bce08c342d26e6990", "3aaaaac015003c03bf0ebec3bf0f0f0e", "24f014c596569695969995a6a6aa959a",
        "3fffffc000000000000000000000140e"]
ORDERS = {  # rows sorted by Hudi's keys (unsigned byte order)
    ("z-order", "a", "b"): [1, 6, 5, 9, 4, 0, 7, 8, 2, 3],
    ("z-order", "c", "d"): [2, 1, 6, 9, 0, 4, 7, 5, 3, 8],
    ("hilbert", "a", "b"): [4, 0, 7, 8, 3, 6, 1, 5, 9, 2],
    ("hilbert", "c", "d"): [6, 0, 4, 2, 8, 1, 7, 5, 9, 3],
}


def _zorder_hex(x: str, y: str) -> list[str]:
    words = sc.zorder_words([sc.zorder_bytes(ROWS[x].combine_chunks()), sc.zorder_bytes(ROWS[y].combine_chunks())])
    return ["".join(f"{int(w[i]):04x}" for w in words) for i in range(ROWS.num_rows)]


def _hilbert_ints(points: list[np.ndarray], bits: int = 63) -> list[int]:
    """The index as an integer, from the sort words (each holds whole bit levels of every dimension)."""
    words = sc.hilbert_words(points, bits)
    n = len(points)
    per_word = 64 // n
    widths = []
    left = bits
    for _ in words:
        take = min(per_word, left)
        widths.append(take * n)
        left -= take
    out = []
    for i in range(len(points[0])):
        v = 0
        for w, width in zip(words, widths, strict=True):
            v = (v << width) | int(w[i])
        out.append(v)
    return out


def test_zorder_bytes_and_interleaving_equal_hudis():
    assert _zorder_hex("a", "b") == Z_AB
    assert _zorder_hex("c", "d") == Z_CD


def test_hilbert_index_equals_hudis():
    for (x, y), expected in ((("a", "b"), H_AB), (("c", "d"), H_CD)):
        points = [sc.hilbert_long(ROWS[x].combine_chunks()), sc.hilbert_long(ROWS[y].combine_chunks())]
        assert [f"{v:x}" for v in _hilbert_ints(points)] == [e.lstrip("0") or "0" for e in expected]


def test_hilbert_curve_of_five_bits_as_hudis_test():
    # TestHilbertCurveUtils: HilbertCurve.bits(5).dimensions(2): (1, 2) -> 13, (0, 16) -> 256
    points = [np.array([1, 0], np.uint64), np.array([2, 16], np.uint64)]
    assert _hilbert_ints(points, bits=5) == [13, 256]


@pytest.mark.parametrize("key", sorted(ORDERS))
def test_orders_equal_hudis(key):
    strategy, x, y = key
    assert list(sc.order(ROWS, [x, y], strategy, field_indexes=[0, 1])) == ORDERS[key]


def test_columns_are_visited_in_java_hashmap_order():
    # a HashMap<Integer, StructField> of 16 buckets: index 20 (bucket 4) comes before index 7
    assert sc.hashmap_order([20, 7]) == [0, 1]
    assert sc.hashmap_order([7, 20]) == [1, 0]
    assert sc.hashmap_order([5, 21]) == [0, 1]  # the same bucket: insertion order
    assert sc.hashmap_order([21, 5]) == [0, 1]
    # the sort columns as listed (b, a) still interleave a first when a sits first in the schema
    assert list(sc.order(ROWS, ["b", "a"], "z-order", field_indexes=[1, 0])) == ORDERS[("z-order", "a", "b")]


def test_linear_and_single_column_orders_sort_by_the_columns():
    assert list(sc.order(ROWS, ["a"], "z-order")) == [2, 5, 9, 1, 3, 0, 7, 4, 6, 8]  # nulls first, ties stable
    assert list(sc.order(ROWS, ["a", "b"], "linear")) == [2, 5, 9, 1, 3, 0, 7, 4, 6, 8]


def test_sample_method_orders_ranks_on_the_curve():
    t = pa.table({"x": pa.array([5, 1, 3, None, 2]), "y": pa.array(["e", "a", "c", "b", None])})
    # ranks: x -> 3, 0, 2, 5 (null), 1; y -> 3, 0, 2, 1, 5 (null)
    got = list(sc.order(t, ["x", "y"], "z-order", method="sample", field_indexes=[0, 1]))
    ranks = [(3, 3), (0, 0), (2, 2), (5, 1), (1, 5)]
    words = sc.zorder_words([np.array([(r[0] + (1 << 31)) & 0xFFFFFFFF for r in ranks], np.uint64),
                             np.array([(r[1] + (1 << 31)) & 0xFFFFFFFF for r in ranks], np.uint64)])
    assert got == list(np.lexsort(tuple(reversed(words)))) == [1, 2, 0, 4, 3]
    assert sorted(sc.order(t, ["x", "y"], "hilbert", method="sample")) == [0, 1, 2, 3, 4]


def test_refusals_are_typed():
    with pytest.raises(InvalidConfigError, match="layout.optimize.strategy"):
        sc.strategy_name("spiral")
    with pytest.raises(InvalidConfigError, match="curve.build.method"):
        sc.build_method("guess")
    with pytest.raises(InvalidInputError, match="not in the table"):
        sc.order(ROWS, ["a", "nope"], "z-order")
    with pytest.raises(InvalidInputError, match="type list"):
        sc.order(pa.table({"l": [[1], [2]], "a": [1, 2]}), ["l", "a"], "hilbert")
    assert sc.strategy_name("ZORDER") == "z-order" and sc.strategy_name("Hilbert") == "hilbert"


def test_curves_computed_in_slices_order_as_in_one_pass(monkeypatch):
    for key in sorted(ORDERS):
        strategy, x, y = key
        monkeypatch.setattr(sc, "SLICE_ROWS", 3)  # 10 rows: four slices, in threads
        assert list(sc.order(ROWS, [x, y], strategy, field_indexes=[0, 1])) == ORDERS[key]
    words = [np.array([1, 2], np.uint64), np.array([3, 4], np.uint64), np.array([5, 6], np.uint64)]
    assert [list(w) for w in sc.packed(words, [16, 16, 40])] == [[(1 << 16) | 3, (2 << 16) | 4], [5, 6]]
