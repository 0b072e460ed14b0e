#include "engine/model/trained_pooler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/atomic_file.h"
#include "engine/io/safetensors.h"
#include "engine/io/tensor_from_view.h"
#include "engine/kernels/tensor_ops.h"

namespace moeedb {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
constexpr double kEps = 1e-6;

at::Tensor Norm(const at::Tensor& x, const at::Tensor& w) { return RmsNorm(x, w, kEps); }
}  // namespace

Status PoolerSpec::Validate() const {
  auto bad = [](const char* f) { return Status::InvalidArgument(std::string("pooler: '") + f + "' must be positive"); };
  if (hidden <= 0) return bad("hidden");
  if (layer_rows <= 0) return bad("layer_rows");
  if (latents <= 0) return bad("latents");
  if (heads <= 0) return bad("heads");
  if (ffn <= 0) return bad("ffn");
  if (out_dim <= 0) return bad("out_dim");
  if (router_rows < 0) return Status::InvalidArgument("pooler: 'router_rows' must be >= 0");
  if (router_rows > 0 && router_dim <= 0) return bad("router_dim");
  if (token_pooling == TokenPooling::kWeighted && vocab <= 0) return bad("vocab");
  if (lexical_dim < 0) return Status::InvalidArgument("pooler: 'lexical_dim' must be >= 0");
  if (lexical_dim > 0 && token_pooling != TokenPooling::kWeighted)
    return Status::InvalidArgument("pooler: a lexical channel needs weighted token pooling");
  if (hidden % heads != 0) return Status::InvalidArgument("pooler: 'heads' must divide 'hidden'");
  return Status::OK();
}

Result<PoolerSpec> PoolerSpec::FromJson(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption("pooler.json is not a JSON object");
  PoolerSpec s;
  try {
    if (j.value("type", std::string()) != "multi_layer_cross_attention")
      return Status::NotSupported("pooler.json: unknown pooler type '" + j.value("type", std::string()) + "'");
    s.hidden = j.at("hidden").get<int64_t>();
    s.layer_rows = j.at("layer_rows").get<int64_t>();
    s.router_rows = j.value("router_rows", int64_t{0});
    s.router_dim = j.value("router_dim", int64_t{0});
    s.router_proj_per_layer = j.value("router_proj_per_layer", false);
    s.latents = j.at("latents").get<int64_t>();
    s.heads = j.at("heads").get<int64_t>();
    s.ffn = j.at("ffn").get<int64_t>();
    s.out_dim = j.at("out_dim").get<int64_t>();
    auto pool = kTokenPoolings.Parse(j.value("token_pooling", std::string("mean")));
    if (!pool.ok()) return Status::Corruption("pooler.json: " + pool.status().message());
    s.token_pooling = *pool;
    s.vocab = j.value("vocab", int64_t{0});
    s.lexical_dim = j.value("lexical_dim", int64_t{0});
  } catch (const json::exception& e) {
    return Status::Corruption(std::string("pooler.json: ") + e.what());
  }
  MOEEDB_RETURN_IF_ERROR(s.Validate());
  return s;
}

std::string PoolerSpec::ToJson() const {
  json j = {{"type", "multi_layer_cross_attention"}, {"hidden", hidden},   {"layer_rows", layer_rows},
            {"router_rows", router_rows},            {"router_dim", router_dim}, {"latents", latents},
            {"heads", heads},                        {"ffn", ffn},         {"out_dim", out_dim},
            {"token_pooling", kTokenPoolings.Name(token_pooling)}};
  if (router_proj_per_layer) j["router_proj_per_layer"] = true;
  if (token_pooling == TokenPooling::kWeighted) j["vocab"] = vocab;
  if (lexical_dim > 0) j["lexical_dim"] = lexical_dim;
  return j.dump(2) + "\n";
}

