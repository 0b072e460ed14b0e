#include "plugin/server/protocols/qdrant_wire.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace moeedb::qdrant {

std::string CanonicalUuid(const std::string& text) {
  std::string s = text;
  if (s.size() == 45 && (s.rfind("urn:uuid:", 0) == 0 || s.rfind("URN:UUID:", 0) == 0)) s = s.substr(9);
  else if (s.size() == 38 && s.front() == '{' && s.back() == '}') s = s.substr(1, 36);
  std::string hex;
  if (s.size() == 36) {
    for (size_t i = 0; i < s.size(); ++i) {
      if (i == 8 || i == 13 || i == 18 || i == 23) {
        if (s[i] != '-') return "";
      } else {
        hex += s[i];
      }
    }
  } else if (s.size() == 32) {
    hex = s;
  } else {
    return "";
  }
  std::string out;
  for (size_t i = 0; i < hex.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(hex[i]);
    if (!std::isxdigit(c)) return "";
    if (i == 8 || i == 12 || i == 16 || i == 20) out += '-';
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

// A Qdrant point id as moeedb's external id.
Result<std::string> PointId(const json& id) {
  if (id.is_number_unsigned()) return std::to_string(id.get<uint64_t>());
  if (id.is_number_integer() && id.get<int64_t>() >= 0) return std::to_string(id.get<int64_t>());
  if (id.is_string()) {
    const std::string uuid = CanonicalUuid(id.get<std::string>());
    if (!uuid.empty()) return uuid;
  }
  return Bad("a point id must be an unsigned integer or a UUID, got " + id.dump().substr(0, 80));
}

// moeedb's external id as a Qdrant point id.
json QdrantId(const std::string& id) {
  if (!id.empty() && id.size() <= 19 && std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      (id == "0" || id[0] != '0'))
    return std::stoull(id);
  return id;
}


static Result<json> TranslateCondition(const json& c, int depth) {
  if (!c.is_object()) return Bad("a filter condition must be an object");
  if (c.contains("must") || c.contains("should") || c.contains("must_not")) return TranslateFilter(c, depth + 1);
  for (const char* k : {"is_empty", "is_null"}) {
    if (!c.contains(k)) continue;
    const json& e = c[k];
    if (!e.is_object() || !e.contains("key") || !e["key"].is_string())
      return Bad(std::string("'") + k + "' must be {\"key\": a payload field}");
    const std::string key = e["key"].get<std::string>();
    if (std::string(k) == "is_empty") return json{{key, {{"$empty", true}}}};
    return json{{key, {{"$eq", nullptr}}}};
  }
  if (c.contains("has_id")) {
    if (!c["has_id"].is_array()) return Bad("'has_id' must be a list of point ids");
    json ids = json::array();
    for (const auto& raw : c["has_id"]) {
      MOEEDB_ASSIGN_OR_RETURN(std::string id, PointId(raw));
      ids.push_back(id);
    }
    return json{{"$id", {{"$in", ids}}}};
  }
  if (!c.contains("key") || !c["key"].is_string()) {
    for (const char* k : {"nested", "has_vector"})
      if (c.contains(k)) return Bad(std::string("the '") + k + "' condition is not supported by moeedb");
    return Bad("a filter condition needs a 'key' (a payload field)");
  }
  const std::string key = c["key"].get<std::string>();
  if (key.empty() || key.find('[') != std::string::npos)
    return Bad("payload key '" + key + "': moeedb filters payload fields and dotted paths into objects (a.b), not arrays (a[])");
  if (c.contains("match")) {
    const json& m = c["match"];
    if (!m.is_object()) return Bad("'match' must be an object");
    if (m.contains("value")) {
      if (!m["value"].is_string() && !m["value"].is_number_integer() && !m["value"].is_boolean())
        return Bad("'match.value' must be a string, an integer or a boolean");
      return json{{key, {{"$eq", m["value"]}}}};
    }
    if (m.contains("any") && m["any"].is_array()) return json{{key, {{"$in", m["any"]}}}};
    if (m.contains("except") && m["except"].is_array()) return json{{"$not", {{key, {{"$in", m["except"]}}}}}};
    if (m.contains("text") && m["text"].is_string()) return json{{key, {{"$contains", m["text"]}}}};
    return Bad("'match' must be {\"value\"}, {\"any\": [...]}, {\"except\": [...]} or {\"text\": \"...\"}");
  }
  if (c.contains("range")) {
    const json& r = c["range"];
    if (!r.is_object() || r.empty()) return Bad("'range' must be an object of gt, gte, lt, lte");
    json ops = json::object();
    for (auto it = r.begin(); it != r.end(); ++it) {
      if (it.value().is_null()) continue;
      if (it.key() != "gt" && it.key() != "gte" && it.key() != "lt" && it.key() != "lte")
        return Bad("'range' takes gt, gte, lt, lte; not '" + it.key() + "'");
      if (!it.value().is_number()) return Bad("'range." + it.key() + "' must be a number");
      ops["$" + it.key()] = it.value();
    }
    if (ops.empty()) return json::object();
    return json{{key, ops}};
  }
  return Bad("condition on '" + key + "': moeedb supports 'match' and 'range'");
}

Result<json> TranslateFilter(const json& f, int depth) {
  if (depth > 16) return Bad("the filter nests too deep");
  if (!f.is_object()) return Bad("'filter' must be an object");
  json out = json::object();
  json all = json::array();
  for (auto it = f.begin(); it != f.end(); ++it) {
    const std::string& k = it.key();
    if (k == "min_should") return Bad("'min_should' is not supported by moeedb");
    if (k != "must" && k != "should" && k != "must_not") return Bad("unknown filter field '" + k + "' (must, should, must_not)");
    if (it.value().is_null()) continue;
    // A single condition may be given without a list.
    const json list = it.value().is_array() ? it.value() : json::array({it.value()});
    json parts = json::array();
    for (const auto& c : list) {
      MOEEDB_ASSIGN_OR_RETURN(json t, TranslateCondition(c, depth));
      parts.push_back(std::move(t));
    }
    if (parts.empty()) continue;
    if (k == "must") for (auto& p : parts) all.push_back(std::move(p));
    else if (k == "should") all.push_back({{"$or", parts}});
    else all.push_back({{"$not", {{"$or", parts}}}});
  }
  if (!all.empty()) out["$and"] = all;
  return out;
}

// The filter of a request as moeedb filter JSON ("" for none).
Result<std::string> FilterOf(const json& j) {
  if (!j.contains("filter") || j["filter"].is_null()) return std::string();
  MOEEDB_ASSIGN_OR_RETURN(json f, TranslateFilter(j["filter"], 0));
  return f.empty() ? std::string() : f.dump();
}

Status RefuseUnknown(const json& j, std::initializer_list<const char*> known, const std::string& what) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; }))
      return Bad("unknown field '" + it.key().substr(0, 80) + "' in " + what);
  return Status::OK();
}

