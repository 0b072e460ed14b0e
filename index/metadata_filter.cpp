#include "index/metadata_filter.h"

#include <nlohmann/json.hpp>
#include <vector>

namespace moeedb {

using json = nlohmann::json;

namespace {

struct Condition {
  std::string field;
  std::string op;  // $eq $ne $gt $gte $lt $lte $in $nin $contains $not_contains $empty
  json value;
};

// The field's value: the key itself, else a dotted path through nested
// objects; nullptr when absent.
const json* Lookup(const json& meta, const std::string& field) {
  auto it = meta.find(field);
  if (it != meta.end()) return &*it;
  const json* at = &meta;
  size_t start = 0;
  while (true) {
    const size_t dot = field.find('.', start);
    if (!at->is_object()) return nullptr;
    auto next = at->find(field.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (next == at->end()) return nullptr;
    at = &*next;
    if (dot == std::string::npos) return at;
    start = dot + 1;
  }
}

// Equality, where a list matches when any element does.
bool Equal(const json& v, const json& x) {
  if (v == x) return true;
  if (v.is_array() && !x.is_array())
    for (const auto& e : v)
      if (e == x) return true;
  return false;
}

bool InList(const json& v, const json& list) {
  for (const auto& x : list)
    if (Equal(v, x)) return true;
  return false;
}

bool Comparable(const json& a, const json& b) {
  return (a.is_number() && b.is_number()) || (a.is_string() && b.is_string());
}

bool Test(const Condition& c, const json& meta) {
  const json* found = Lookup(meta, c.field);
  if (c.op == "$empty") {
    const bool empty = !found || found->is_null() || (found->is_array() && found->empty());
    return empty == c.value.get<bool>();
  }
  if (!found) return c.op == "$ne" || c.op == "$nin" || c.op == "$not_contains";
  const json& v = *found;
  if (c.op == "$eq") return Equal(v, c.value);
  if (c.op == "$ne") return !Equal(v, c.value);
  if (c.op == "$in") return InList(v, c.value);
  if (c.op == "$nin") return !InList(v, c.value);
  if (c.op == "$contains" || c.op == "$not_contains") {
    bool has = false;
    if (v.is_string() && c.value.is_string()) has = v.get<std::string>().find(c.value.get<std::string>()) != std::string::npos;
    else has = v.is_array() && Equal(v, c.value);
    return has == (c.op == "$contains");
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
  enum class Logic { kAnd, kOr, kNot };
  struct Group {
    Logic logic;
    std::vector<std::shared_ptr<const JsonFilter>> parts;
  };
  JsonFilter(std::vector<Condition> c, std::vector<Group> g) : conds_(std::move(c)), groups_(std::move(g)) {
    for (const auto& x : conds_) uses_ids_ = uses_ids_ || x.field == "$id";
    for (const auto& gr : groups_)
      for (const auto& p : gr.parts) uses_ids_ = uses_ids_ || p->UsesIds();
  }
  bool UsesIds() const override { return uses_ids_; }
  bool Matches(const json& meta) const override {
    if (!meta.is_object()) return conds_.empty() && groups_.empty();
    for (const auto& c : conds_)
      if (!Test(c, meta)) return false;
    for (const auto& g : groups_) {
      bool any = false, all = true;
      for (const auto& p : g.parts) {
        const bool m = p->Matches(meta);
        any = any || m;
        all = all && m;
      }
      if (g.logic == Logic::kAnd && !all) return false;
      if (g.logic == Logic::kOr && !any) return false;
      if (g.logic == Logic::kNot && any) return false;
    }
    return true;
  }

 private:
  std::vector<Condition> conds_;
  std::vector<Group> groups_;
  bool uses_ids_ = false;
};

Result<std::shared_ptr<const JsonFilter>> ParseObject(const json& j, int depth);

// The operand of $and / $or (a list of filters) or $not (a filter).
Result<JsonFilter::Group> ParseGroup(const std::string& name, const json& v, int depth) {
  JsonFilter::Group g{name == "$and" ? JsonFilter::Logic::kAnd : name == "$or" ? JsonFilter::Logic::kOr : JsonFilter::Logic::kNot, {}};
  if (name == "$not") {
    if (!v.is_object()) return Status::InvalidArgument("filter: $not needs a filter object");
    MOEEDB_ASSIGN_OR_RETURN(auto f, ParseObject(v, depth + 1));
    g.parts.push_back(std::move(f));
    return g;
  }
  if (!v.is_array() || v.empty()) return Status::InvalidArgument("filter: " + name + " needs a non-empty list of filter objects");
  for (const auto& x : v) {
    if (!x.is_object()) return Status::InvalidArgument("filter: " + name + " needs a list of filter objects");
    MOEEDB_ASSIGN_OR_RETURN(auto f, ParseObject(x, depth + 1));
    g.parts.push_back(std::move(f));
  }
  return g;
}

Result<std::shared_ptr<const JsonFilter>> ParseObject(const json& j, int depth) {
  if (depth > 32) return Status::InvalidArgument("filter nests deeper than 32 levels");
  std::vector<Condition> conds;
  std::vector<JsonFilter::Group> groups;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& field = it.key();
    const json& v = it.value();
    if (field == "$and" || field == "$or" || field == "$not") {
      MOEEDB_ASSIGN_OR_RETURN(auto g, ParseGroup(field, v, depth));
      groups.push_back(std::move(g));
    } else if (!field.empty() && field[0] == '$' && field != "$id") {
      return Status::InvalidArgument("filter: unknown operator '" + field + "' at the top of a filter ($and $or $not $id)");
    } else if (v.is_object()) {
      if (v.empty()) return Status::InvalidArgument("filter field '" + field + "': empty condition");
      for (auto op = v.begin(); op != v.end(); ++op) {
        const std::string& name = op.key();
        if (name == "$in" || name == "$nin") {
          if (!op.value().is_array()) return Status::InvalidArgument("filter field '" + field + "': " + name + " needs a list");
        } else if (name == "$empty") {
          if (!op.value().is_boolean()) return Status::InvalidArgument("filter field '" + field + "': $empty needs true or false");
        } else if (name == "$contains" || name == "$not_contains") {
          if (op.value().is_object() || op.value().is_array() || op.value().is_null())
            return Status::InvalidArgument("filter field '" + field + "': " + name + " needs a string, number or boolean");
        } else if (name == "$gt" || name == "$gte" || name == "$lt" || name == "$lte") {
          if (!op.value().is_number() && !op.value().is_string())
            return Status::InvalidArgument("filter field '" + field + "': " + name + " needs a number or a string");
        } else if (name != "$eq" && name != "$ne") {
          return Status::InvalidArgument("filter field '" + field + "': unknown operator '" + name +
                                         "' (use $eq $ne $gt $gte $lt $lte $in $nin $contains $not_contains $empty)");
        }
        conds.push_back({field, name, op.value()});
      }
    } else if (v.is_array()) {
      return Status::InvalidArgument("filter field '" + field + "': use {\"$in\": [...]} for set membership");
    } else {
      conds.push_back({field, "$eq", v});
    }
  }
  return std::make_shared<const JsonFilter>(std::move(conds), std::move(groups));
}

}  // namespace

bool MatchesDocument(const MetadataFilter& filter, const std::string& metadata_json, const std::string& id) {
  json meta = json::parse(metadata_json, nullptr, false);
  if (filter.UsesIds() && meta.is_object()) meta["$id"] = id;
  return filter.Matches(meta);
}

Result<std::shared_ptr<const MetadataFilter>> MetadataFilter::Parse(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("filter is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return Status::InvalidArgument("filter must be a JSON object of field conditions");
  MOEEDB_ASSIGN_OR_RETURN(auto f, ParseObject(j, 0));
  return std::shared_ptr<const MetadataFilter>(std::move(f));
}

}  // namespace moeedb
