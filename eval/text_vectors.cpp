#include "eval/text_vectors.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "eval/datasets.h"

namespace moeedb::eval {

namespace fs = std::filesystem;

Result<TextVectors> TextVectors::Load(const std::string& texts_jsonl, const std::string& vectors_f32) {
  std::ifstream tf(texts_jsonl);
  if (!tf) return Status::NotFound("cannot read " + texts_jsonl);
  std::vector<std::string> texts;
  std::string line;
  for (size_t n = 1; std::getline(tf, line); ++n) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
      return Status::InvalidArgument(texts_jsonl + ":" + std::to_string(n) + ": not a {\"text\": ...} object");
    texts.push_back(j["text"].get<std::string>());
  }
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(vectors_f32, ec);
  if (ec) return Status::NotFound("cannot read " + vectors_f32);
  if (texts.empty() || bytes == 0 || bytes % (4 * texts.size()) != 0)
    return Status::InvalidArgument(vectors_f32 + ": " + std::to_string(bytes) + " bytes is not one float32 row for each of the " +
                                   std::to_string(texts.size()) + " texts of " + texts_jsonl);
  TextVectors v;
  v.dim_ = bytes / 4 / texts.size();
  v.data_.resize(bytes / 4);
  std::ifstream vf(vectors_f32, std::ios::binary);
  if (!vf.read(reinterpret_cast<char*>(v.data_.data()), static_cast<std::streamsize>(bytes)))
    return Status::IOError("cannot read " + vectors_f32);
  for (size_t i = 0; i < texts.size(); ++i) v.row_.emplace(std::move(texts[i]), i);
  return v;
}

Result<std::vector<float>> TextVectors::Of(const std::string& text) const {
  auto it = row_.find(text);
  if (it == row_.end()) return Status::NotFound("no vector for the text \"" + text.substr(0, 80) + "\"");
  const float* p = data_.data() + it->second * dim_;
  return std::vector<float>(p, p + dim_);
}

Result<std::vector<std::vector<float>>> TextVectors::Of(const std::vector<std::string>& texts) const {
  std::vector<std::vector<float>> out;
  out.reserve(texts.size());
  for (const auto& t : texts) {
    MOEEDB_ASSIGN_OR_RETURN(std::vector<float> v, Of(t));
    out.push_back(std::move(v));
  }
  return out;
}

Result<std::vector<std::string>> EvalTexts(const std::string& eval_dir) {
  const fs::path d(eval_dir);
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  auto add = [&](const std::string& t) {
    if (seen.insert(t).second) out.push_back(t);
  };
  for (const char* split : {"stsb-en-dev.csv", "stsb-en-test.csv"}) {
    MOEEDB_ASSIGN_OR_RETURN(auto pairs, LoadSts((d / "stsb" / split).string()));
    for (const auto& p : pairs) {
      add(p.a);
      add(p.b);
    }
  }
  for (const char* split : {"train.csv", "test.csv"}) {
    MOEEDB_ASSIGN_OR_RETURN(auto rows, LoadLabeled((d / "banking77" / split).string()));
    for (const auto& r : rows) add(r.text);
  }
  MOEEDB_ASSIGN_OR_RETURN(RetrievalSet cran, LoadCranfield((d / "cranfield").string()));
  for (const auto& t : cran.doc_texts) add(t);
  for (const auto& t : cran.queries) add(t);
  return out;
}

}  // namespace moeedb::eval