Result<size_t> Count(const json& j, const char* key, size_t fallback, size_t max) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number_unsigned() && !(j[key].is_number_integer() && j[key].get<int64_t>() >= 0))
    return Bad(std::string("'") + key + "' must be a non-negative integer");
  const uint64_t v = j[key].get<uint64_t>();
  if (v > max) return Bad(std::string("'") + key + "' must be at most " + std::to_string(max));
  return static_cast<size_t>(v);
}

Result<SearchSpec> QuerySpec(const json& j, size_t offset) {
  SearchSpec s;
  auto set = [&](const char* field, const json& v, const std::string& label) {
    return spec::SetFieldAs(*spec::FindField(SearchFields(), field), v, label, &s);
  };
  json limit = j.contains("limit") && !j["limit"].is_null() ? j["limit"] : json(s.k);
  if (offset > 0 && limit.is_number_integer() && limit.get<int64_t>() >= 0) limit = limit.get<int64_t>() + static_cast<int64_t>(offset);
  MOEEDB_RETURN_IF_ERROR(set("k", limit, offset > 0 ? "'limit' + 'offset'" : "'limit'"));
  MOEEDB_ASSIGN_OR_RETURN(const std::string use, Using(j));
  if (use == "hs" || use == "rw") MOEEDB_RETURN_IF_ERROR(set("mode", use, "'using'"));
  if (j.contains("params") && !j["params"].is_null()) {
    const json& p = j["params"];
    if (!p.is_object()) return Bad("'params' must be an object");
    // Qdrant's HNSW and quantization knobs tune its own storage: accepted, no effect.
    if (p.contains("alpha")) MOEEDB_RETURN_IF_ERROR(set("alpha", p["alpha"], "'params.alpha'"));
    if (p.contains("exact")) MOEEDB_RETURN_IF_ERROR(set("exact", p["exact"], "'params.exact'"));
  }
  MOEEDB_ASSIGN_OR_RETURN(std::string filter, FilterOf(j));
  MOEEDB_RETURN_IF_ERROR(s.SetFilter(filter));
  MOEEDB_RETURN_IF_ERROR(s.Check(spec::Spelling::kJson));
  return s;
}

