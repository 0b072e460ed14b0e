#include "engine/embed/embedder.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

#include "engine/model/model.h"

namespace moeedb {

Embedder::Embedder(const MoeModel* model, const TokenEncoder* encoder, EmbedderOptions options)
    : model_(model), encoder_(encoder), options_(std::move(options)) {}

RouterReadout Embedder::rw_readout() const {
  return options_.rw_readout_default ? model_->config().family->rw_readout : options_.rw_readout;
}

Status Embedder::CheckIds(const std::vector<int32_t>& ids) const {
  if (ids.empty()) return Status::InvalidArgument("no token ids");
  // Learned positions end at the table's last row (RoPE has no end).
  const int64_t positions = model_->config().max_positions;
  if (positions > 0 && static_cast<int64_t>(ids.size()) > positions)
    return Status::InvalidArgument(std::to_string(ids.size()) + " tokens, more than the model's " +
                                   std::to_string(positions) + " positions");
  const int64_t vocab = model_->config().vocab_size;
  for (int32_t id : ids)
    if (id < 0 || id >= vocab)
      return Status::InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                     std::to_string(vocab) + ")");
  return Status::OK();
}

Status Embedder::CheckAllIds(const std::vector<std::vector<int32_t>>& ids) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (Status st = CheckIds(ids[i]); !st.ok())
      return Status::InvalidArgument("input " + std::to_string(i) + ": " + st.message());
  return Status::OK();
}

Result<std::vector<int32_t>> Embedder::Tokenize(std::string_view text) const {
  if (encoder_ == nullptr) return Status::InvalidArgument("this embedder has no tokenizer: pass token ids");
  if (text.find_first_not_of(" \t\r\n\v\f") == std::string_view::npos)
    return Status::InvalidArgument("empty text");
  const std::string prompt = ApplyPrompt(options_.prompt, text, options_.instruction);
  MOEEDB_ASSIGN_OR_RETURN(std::vector<int32_t> ids, encoder_->Encode(prompt, /*add_special=*/true));
  if (ids.empty()) return Status::InvalidArgument("text gives no tokens");
  return ids;
}

Result<std::vector<std::vector<int32_t>>> Embedder::TokenizeAll(const std::vector<std::string>& texts) const {
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    auto r = Tokenize(texts[i]);
    if (!r.ok()) return Status(r.status().code() == Status::Code::kInvalidArgument
                                   ? Status::InvalidArgument("input " + std::to_string(i) + ": " + r.status().message())
                                   : r.status());
    ids.push_back(std::move(r).value());
  }
  return ids;
}

Result<std::vector<Embedding>> Embedder::EmbedTexts(const std::vector<std::string>& texts) const {
  MOEEDB_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> ids, TokenizeAll(texts));
  return EmbedIds(ids);
}

Result<std::vector<Embedding>> Embedder::EmbedIds(const std::vector<std::vector<int32_t>>& ids, bool token_states) const {
  MOEEDB_RETURN_IF_ERROR(CheckAllIds(ids));
  std::vector<Embedding> out(ids.size());
  // Longest first; a batch grows while its padded size fits the budget.
  std::vector<size_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a].size() > ids[b].size(); });
  const RouterReadout readout = rw_readout();
  const int64_t E = model_->config().num_experts;
  size_t start = 0;
  while (start < order.size()) {
    const int64_t max_len = static_cast<int64_t>(ids[order[start]].size());
    size_t end = start + 1;
    while (end < order.size() && static_cast<int64_t>(end - start + 1) * max_len <= options_.batch_tokens) ++end;
    std::vector<std::vector<int32_t>> batch;
    for (size_t i = start; i < end; ++i) batch.push_back(ids[order[i]]);
    ForwardOptions fopt;
    fopt.hs_pooling = options_.hs_pooling;
    fopt.rw_pooling = options_.rw_pooling;
    fopt.want_token_states = token_states;
    MOEEDB_ASSIGN_OR_RETURN(ForwardOutput fo, model_->Forward(batch, fopt));
    at::Tensor states = token_states ? fo.token_states.contiguous() : at::Tensor();
    int64_t row = 0;  // the first token state of text b
    at::Tensor rw = fo.router_logits;  // [B, L, E]
    if (readout == RouterReadout::kProbs) rw = at::softmax(rw, -1);
    if (readout == RouterReadout::kLogProbs) rw = at::log_softmax(rw, -1);
    at::Tensor hs = fo.hs.to(at::kFloat).contiguous();
    rw = rw.reshape({rw.size(0), -1}).to(at::kFloat).contiguous();
    for (size_t i = start; i < end; ++i) {
      const int64_t b = static_cast<int64_t>(i - start);
      Embedding& e = out[order[i]];
      const float* hp = hs.data_ptr<float>() + b * hs.size(1);
      const float* rp = rw.data_ptr<float>() + b * rw.size(1);
      e.hs.assign(hp, hp + hs.size(1));
      e.rw.assign(rp, rp + rw.size(1));
      e.tokens = fo.lengths[b];
      if (token_states) {
        const int64_t H = states.size(1);
        const float* sp = states.data_ptr<float>() + row * H;
        e.token_states.assign(sp, sp + e.tokens * H);
        row += e.tokens;
      }
    }
    (void)E;
    start = end;
  }
  return out;
}

}  // namespace moeedb
