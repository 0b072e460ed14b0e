#include "engine/model/model_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace moeedb {

using json = nlohmann::json;

namespace {

// Small typed getters that turn a wrong or missing field into a Status.
class Fields {
 public:
  Fields(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  bool Has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  Status Int(const char* key, int64_t* out, std::optional<int64_t> def = std::nullopt) const {
    if (!Has(key)) {
      if (def) { *out = *def; return Status::OK(); }
      return Status::InvalidArgument(source_ + ": missing required field '" + key + "'");
    }
    if (!j_[key].is_number_integer())
      return Status::InvalidArgument(source_ + ": field '" + key + "' must be an integer");
    *out = j_[key].get<int64_t>();
    return Status::OK();
  }
  // A shape field: positive and at most `max`, so that products of shapes
  // (weights, RW dimension, buffers) stay far inside int64.
  Status Positive(const char* key, int64_t* out, int64_t max, std::optional<int64_t> def = std::nullopt) const {
    MOEEDB_RETURN_IF_ERROR(Int(key, out, def));
    if (*out <= 0) return Status::InvalidArgument(source_ + ": field '" + key + "' must be positive, got " + std::to_string(*out));
    if (*out > max)
      return Status::InvalidArgument(source_ + ": field '" + key + "' is " + std::to_string(*out) + ", above the largest supported " +
                                     std::to_string(max));
    return Status::OK();
  }
  Status Double(const char* key, double* out, double def) const {
    if (!Has(key)) { *out = def; return Status::OK(); }
    if (!j_[key].is_number()) return Status::InvalidArgument(source_ + ": field '" + key + "' must be a number");
    *out = j_[key].get<double>();
    return Status::OK();
  }
  Status Bool(const char* key, bool* out, bool def) const {
    if (!Has(key)) { *out = def; return Status::OK(); }
    if (!j_[key].is_boolean()) return Status::InvalidArgument(source_ + ": field '" + key + "' must be true or false");
    *out = j_[key].get<bool>();
    return Status::OK();
  }
  std::optional<int64_t> OptionalId(const char* key) const {
    if (Has(key) && j_[key].is_number_integer()) return j_[key].get<int64_t>();
    return std::nullopt;
  }

 private:
  const json& j_;
  std::string source_;
};

// The largest shapes a config may name. Each is far above any released MoE
// (DeepSeek-V3: vocabulary 129,280, hidden 7,168, 256 experts, 61 layers) and
// small enough that the size of any one tensor (vocabulary x hidden, an
// expert stack) fits int64 with room to spare; the router rows a model reads
// (experts x MoE layers) are capped too, since the loader lists a tensor per
// expert and layer before it reads one. Whole-model totals are not bounded
// here: a model that large fails when its weights are mapped.
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxWidth = int64_t{1} << 20;  // hidden, head and MLP widths
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxExperts = 65536;
constexpr int64_t kMaxRouterRows = int64_t{1} << 20;  // experts x MoE layers (rw_dim)

}  // namespace

Result<ModelConfig> ModelConfig::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot open model config " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return FromJson(ss.str(), path);
}

namespace {

// An optional string field: `def` when absent or null, an error when of another type.
Result<std::string> OptionalString(const json& o, const char* key, const std::string& def, const std::string& where) {
  if (!o.contains(key) || o[key].is_null()) return def;
  if (!o[key].is_string()) return Status::InvalidArgument(where + ": '" + key + "' must be a string");
  return o[key].get<std::string>();
}

}  // namespace

Result<ModelConfig> ModelConfig::FromJson(const std::string& text, const std::string& source) {
  // A config.json is read from strangers: every field is type-checked, and
  // anything the checks miss is an error value, never an exception.
  try {
    return FromJsonChecked(text, source);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(source + ": " + e.what());
  }
}