std::vector<PoolerTensorSpec> PoolerTensors(const PoolerSpec& s) {
  const int64_t H = s.hidden;
  const double std_h = 1.0 / std::sqrt(static_cast<double>(H)), std_f = 1.0 / std::sqrt(static_cast<double>(s.ffn));
  std::vector<PoolerTensorSpec> t = {{"row_pos", {s.rows(), H}, 0.02}};
  if (s.token_pooling == TokenPooling::kWeighted) t.push_back({"token_log_weight", {s.vocab}, 0, true});
  if (s.router_rows > 0) {
    const double std_r = 1.0 / std::sqrt(static_cast<double>(s.router_dim));
    if (s.router_proj_per_layer) t.push_back({"router_proj", {s.router_rows, H, s.router_dim}, std_r});
    else t.push_back({"router_proj", {H, s.router_dim}, std_r});
  }
  std::vector<PoolerTensorSpec> rest = {
      {"kv_norm", {H}, 0},           {"latents", {s.latents, H}, 0.02}, {"q", {H, H}, std_h},
      {"k", {H, H}, std_h},          {"v", {H, H}, std_h},              {"o", {H, H}, std_h},
      {"ffn_norm", {H}, 0},          {"ffn_in", {2 * s.ffn, H}, std_h}, {"ffn_out", {H, s.ffn}, std_f},
      {"out_norm", {H}, 0},          {"out", {s.out_dim, H}, std_h},
  };
  t.insert(t.end(), rest.begin(), rest.end());
  if (s.lexical_dim > 0) {
    t.push_back({"lexical_embed", {s.vocab, s.lexical_dim}, 1.0});  // near-orthogonal rows: a hashed bag of words
    t.push_back({"lexical_gain", {1}, 0});
  }
  return t;
}

at::Tensor PoolerForward(const PoolerSpec& s, const std::map<std::string, at::Tensor>& w, const at::Tensor& layer_rows,
                         const at::Tensor& router_rows, const at::Tensor& lexical) {
  auto W = [&](const char* name) -> const at::Tensor& { return w.at(name); };
  const int64_t B = layer_rows.size(0), H = s.hidden, nh = s.heads, hd = H / nh, n = s.latents;
  at::Tensor x = layer_rows;
  if (s.router_rows > 0) {
    // [B, L, E] x [H, E] -> [B, L, H]; per layer: row l through its own [H, E].
    at::Tensor r = s.router_proj_per_layer ? at::einsum("ble,lhe->blh", {router_rows, W("router_proj")})
                                           : at::matmul(router_rows, W("router_proj").t());
    x = at::cat({x, r}, 1);
  }
  x = Norm(x + W("row_pos"), W("kv_norm"));                                            // [B, R, H]
  at::Tensor q = at::linear(W("latents"), W("q")).view({n, nh, hd}).transpose(0, 1);  // [nh, n, hd]
  at::Tensor k = at::linear(x, W("k")).view({B, -1, nh, hd}).transpose(1, 2);         // [B, nh, R, hd]
  at::Tensor v = at::linear(x, W("v")).view({B, -1, nh, hd}).transpose(1, 2);
  at::Tensor scores = at::matmul(q.unsqueeze(0), k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
  at::Tensor attended = at::matmul(at::softmax(scores, -1), v).transpose(1, 2).reshape({B, n, H});
  at::Tensor z = W("latents").unsqueeze(0) + at::linear(attended, W("o"));  // [B, n, H]
  at::Tensor g = at::linear(Norm(z, W("ffn_norm")), W("ffn_in"));
  z = z + at::linear(at::gelu(g.narrow(-1, 0, s.ffn)) * g.narrow(-1, s.ffn, s.ffn), W("ffn_out"));
  at::Tensor pooled = at::linear(Norm(z.mean(1), W("out_norm")), W("out"));
  if (s.lexical_dim == 0) return pooled;
  auto unit = [](const at::Tensor& x) { return x / x.norm(2, {-1}, true).clamp_min(1e-12); };
  return at::cat({unit(pooled), W("lexical_gain") * unit(lexical)}, -1);
}

at::Tensor PoolerTokenWeights(const std::map<std::string, at::Tensor>& weights, const at::Tensor& ids) {
  const at::Tensor& log_w = weights.at("token_log_weight");
  return log_w.index_select(0, ids.reshape({-1})).exp().view(ids.sizes());
}

bool TrainedPooler::ExistsIn(const std::string& dir) { return fs::exists(fs::path(dir) / "pooler.json"); }

Result<std::unique_ptr<TrainedPooler>> TrainedPooler::LoadDir(const std::string& dir) {
  const fs::path spec_path = fs::path(dir) / "pooler.json", weights_path = fs::path(dir) / "pooler.safetensors";
  std::ifstream in(spec_path, std::ios::binary);
  if (!in) return Status::NotFound(spec_path.string() + " not found");
  std::stringstream ss;
  ss << in.rdbuf();
  auto spec = PoolerSpec::FromJson(ss.str());
  if (!spec.ok()) return Status::Corruption(spec_path.string() + ": " + spec.status().message());
  MOEEDB_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(weights_path.string()));
  auto p = std::unique_ptr<TrainedPooler>(new TrainedPooler());
  p->spec_ = *spec;
  for (const auto& t : PoolerTensors(*spec)) {
    const TensorView* v = file->Find(t.name);
    if (v == nullptr || v->shape != t.shape)
      return Status::Corruption(weights_path.string() + ": tensor " + t.name + " missing or misshapen");
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor x, TensorFromView(*v));
    p->weights_[t.name] = x.clone();  // owned: the file is closed after loading
  }
  return p;
}

