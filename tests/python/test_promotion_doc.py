"""docs/type_promotion.md's table is exactly what the engine does, and where it is NumPy's."""
import pathlib

import numpy as np

import kiln as ms

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "type_promotion.md"
ORDER = [ms.bool_, ms.uint8, ms.uint16, ms.uint32, ms.uint64, ms.int8, ms.int16, ms.int32,
         ms.int64, ms.float16, ms.bfloat16, ms.float32, ms.float64]
SHORT = {ms.bool_: "b", ms.uint8: "u8", ms.uint16: "u16", ms.uint32: "u32", ms.uint64: "u64",
         ms.int8: "i8", ms.int16: "i16", ms.int32: "i32", ms.int64: "i64", ms.float16: "f16",
         ms.bfloat16: "bf16", ms.float32: "f32", ms.float64: "f64"}


def promotion_table():
    """The markdown table of promote_types over every pair of dtypes."""
    lines = ["|     | " + " | ".join(SHORT[d] for d in ORDER) + " |",
             "|-----|" + "|".join("-" * (len(SHORT[d]) + 2) for d in ORDER) + "|"]
    for a in ORDER:
        cells = [SHORT[ms.dtype.promote_types(a, b)].ljust(len(SHORT[b])) for b in ORDER]
        lines.append(f"| {SHORT[a]:<3} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def test_doc_table_matches_engine():
    text = DOC.read_text()
    start = text.index("<!-- table:start -->") + len("<!-- table:start -->")
    end = text.index("<!-- table:end -->")
    assert text[start:end].strip() == promotion_table(), (
        "docs/type_promotion.md is stale; regenerate it with:\n"
        "  python -c 'import test_promotion_doc as t; print(t.promotion_table())'")


def test_table_is_symmetric():
    for a in ORDER:
        for b in ORDER:
            assert ms.dtype.promote_types(a, b) == ms.dtype.promote_types(b, a)


def test_bools_and_integers_promote_as_numpy():
    # Every pair of bool and integer types, uint64 with a signed type (float64) included; kiln
    # differs from NumPy only once a float joins (docs/type_promotion.md).
    exact = [d for d in ORDER if not d.is_floating_point]
    for a in exact:
        for b in exact:
            want = np.promote_types(ms.dtype.dtype_to_nptype(a), ms.dtype.dtype_to_nptype(b))
            assert ms.dtype.promote_types(a, b) == ms.dtype.to_dtype(want), (a, b)


def test_an_integer_with_a_float_gives_the_float():
    for a in ORDER:
        for b in (ms.float16, ms.bfloat16, ms.float32, ms.float64):
            if not a.is_floating_point:
                assert ms.dtype.promote_types(a, b) == b