Result<std::string> Using(const json& j) {
  if (!j.contains("using") || j["using"].is_null()) return std::string();
  if (!j["using"].is_string()) return Bad("'using' must be a string");
  return j["using"].get<std::string>();
}

Result<PayloadSelector> PayloadSelector::Parse(const json& w, bool fallback) {
  PayloadSelector s;
  auto keys = [](const json& list, std::vector<std::string>* out) -> Status {
    if (!list.is_array()) return Bad("'with_payload' lists must be arrays of keys");
    for (const auto& k : list) {
      if (!k.is_string()) return Bad("'with_payload' keys must be strings");
      out->push_back(k.get<std::string>());
    }
    return Status::OK();
  };
  if (w.is_null()) {
    s.none_ = !fallback;
  } else if (w.is_boolean()) {
    s.none_ = !w.get<bool>();
  } else if (w.is_array()) {
    s.all_ = false;
    MOEEDB_RETURN_IF_ERROR(keys(w, &s.include_));
  } else if (w.is_object() && (w.contains("include") || w.contains("exclude")) && w.size() == 1) {
    if (w.contains("include")) {
      s.all_ = false;
      MOEEDB_RETURN_IF_ERROR(keys(w["include"], &s.include_));
    } else {
      MOEEDB_RETURN_IF_ERROR(keys(w["exclude"], &s.exclude_));
    }
  } else {
    return Bad("'with_payload' is true, false, a list of keys, {\"include\": [...]} or {\"exclude\": [...]}");
  }
  return s;
}

json PayloadSelector::Apply(const json& payload) const {
  if (none_) return nullptr;
  if (!payload.is_object()) return json::object();
  json out = json::object();
  if (all_) {
    out = payload;
    for (const auto& k : exclude_) out.erase(k);
    return out;
  }
  for (const auto& k : include_)
    if (payload.contains(k)) out[k] = payload[k];
  return out;
}

// A formula over the prefetches' scores: numbers, "$score" / "$score[i]",
// {"sum": [...]}, {"mult": [...]}, {"neg": x}, {"div": {"left", "right", "by_zero_default"}}.
Result<ScoreFormula> ParseFormula(const json& e, int depth) {
  if (depth > 32) return Bad("the formula nests too deep");
  if (e.is_number()) return ScoreFormula::Constant(e.get<double>());
  if (e.is_string()) {
    const std::string s = e.get<std::string>();
    if (s == "$score") return ScoreFormula::PrefetchScore(0);
    if (s.rfind("$score[", 0) == 0 && s.back() == ']') {
      char* end = nullptr;
      const long v = std::strtol(s.c_str() + 7, &end, 10);
      if (end != s.c_str() + s.size() - 1 || v < 0) return Bad("bad score reference '" + s.substr(0, 80) + "'");
      return ScoreFormula::PrefetchScore(static_cast<size_t>(v));
    }
    return Bad("formula variable '" + s.substr(0, 80) + "': moeedb formulas use $score[i] and numbers only");
  }
  if (!e.is_object() || e.size() != 1) return Bad("a formula expression is a number, \"$score[i]\" or one of sum, mult, neg, div");
  const std::string op = e.begin().key();
  const json& a = e.begin().value();
  if (op == "sum" || op == "mult") {
    if (!a.is_array() || a.empty()) return Bad("'" + op + "' needs a non-empty list");
    std::vector<ScoreFormula> args;
    for (const auto& x : a) {
      MOEEDB_ASSIGN_OR_RETURN(ScoreFormula f, ParseFormula(x, depth + 1));
      args.push_back(std::move(f));
    }
    return op == "sum" ? ScoreFormula::Sum(std::move(args)) : ScoreFormula::Product(std::move(args));
  }
  if (op == "neg") {
    MOEEDB_ASSIGN_OR_RETURN(ScoreFormula f, ParseFormula(a, depth + 1));
    return ScoreFormula::Negate(std::move(f));
  }
  if (op == "div") {
    if (!a.is_object() || !a.contains("left") || !a.contains("right")) return Bad("'div' needs left and right");
    MOEEDB_ASSIGN_OR_RETURN(ScoreFormula l, ParseFormula(a["left"], depth + 1));
    MOEEDB_ASSIGN_OR_RETURN(ScoreFormula r, ParseFormula(a["right"], depth + 1));
    const double by_zero = a.contains("by_zero_default") && a["by_zero_default"].is_number() ? a["by_zero_default"].get<double>() : 0.0;
    return ScoreFormula::Divide(std::move(l), std::move(r), by_zero);
  }
  return Bad("formula operator '" + op.substr(0, 40) + "' is not supported (sum, mult, neg, div)");
}

}  // namespace moeedb::qdrant
