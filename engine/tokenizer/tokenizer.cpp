#include "engine/tokenizer/tokenizer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/wordpiece_tokenizer.h"

namespace moeedb {

Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot open tokenizer file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument(path + ": not valid JSON");
  const nlohmann::json m = j.value("model", nlohmann::json());
  const std::string type =
      m.is_object() && m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : std::string("BPE");
  if (type == "WordPiece") {
    MOEEDB_ASSIGN_OR_RETURN(auto t, WordPieceTokenizer::FromJson(text, path));
    return std::unique_ptr<Tokenizer>(std::move(t));
  }
  if (type != "BPE")
    return Status::NotSupported(path + ": tokenizer model type '" + type + "' is not supported (BPE, WordPiece)");
  MOEEDB_ASSIGN_OR_RETURN(auto t, BpeTokenizer::FromJson(text, path));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace moeedb
