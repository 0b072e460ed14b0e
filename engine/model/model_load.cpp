// MoeModel::LoadDir: a model folder's config and checkpoint into the
// engine's layers, in the weight format asked for, with the weights'
// fingerprint.
#include "engine/model/model.h"
#include "engine/model/model_layer.h"
#include "engine/kernels/activation_cache.h"

#include <c10/util/Exception.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/model/checkpoint_spec.h"
#include "engine/model/moe_block.h"
#include "engine/kernels/linear_weight.h"
#include "engine/kernels/packed_attention.h"
#include "engine/kernels/rotary.h"
#include "engine/kernels/rms_norm.h"
#include "engine/io/safetensors.h"
#include "engine/model/spectral_router.h"
#include "engine/io/tensor_from_view.h"
#include "engine/kernels/tensor_ops.h"
#include "engine/model/trained_pooler.h"

namespace moeedb {

namespace fs = std::filesystem;

namespace {

void Fnv(uint64_t* h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    *h ^= p[i];
    *h *= 1099511628211ULL;
  }
}

void FnvTensor(uint64_t* h, const at::Tensor& t, bool whole) {
  at::Tensor c = t.contiguous();
  const size_t n = static_cast<size_t>(c.numel()) * c.element_size();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  Fnv(h, c.sizes().data(), c.sizes().size() * sizeof(int64_t));
  if (whole || n <= 8192) {
    Fnv(h, p, n);
  } else {  // first, middle and last 4 KiB
    Fnv(h, p, 4096);
    Fnv(h, p + n / 2 - 2048, 4096);
    Fnv(h, p + n - 4096, 4096);
  }
}

}  // namespace

int64_t MoeModel::WeightBytes() const {
  auto bytes = [](const at::Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; };
  // The token embeddings as the forward reads them; the LM head (logits) when it is a table of its own.
  int64_t n = (embed_int8_.defined() ? bytes(embed_int8_) + bytes(embed_scale_) : bytes(embed_)) + bytes(final_norm_) +
              (config_.tie_word_embeddings ? 0 : bytes(lm_head_)) + bytes(final_norm_bias_) + bytes(embed_positions_) +
              bytes(embed_norm_) + bytes(embed_norm_bias_);
  for (const auto& L : layers_) {
    n += bytes(L->mlp_norm) + bytes(L->in_norm_bias) + bytes(L->post_norm_bias) + bytes(L->mlp_norm_bias);
    n += bytes(L->in_norm) + bytes(L->post_norm) + L->wq.nbytes() + L->wk.nbytes() + L->wv.nbytes() + L->wo.nbytes();
    n += bytes(L->bq) + bytes(L->bk) + bytes(L->bv) + bytes(L->bo) + bytes(L->q_norm) + bytes(L->k_norm);
    if (L->moe) {
      n += L->block.expert_nbytes() + bytes(L->block.router());
    } else {
      n += L->dense_gate_up.nbytes() + L->dense_down.nbytes();
    }
  }
  return n;
}

