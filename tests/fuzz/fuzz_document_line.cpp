// libFuzzer: one JSONL documents line (moeedb ingest's input).
#include <string>

#include "database/document_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto d = moeedb::ParseDocumentLine(std::string(reinterpret_cast<const char*>(data), size));
  if (d.ok() && (d->id.empty() || d->metadata_json.empty())) __builtin_trap();  // the contract
  return 0;
}
