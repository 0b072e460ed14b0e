// libFuzzer: the metadata filter parser and matcher over arbitrary bytes
// (the filter a client sends) and a fixed set of documents.
#include <nlohmann/json.hpp>
#include <string>

#include "index/metadata_filter.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto f = moeedb::MetadataFilter::Parse(text);
  if (!f.ok()) return 0;
  static const nlohmann::json docs[] = {
      nlohmann::json::parse(R"({"lang": "en", "year": 2001, "tag": "a", "n": 1.5, "ok": true})"),
      nlohmann::json::parse(R"({"lang": "fr", "year": "1999", "tag": ["a", "b"], "nested": {"x": 1}})"),
      nlohmann::json::object(), nlohmann::json::array(), nlohmann::json(nullptr)};
  for (const auto& d : docs) (void)(*f)->Matches(d);
  return 0;
}
