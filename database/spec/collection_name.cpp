#include "database/spec/collection_name.h"

#include <cstdio>

#include "base/utf8.h"

namespace moeedb {

namespace {

// The name as an error may show it: printable, at most 80 bytes.
std::string Shown(const std::string& name) {
  std::string out;
  for (unsigned char c : name.substr(0, 80)) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return "'" + out + (name.size() > 80 ? "...'" : "'");
}

}  // namespace

Status CheckCollectionName(const std::string& name) {
  auto bad = [&](const std::string& why) { return Status::InvalidArgument("collection name " + Shown(name) + ": " + why); };
  if (name.empty()) return Status::InvalidArgument("a collection name must not be empty");
  if (name.size() > kMaxCollectionNameBytes)
    return bad("longer than " + std::to_string(kMaxCollectionNameBytes) + " bytes");
  if (!IsValidUtf8(name)) return bad("not valid UTF-8");
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return bad("control characters are not allowed");
    if (c == '/' || c == '\\') return bad("path separators ('/', '\\') are not allowed");
  }
  if (name.find_first_not_of('.') == std::string::npos) return bad("a name of dots only is not allowed");
  return Status::OK();
}

}  // namespace moeedb
