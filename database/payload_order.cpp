#include "database/payload_order.h"

#include <algorithm>
#include <set>

namespace moeedb {

using json = nlohmann::json;

std::optional<double> OrderValue(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_number()) return v.get<double>();
  int64_t micros;
  if (v.is_string() && ParseDatetime(v.get<std::string>(), &micros)) return static_cast<double>(micros);
  return std::nullopt;
}

Result<OrderBySpec> OrderBySpecFromJson(const json& o) {
  OrderBySpec spec;
  if (o.is_string()) {
    spec.key = o.get<std::string>();
    return spec;
  }
  if (!o.is_object() || !o.contains("key") || !o["key"].is_string())
    return Status::InvalidArgument("'order_by' must be a payload key or {\"key\", \"direction\", \"start_from\"}");
  for (auto it = o.begin(); it != o.end(); ++it)
    if (it.key() != "key" && it.key() != "direction" && it.key() != "start_from")
      return Status::InvalidArgument("unknown field '" + it.key().substr(0, 80) + "' in order_by (key, direction, start_from)");
  spec.key = o["key"].get<std::string>();
  if (o.contains("direction") && !o["direction"].is_null()) {
    if (o["direction"] != "asc" && o["direction"] != "desc")
      return Status::InvalidArgument("'order_by.direction' must be \"asc\" or \"desc\"");
    spec.descending = o["direction"] == "desc";
  }
  if (o.contains("start_from") && !o["start_from"].is_null()) {
    spec.start_from = OrderValue(o["start_from"]);
    if (!spec.start_from) return Status::InvalidArgument("'order_by.start_from' must be a number or a datetime");
  }
  MOEEDB_RETURN_IF_ERROR(PayloadKey::Parse(spec.key).status());
  return spec;
}

Result<std::vector<OrderedDocument>> ScanOrdered(const VectorCollection& c, const ScanSpec& which, const OrderBySpec& order,
                                                 size_t limit) {
  MOEEDB_ASSIGN_OR_RETURN(PayloadKey k, PayloadKey::Parse(order.key));
  ScanSpec all = which;
  all.skip = 0;
  all.limit = SIZE_MAX;
  MOEEDB_ASSIGN_OR_RETURN(ScanPage page, Scan(c, all));
  struct Entry {
    double key;
    json value;
    size_t doc;
  };
  std::vector<Entry> entries;
  for (size_t i = 0; i < page.documents.size(); ++i) {
    const json meta = json::parse(page.documents[i].metadata_json, nullptr, false);
    std::set<double> seen;  // a document once per value
    for (const json* v : k.Values(meta)) {
      const std::optional<double> key = OrderValue(*v);
      if (!key || !seen.insert(*key).second) continue;
      json shown = v->is_number() ? *v : json(v->is_boolean() ? json(v->get<bool>() ? 1 : 0) : json(static_cast<int64_t>(*key)));
      entries.push_back({*key, std::move(shown), i});
    }
  }
  // The scan is in id order: a stable sort keeps it among equal values.
  std::stable_sort(entries.begin(), entries.end(), [&](const Entry& a, const Entry& b) {
    return order.descending ? a.key > b.key : a.key < b.key;
  });
  std::vector<OrderedDocument> out;
  for (const Entry& e : entries) {
    if (out.size() == limit) break;
    if (order.start_from && (order.descending ? e.key > *order.start_from : e.key < *order.start_from)) continue;
    out.push_back({page.documents[e.doc], e.value});
  }
  return out;
}

}  // namespace moeedb