Status TrainedPooler::CheckFits(const ModelConfig& c, const std::string& dir) const {
  const int64_t moe_layers = static_cast<int64_t>(std::count(c.moe_layer.begin(), c.moe_layer.end(), true));
  if (spec_.hidden != c.hidden_size || spec_.layer_rows != c.num_layers + 1 ||
      (spec_.router_rows != 0 && (spec_.router_rows != moe_layers || spec_.router_dim != c.num_experts)) ||
      (spec_.token_pooling == TokenPooling::kWeighted && spec_.vocab != c.vocab_size))
    return Status::Corruption(dir + "/pooler.json does not fit the model (hidden size, layers, experts or vocabulary differ)");
  return Status::OK();
}

at::Tensor TrainedPooler::Forward(const at::Tensor& layer_rows, const at::Tensor& router_rows,
                                  const at::Tensor& lexical) const {
  at::NoGradGuard no_grad;
  return PoolerForward(spec_, weights_, layer_rows, router_rows, lexical);
}

at::Tensor TrainedPooler::TokenWeights(const at::Tensor& ids) const {
  at::NoGradGuard no_grad;
  return PoolerTokenWeights(weights_, ids);
}

Status SavePooler(const std::string& dir, const PoolerSpec& spec, const std::map<std::string, at::Tensor>& weights) {
  MOEEDB_RETURN_IF_ERROR(spec.Validate());
  std::vector<TensorToWrite> out;
  for (const auto& t : PoolerTensors(spec)) {
    auto it = weights.find(t.name);
    if (it == weights.end() || it->second.sizes().vec() != t.shape)
      return Status::InvalidArgument("pooler tensor " + t.name + " missing or misshapen");
    out.push_back(F32TensorToWrite(t.name, it->second));
  }
  // Both writes are atomic (WriteSafetensors writes a .tmp and renames it too).
  MOEEDB_RETURN_IF_ERROR(WriteSafetensors((fs::path(dir) / "pooler.safetensors").string(), out, {{"format", "pt"}}));
  return WriteFileAtomic((fs::path(dir) / "pooler.json").string(), spec.ToJson());
}

}  // namespace moeedb
