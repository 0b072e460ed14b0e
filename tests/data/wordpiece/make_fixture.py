"""Writes tokenizer.json and cases.jsonl here: a WordPiece tokenizer (all-MiniLM-L6-v2's, cut to
the pieces the sample texts need, original ids kept) and what the tokenizers library (the
reference) makes of each text with it: ids with [CLS]/[SEP] and the decoded text.

    "$(bash scripts/python_env.sh teacher)" tests/data/wordpiece/make_fixture.py
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "eval" / "teacher"))
import minilm  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

HERE = Path(__file__).resolve().parent
TEXTS = [
    "A puppy sprints through a meadow.",
    "The bank raised its interest rates again!",
    "Café naïve résumé — ÉTÉ à Paris; İstanbul, Straße.",
    "東京は大きい都市です。 北京 and 上海",
    "[CLS] tokens [MASK] in text, don't split can't won't; e-mail: a.b@c.org (1,234.56)",
    "tabs\tand\nnewlines\r\nand  double  spaces",
    "zero\u200bwidth\u00adsoft hyphen and a control\u0007bell",
    "combining e\u0301 accents and ＦＵＬＬＷＩＤＴＨ letters",
    "Ελληνικά και русский текст",
    "emoji 🙂 and symbols ±§¶ ‘quoted’ “twice”",
    "a" * 101 + " is too long for one word",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "unaffable unbelievably re-entry",
    "x",
    "",
    "unassigned a\u0378b, private use a\ue000b, newer emoji 🥲 ok",
]
REMOVED = ["##able", "meadow"]  # so that a word falls back to smaller pieces, or to [UNK]


def main() -> int:
    full = json.loads((minilm.model_dir() / "tokenizer.json").read_text())
    ref = Tokenizer.from_str(json.dumps(full))
    ref.no_padding()
    ref.no_truncation()
    keep = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
    for t in TEXTS:
        keep.update(ref.encode(t).tokens)
        for word in t.lower().split():  # the pieces of each word's sub-words too
            keep.update(ref.encode(word[: len(word) // 2]).tokens)
    keep -= set(REMOVED)
    full["model"]["vocab"] = {k: v for k, v in full["model"]["vocab"].items() if k in keep}
    full["padding"] = None
    full["truncation"] = None
    (HERE / "tokenizer.json").write_text(json.dumps(full, ensure_ascii=False, indent=0) + "\n")
    small = Tokenizer.from_file(str(HERE / "tokenizer.json"))
    with open(HERE / "cases.jsonl", "w", encoding="utf-8") as f:
        for t in TEXTS:
            e = small.encode(t)
            f.write(json.dumps({"text": t, "ids": e.ids, "decoded": small.decode(e.ids, skip_special_tokens=False)},
                               ensure_ascii=False) + "\n")
    print(f"{len(full['model']['vocab'])} pieces, {len(TEXTS)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
