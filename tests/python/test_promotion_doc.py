"""docs/type_promotion.md's table is exactly what the engine does."""
import pathlib

import kiln as ms

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "type_promotion.md"
ORDER = [ms.bool_, ms.uint8, ms.int8, ms.int16, ms.int32, ms.int64, ms.float16, ms.bfloat16,
         ms.float32, ms.float64]
SHORT = {ms.bool_: "b", ms.uint8: "u8", ms.int8: "i8", ms.int16: "i16", ms.int32: "i32",
         ms.int64: "i64", ms.float16: "f16", ms.bfloat16: "bf16", ms.float32: "f32",
         ms.float64: "f64"}


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