Result<ModelConfig> ModelConfig::FromJsonChecked(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::InvalidArgument(source + ": not valid JSON");
  if (!j.is_object()) return Status::InvalidArgument(source + ": config must be a JSON object");
  ModelConfig c;
  c.source = source;
  c.json_text = text;
  if (!j.contains("model_type") || !j["model_type"].is_string())
    return Status::InvalidArgument(source + ": missing 'model_type' (supported: " + SupportedModelTypes() + ")");
  c.model_type = j["model_type"].get<std::string>();
  c.family = FindFamily(c.model_type);
  if (c.family == nullptr)
    return Status::NotSupported(source + ": unknown model_type '" + c.model_type +
                                "'; supported model types: " + SupportedModelTypes());
  const ModelFamily& fam = *c.family;
  Fields f(j, source);
  MOEEDB_RETURN_IF_ERROR(f.Positive("vocab_size", &c.vocab_size, kMaxVocab));
  MOEEDB_RETURN_IF_ERROR(f.Positive("hidden_size", &c.hidden_size, kMaxWidth));
  MOEEDB_RETURN_IF_ERROR(f.Positive("num_hidden_layers", &c.num_layers, kMaxLayers));
  MOEEDB_RETURN_IF_ERROR(f.Positive("num_attention_heads", &c.num_heads, kMaxHeads));
  MOEEDB_RETURN_IF_ERROR(f.Positive("num_key_value_heads", &c.num_kv_heads, kMaxHeads, c.num_heads));
  if (c.num_heads % c.num_kv_heads != 0)
    return Status::InvalidArgument(source + ": num_attention_heads (" + std::to_string(c.num_heads) +
                                   ") is not a multiple of num_key_value_heads (" + std::to_string(c.num_kv_heads) + ")");
  if (!f.Has("head_dim") && c.hidden_size % c.num_heads != 0)
    return Status::InvalidArgument(source + ": hidden_size is not a multiple of num_attention_heads and no head_dim is given");
  MOEEDB_RETURN_IF_ERROR(f.Positive("head_dim", &c.head_dim, kMaxWidth, c.hidden_size / c.num_heads));
  if (c.head_dim % 2 != 0 && fam.positions == PositionKind::kRope)
    return Status::InvalidArgument(source + ": head_dim must be even for RoPE");
  if (fam.positions == PositionKind::kLearned)
    MOEEDB_RETURN_IF_ERROR(f.Positive("max_position_embeddings", &c.max_positions, kMaxWidth));
  MOEEDB_RETURN_IF_ERROR(f.Positive(fam.experts_field, &c.num_experts, kMaxExperts));
  MOEEDB_RETURN_IF_ERROR(f.Positive("num_experts_per_tok", &c.top_k, kMaxExperts));
  if (c.top_k > c.num_experts)
    return Status::InvalidArgument(source + ": num_experts_per_tok (" + std::to_string(c.top_k) + ") exceeds the expert count (" +
                                   std::to_string(c.num_experts) + ")");
  MOEEDB_RETURN_IF_ERROR(f.Positive(fam.expert_intermediate_field, &c.expert_intermediate, kMaxWidth));
  MOEEDB_RETURN_IF_ERROR(f.Positive("intermediate_size", &c.dense_intermediate, kMaxWidth));
  MOEEDB_RETURN_IF_ERROR(fam.norm == NormKind::kLayer ? f.Double("layer_norm_eps", &c.rms_norm_eps, 1e-12)
                                                      : f.Double("rms_norm_eps", &c.rms_norm_eps, 1e-6));
  MOEEDB_RETURN_IF_ERROR(f.Double("rope_theta", &c.rope_theta, 10000.0));
  MOEEDB_RETURN_IF_ERROR(f.Double("initializer_range", &c.initializer_range, 0.02));
  MOEEDB_RETURN_IF_ERROR(f.Bool("tie_word_embeddings", &c.tie_word_embeddings, false));
  // An encoder family (post-norm, BERT's) attends both ways unless told otherwise.
  MOEEDB_RETURN_IF_ERROR(f.Bool("is_causal", &c.causal, !fam.post_norm));
  bool norm_topk = false;
  MOEEDB_RETURN_IF_ERROR(f.Bool("norm_topk_prob", &norm_topk, false));
  // DeepSeek renormalises only when top_k > 1 (MoEGate); Mixtral always does.
  c.norm_topk_prob = fam.renormalize_always || (norm_topk && c.top_k > 1);
  bool attention_bias = false;
  MOEEDB_RETURN_IF_ERROR(f.Bool("attention_bias", &attention_bias, false));
  c.qkv_bias = fam.qkv_bias_always || attention_bias;
  c.o_bias = attention_bias && !fam.qkv_bias_always;
  if (f.Has("clip_qkv")) {
    double clip = 0;
    MOEEDB_RETURN_IF_ERROR(f.Double("clip_qkv", &clip, 0));
    c.clip_qkv = clip;
  }
  if (f.Has("rope_scaling")) {
    const json& rs = j["rope_scaling"];
    std::string type = "?";
    if (rs.is_object()) {
      MOEEDB_ASSIGN_OR_RETURN(std::string legacy, OptionalString(rs, "type", "?", source + ": rope_scaling"));
      MOEEDB_ASSIGN_OR_RETURN(type, OptionalString(rs, "rope_type", legacy, source + ": rope_scaling"));
    }
    if (type != "default")
      return Status::NotSupported(source + ": rope_scaling type '" + type + "' is not supported (only plain RoPE)");
  }
  if (j.contains("use_sliding_window") && !j["use_sliding_window"].is_null() && !j["use_sliding_window"].is_boolean())
    return Status::InvalidArgument(source + ": 'use_sliding_window' must be true or false");
  if (j.contains("use_sliding_window") && j["use_sliding_window"].is_boolean() && j["use_sliding_window"].get<bool>())
    return Status::NotSupported(source + ": use_sliding_window=true is not supported");

  // Shared experts.
  if (fam.shared == SharedExpertKind::kSigmoidGated) {
    MOEEDB_RETURN_IF_ERROR(f.Positive("shared_expert_intermediate_size", &c.shared_intermediate, kMaxWidth));
  } else if (fam.shared == SharedExpertKind::kUnweighted) {
    int64_t n_shared = 0;
    MOEEDB_RETURN_IF_ERROR(f.Int("n_shared_experts", &n_shared, 0));
    if (n_shared < 0 || n_shared > 4096)
      return Status::InvalidArgument(source + ": n_shared_experts must be in 0..4096");
    if (n_shared > 0 && c.expert_intermediate > kMaxWidth / n_shared)
      return Status::InvalidArgument(source + ": n_shared_experts x moe_intermediate_size is above the largest supported width " +
                                     std::to_string(kMaxWidth));
    c.shared_intermediate = n_shared * c.expert_intermediate;
  }
  if (fam.moe_layers == MoeLayerRule::kDeepseekFirstKDense) {
    MOEEDB_ASSIGN_OR_RETURN(std::string scoring, OptionalString(j, "scoring_func", "softmax", source));
    if (scoring != "softmax")
      return Status::NotSupported(source + ": scoring_func '" + scoring + "' is not supported (softmax only)");
  }

  // Which layers are MoE.
  c.moe_layer.assign(static_cast<size_t>(c.num_layers), true);
  if (fam.moe_layers == MoeLayerRule::kQwenSparseStep) {
    int64_t step = 1;
    MOEEDB_RETURN_IF_ERROR(f.Positive("decoder_sparse_step", &step, kMaxLayers, 1));
    std::vector<int64_t> mlp_only;
    if (f.Has("mlp_only_layers")) {
      if (!j["mlp_only_layers"].is_array()) return Status::InvalidArgument(source + ": mlp_only_layers must be a list");
      for (const auto& v : j["mlp_only_layers"]) {
        if (!v.is_number_integer()) return Status::InvalidArgument(source + ": mlp_only_layers must hold integers");
        mlp_only.push_back(v.get<int64_t>());
      }
    }
    for (int64_t i = 0; i < c.num_layers; ++i) {
      bool only = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
      c.moe_layer[i] = !only && (i + 1) % step == 0;
    }
  } else if (fam.moe_layers == MoeLayerRule::kDeepseekFirstKDense) {
    int64_t first_dense = 0, freq = 1;
    MOEEDB_RETURN_IF_ERROR(f.Int("first_k_dense_replace", &first_dense, 0));
    MOEEDB_RETURN_IF_ERROR(f.Positive("moe_layer_freq", &freq, kMaxLayers, 1));
    for (int64_t i = 0; i < c.num_layers; ++i) c.moe_layer[i] = i >= first_dense && i % freq == 0;
  }
  if (c.num_moe_layers() == 0) return Status::InvalidArgument(source + ": the config has no MoE layer");
  if (c.rw_dim() > kMaxRouterRows)
    return Status::InvalidArgument(source + ": " + std::to_string(c.num_experts) + " experts in " +
                                   std::to_string(c.num_moe_layers()) + " MoE layers are above the largest supported " +
                                   std::to_string(kMaxRouterRows) + " router rows");
  c.bos_token_id = f.OptionalId("bos_token_id");
  c.eos_token_id = f.OptionalId("eos_token_id");
  c.pad_token_id = f.OptionalId("pad_token_id");
  return c;
}

int64_t ModelConfig::num_moe_layers() const {
  int64_t n = 0;
  for (bool b : moe_layer) n += b ? 1 : 0;
  return n;
}

std::string ModelConfig::Summary() const {
  std::ostringstream s;
  s << family->display_name << ": " << num_layers << " layers (" << num_moe_layers() << " MoE), hidden " << hidden_size
    << ", heads " << num_heads << "/" << num_kv_heads << " x " << head_dim << ", " << num_experts << " experts x "
    << expert_intermediate << " top-" << top_k << (norm_topk_prob ? " (renormalised)" : "");
  if (shared_intermediate > 0) s << ", shared expert " << shared_intermediate;
  s << ", vocab " << vocab_size << ", hs " << hidden_size << ", rw " << rw_dim();
  return s.str();
}

}  // namespace moeedb