Result<std::unique_ptr<MoeModel>> MoeModel::LoadDir(const std::string& dir, const LoadOptions& options) {
  InstallActivationCache();  // the forward passes' large activations reuse memory
  if (!fs::is_directory(dir)) return Status::NotFound("model folder " + dir + " does not exist");
  at::Device device = at::kCPU;
  try {
    device = at::Device(options.device);
  } catch (const std::exception&) {
    return Status::InvalidArgument("unknown device '" + options.device + "' (expected cpu, cuda or cuda:N)");
  }
  if (device.is_cuda() && !at::hasCUDA())
    return Status::NotSupported("device '" + options.device +
                                "' asked for, but this build's libtorch has no CUDA (or no GPU is visible); "
                                "build with -DMOEEDB_CUDA=ON against a CUDA libtorch (README)");
  if (!device.is_cpu() && !device.is_cuda())
    return Status::InvalidArgument("unsupported device '" + options.device + "' (expected cpu, cuda or cuda:N)");
  MOEEDB_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::FromFile((fs::path(dir) / "config.json").string()));
  MOEEDB_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::OpenDir(dir));

  std::unique_ptr<MoeModel> m(new MoeModel());
  m->config_ = std::move(config);
  m->load_options_ = options;
  const ModelConfig& c = m->config_;
  const WeightFormat& fmt = options.format;
  m->compute_dtype_ = EffectiveComputeDtype(fmt, device.is_cuda());
  const at::ScalarType cdt = m->compute_dtype_ == ComputeDtype::kBF16 ? at::kBFloat16 : at::kFloat;
  // Validate every expected tensor first, so a bad checkpoint fails with the
  // first offending tensor named, before anything is built.
  int64_t first_moe = 0;
  while (!c.moe_layer[first_moe]) ++first_moe;
  CheckpointNaming naming;
  naming.moe_module = c.family->moe_modules[0];
  for (const auto& module : c.family->moe_modules)
    for (const auto& router : c.family->router_names)
      if (ckpt->Find(LayerPrefix(first_moe) + module + "." + router + ".weight") != nullptr) naming.moe_module = module;
  naming.layout = ckpt->Find(LayerPrefix(first_moe) + naming.moe_module + ".experts.gate_up_proj") != nullptr
                      ? ExpertLayout::kPacked
                      : ExpertLayout::kPerExpert;
  const auto specs = ExpectedTensors(c, naming);
  for (const auto& s : specs) {
    const TensorView* v = ckpt->Find(s.name);
    for (size_t a = 0; v == nullptr && a < s.aliases.size(); ++a) v = ckpt->Find(s.aliases[a]);
    if (v == nullptr)
      return Status::NotFound("tensor '" + s.name + "' is missing from " + ckpt->Describe() + " (required by " +
                              c.source + ")");
    if (v->shape != s.shape)
      return Status::InvalidArgument("tensor '" + v->name + "' in " + v->file + " has shape " +
                                     ShapeToString(v->shape) + " but " + c.source + " implies " +
                                     ShapeToString(s.shape));
  }
  // Float32 tensors that stay float32 (norms, router, embeddings), on the device.
  auto get = [&](const std::string& name) -> Result<at::Tensor> {
    MOEEDB_ASSIGN_OR_RETURN(const TensorView* v, ckpt->Require(name));
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor t, TensorFromView(*v));
    return t.to(device);
  };
  auto get_opt = [&](const std::string& name, bool present) -> Result<at::Tensor> {
    if (!present) return at::Tensor();
    return get(name);
  };
  auto get_bias = [&](const std::string& name, bool present) -> Result<at::Tensor> {
    if (!present) return at::Tensor();
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor t, get(name));
    return t.to(cdt);
  };
  // Matmul weights in the chosen format (LinearWeight holds its own copy, so
  // the mapped pages are released).
  auto get_linear = [&](const std::string& name) -> Result<LinearWeight> {
    MOEEDB_ASSIGN_OR_RETURN(const TensorView* v, ckpt->Require(name));
    MOEEDB_ASSIGN_OR_RETURN(at::Tensor t, TensorFromView(*v));
    LinearWeight w = LinearWeight::From(t, fmt, device);
    ReleasePages(*v);
    return w;
  };
  uint64_t fp = 1469598103934665603ULL;
  Fnv(&fp, c.json_text.data(), c.json_text.size());
  auto visit = [&fp](const char* what, const at::Tensor& t) { FnvTensor(&fp, t, std::string_view(what) == "router"); };
  try {
    MOEEDB_ASSIGN_OR_RETURN(m->embed_, get("model.embed_tokens.weight"));
    if (fmt.quant == WeightQuant::kInt8) {
      // 8-bit token embeddings, symmetric per row: a lookup reads one row
      // per token, but the kernel maps a fault's neighbouring pages too, so
      // random rows of an f32 table soon make most of it resident. The f32
      // rows stay mapped for the LM head (logits) only.
      const int64_t V = m->embed_.size(0), H = m->embed_.size(1);
      m->embed_int8_ = at::empty({V, H}, m->embed_.options().dtype(at::kChar));
      m->embed_scale_ = at::empty({V}, m->embed_.options().dtype(at::kFloat));
      for (int64_t r0 = 0; r0 < V; r0 += 4096) {  // a block of rows at a time: no f32 temporary of the whole table
        const int64_t n = std::min<int64_t>(4096, V - r0);
        at::Tensor q, scale;
        QuantizeInt8(m->embed_.narrow(0, r0, n), &q, &scale);
        m->embed_int8_.narrow(0, r0, n).copy_(q);
        m->embed_scale_.narrow(0, r0, n).copy_(scale);
      }
      if (m->embed_.is_cpu()) {
        MOEEDB_ASSIGN_OR_RETURN(const TensorView* v, ckpt->Require("model.embed_tokens.weight"));
        ReleasePages(*v);
      }
    }
    const ModelFamily& fam = *c.family;
    const bool layer_norm = fam.norm == NormKind::kLayer;
    // A norm's weight and (LayerNorm) bias; both undefined when absent.
    auto get_norm = [&](const std::string& name, bool present, at::Tensor* w, at::Tensor* b) -> Status {
      MOEEDB_ASSIGN_OR_RETURN(*w, get_opt(name + ".weight", present));
      MOEEDB_ASSIGN_OR_RETURN(*b, get_opt(name + ".bias", present && layer_norm));
      return Status::OK();
    };
    MOEEDB_RETURN_IF_ERROR(get_norm("model.norm", !fam.post_norm, &m->final_norm_, &m->final_norm_bias_));
    MOEEDB_RETURN_IF_ERROR(get_norm("model.embed_norm", fam.post_norm, &m->embed_norm_, &m->embed_norm_bias_));
    MOEEDB_ASSIGN_OR_RETURN(m->embed_positions_,
                            get_opt("model.embed_positions.weight", fam.positions == PositionKind::kLearned));
    if (c.tie_word_embeddings) {
      m->lm_head_ = m->embed_;
    } else {
      MOEEDB_ASSIGN_OR_RETURN(m->lm_head_, get("lm_head.weight"));
    }
    const bool has_qk_norm = c.family->qk_norm != QkNorm::kNone;
    for (int64_t i = 0; i < c.num_layers; ++i) {
      auto L = std::make_unique<Layer>();
      const std::string p = LayerPrefix(i), a = p + "self_attn.";
      MOEEDB_RETURN_IF_ERROR(get_norm(p + "input_layernorm", !fam.post_norm, &L->in_norm, &L->in_norm_bias));
      MOEEDB_RETURN_IF_ERROR(get_norm(p + "post_attention_layernorm", true, &L->post_norm, &L->post_norm_bias));
      MOEEDB_RETURN_IF_ERROR(get_norm(p + "post_mlp_layernorm", fam.post_norm, &L->mlp_norm, &L->mlp_norm_bias));
      MOEEDB_ASSIGN_OR_RETURN(L->wq, get_linear(a + "q_proj.weight"));
      MOEEDB_ASSIGN_OR_RETURN(L->wk, get_linear(a + "k_proj.weight"));
      MOEEDB_ASSIGN_OR_RETURN(L->wv, get_linear(a + "v_proj.weight"));
      MOEEDB_ASSIGN_OR_RETURN(L->wo, get_linear(a + "o_proj.weight"));
      MOEEDB_ASSIGN_OR_RETURN(L->bq, get_bias(a + "q_proj.bias", c.qkv_bias));
      MOEEDB_ASSIGN_OR_RETURN(L->bk, get_bias(a + "k_proj.bias", c.qkv_bias));
      MOEEDB_ASSIGN_OR_RETURN(L->bv, get_bias(a + "v_proj.bias", c.qkv_bias));
      MOEEDB_ASSIGN_OR_RETURN(L->bo, get_bias(a + "o_proj.bias", c.o_bias));
      MOEEDB_ASSIGN_OR_RETURN(L->q_norm, get_opt(a + "q_norm.weight", has_qk_norm));
      MOEEDB_ASSIGN_OR_RETURN(L->k_norm, get_opt(a + "k_norm.weight", has_qk_norm));
      L->moe = c.moe_layer[i];
      if (L->moe) {
        MoeBlockSpec bs{c.hidden_size, c.num_experts, c.top_k, c.expert_intermediate, c.shared_intermediate,
                        c.norm_topk_prob};
        MOEEDB_ASSIGN_OR_RETURN(L->block,
                                MoeBlock::Load(*ckpt, *c.family, p + naming.moe_module + ".", bs, fmt, device, visit));
      } else {
        MOEEDB_ASSIGN_OR_RETURN(at::Tensor g, get(p + "mlp.gate_proj.weight"));
        MOEEDB_ASSIGN_OR_RETURN(at::Tensor u, get(p + "mlp.up_proj.weight"));
        MOEEDB_ASSIGN_OR_RETURN(L->dense_down, get_linear(p + "mlp.down_proj.weight"));
        L->dense_gate_up = LinearWeight::From(at::cat({g, u}, 0), fmt, device);
      }
      m->layers_.push_back(std::move(L));
    }
    // RoPE inverse frequencies, computed in double (the references are float64).
    m->inv_freq_ = at::pow(c.rope_theta, -at::arange(0, c.head_dim, 2, at::kDouble) / static_cast<double>(c.head_dim));
  } catch (const std::exception& e) {
    return Status::Internal("loading " + dir + ": " + e.what());
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(fp));
  m->fingerprint_ = buf;
  m->checkpoint_ = std::move(ckpt);
  if (TrainedPooler::ExistsIn(dir)) {
    MOEEDB_ASSIGN_OR_RETURN(m->pooler_, TrainedPooler::LoadDir(dir));
    MOEEDB_RETURN_IF_ERROR(m->pooler_->CheckFits(c, dir));
  }
  return m;
}

}  // namespace moeedb
