#include "index/metadata_filter.h"

#include <nlohmann/json.hpp>
#include <vector>

namespace moeedb {

using json = nlohmann::json;

namespace {

struct Condition {
  std::string field;
  std::string op;  // $eq $ne $gt $gte $lt $lte $in
  json value;
};

bool Comparable(const json& a, const json& b) {
  return (a.is_number() && b.is_number()) || (a.is_string() && b.is_string());
}

bool Test(const Condition& c, const json& meta) {
  auto it = meta.find(c.field);
  if (it == meta.end()) return c.op == "$ne";
  const json& v = *it;
  if (c.op == "$eq") return v == c.value;
  if (c.op == "$ne") return v != c.value;
  if (c.op == "$in") {
    for (const auto& x : c.value)
      if (v == x) return true;
    return false;
  }
  if (!Comparable(v, c.value)) return false;
  if (c.op == "$gt") return v > c.value;
  if (c.op == "$gte") return v >= c.value;
  if (c.op == "$lt") return v < c.value;
  if (c.op == "$lte") return v <= c.value;
  return false;
}

class JsonFilter final : public MetadataFilter {
 public:
  explicit JsonFilter(std::vector<Condition> c) : conds_(std::move(c)) {}
  bool Matches(const void* metadata) const override {
    const json& meta = *static_cast<const json*>(metadata);
    if (!meta.is_object()) return conds_.empty();
    for (const auto& c : conds_)
      if (!Test(c, meta)) return false;
    return true;
  }

 private:
  std::vector<Condition> conds_;
};

}  // namespace

Result<std::shared_ptr<const MetadataFilter>> MetadataFilter::Parse(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("filter is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return Status::InvalidArgument("filter must be a JSON object of field conditions");
  std::vector<Condition> conds;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& field = it.key();
    const json& v = it.value();
    if (v.is_object()) {
      if (v.empty()) return Status::InvalidArgument("filter field '" + field + "': empty condition");
      for (auto op = v.begin(); op != v.end(); ++op) {
        const std::string& name = op.key();
        if (name == "$in") {
          if (!op.value().is_array()) return Status::InvalidArgument("filter field '" + field + "': $in needs a list");
        } else if (name == "$gt" || name == "$gte" || name == "$lt" || name == "$lte") {
          if (!op.value().is_number() && !op.value().is_string())
            return Status::InvalidArgument("filter field '" + field + "': " + name + " needs a number or a string");
        } else if (name != "$eq" && name != "$ne") {
          return Status::InvalidArgument("filter field '" + field + "': unknown operator '" + name +
                                         "' (use $eq $ne $gt $gte $lt $lte $in)");
        }
        conds.push_back({field, name, op.value()});
      }
    } else if (v.is_array()) {
      return Status::InvalidArgument("filter field '" + field + "': use {\"$in\": [...]} for set membership");
    } else {
      conds.push_back({field, "$eq", v});
    }
  }
  return std::shared_ptr<const MetadataFilter>(std::make_shared<JsonFilter>(std::move(conds)));
}

}  // namespace moeedb
