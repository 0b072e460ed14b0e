#include "plugin/server/protocols/qdrant_wire.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "index/metadata_filter.h"

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


static Result<json> TranslateCondition(const json& c, int depth);

// A list of conditions (or one, given without a list) translated.
static Result<json> TranslateConditions(const json& v, int depth) {
  const json list = v.is_array() ? v : json::array({v});
  json parts = json::array();
  for (const auto& c : list) {
    MOEEDB_ASSIGN_OR_RETURN(json t, TranslateCondition(c, depth));
    parts.push_back(std::move(t));
  }
  return parts;
}

// A {"key": ...} operand's key (is_empty, is_null, nested), a well-formed Qdrant key.
static Result<std::string> KeyOf(const json& e, const std::string& what) {
  if (!e.is_object() || !e.contains("key") || !e["key"].is_string() || e["key"].get<std::string>().empty())
    return Bad("'" + what + "' must be {\"key\": a payload field}");
  MOEEDB_RETURN_IF_ERROR(PayloadKey::Parse(e["key"].get<std::string>()).status());
  return e["key"].get<std::string>();
}

// Qdrant's range (numbers) or datetime range (RFC 3339 strings) as moeedb's operators.
static Result<json> TranslateRange(const std::string& key, const json& r, const char* what) {
  if (!r.is_object()) return Bad("'" + std::string(what) + "' must be an object of gt, gte, lt, lte");
  bool times = false;
  for (auto it = r.begin(); it != r.end(); ++it) times = times || it.value().is_string();
  json ops = json::object();
  for (auto it = r.begin(); it != r.end(); ++it) {
    if (it.value().is_null()) continue;
    if (it.key() != "gt" && it.key() != "gte" && it.key() != "lt" && it.key() != "lte")
      return Bad("'" + std::string(what) + "' takes gt, gte, lt, lte; not '" + it.key().substr(0, 40) + "'");
    int64_t t;
    if (times && (!it.value().is_string() || !ParseDatetime(it.value().get<std::string>(), &t)))
      return Bad("'" + std::string(what) + "." + it.key() + "' on '" + key.substr(0, 80) +
                 "' must be a datetime (RFC 3339, e.g. \"2024-01-31T10:00:00Z\")");
    if (!times && !it.value().is_number())
      return Bad("'" + std::string(what) + "." + it.key() + "' on '" + key.substr(0, 80) + "' must be a number");
    ops[(times ? "$time_" : "$") + it.key()] = it.value();
  }
  if (ops.empty()) return json::object();
  return json{{key, ops}};
}

static Result<json> TranslateCondition(const json& c, int depth) {
  if (!c.is_object()) return Bad("a filter condition must be an object");
  if (c.contains("must") || c.contains("should") || c.contains("must_not") || c.contains("min_should"))
    return TranslateFilter(c, depth + 1);
  if (c.contains("is_empty")) {
    MOEEDB_ASSIGN_OR_RETURN(std::string key, KeyOf(c["is_empty"], "is_empty"));
    return json{{key, {{"$empty", true}}}};
  }
  if (c.contains("is_null")) {
    MOEEDB_ASSIGN_OR_RETURN(std::string key, KeyOf(c["is_null"], "is_null"));
    return json{{key, {{"$null", true}}}};
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
  if (c.contains("has_vector")) {
    if (!c["has_vector"].is_string()) return Bad("'has_vector' must be a vector's name");
    return json{{"$has_vector", c["has_vector"]}};
  }
  if (c.contains("nested")) {
    const json& n = c["nested"];
    MOEEDB_ASSIGN_OR_RETURN(std::string key, KeyOf(n, "nested"));
    if (!n.contains("filter") || !n["filter"].is_object()) return Bad("'nested' needs a 'filter'");
    MOEEDB_ASSIGN_OR_RETURN(json inner, TranslateFilter(n["filter"], depth + 1));
    return json{{"$nested", {{"key", key}, {"filter", inner}}}};
  }
  if (!c.contains("key") || !c["key"].is_string())
    return Bad("a filter condition needs a 'key' (a payload field), or is one of must, should, must_not, min_should, "
               "is_empty, is_null, has_id, has_vector, nested");
  const std::string key = c["key"].get<std::string>();
  if (key.empty()) return Bad("a filter condition's 'key' must not be empty");
  MOEEDB_RETURN_IF_ERROR(PayloadKey::Parse(key).status());  // Qdrant's keys are paths: a malformed one is refused
  // Qdrant reads the first of these a condition gives.
  if (c.contains("match") && !c["match"].is_null()) {
    const json& m = c["match"];
    if (!m.is_object()) return Bad("'match' on '" + key.substr(0, 80) + "' must be an object");
    if (m.contains("value")) {
      if (!m["value"].is_string() && !m["value"].is_number_integer() && !m["value"].is_boolean())
        return Bad("'match.value' on '" + key.substr(0, 80) + "' must be a string, an integer or a boolean");
      return json{{key, {{"$eq", m["value"]}}}};
    }
    if (m.contains("any") && m["any"].is_array()) return json{{key, {{"$in", m["any"]}}}};
    if (m.contains("except") && m["except"].is_array()) return json{{key, {{"$except", m["except"]}}}};
    for (const char* k : {"text", "phrase"})
      if (m.contains(k) && m[k].is_string()) return json{{key, {{"$text", m[k]}}}};
    if (m.contains("text_any") && m["text_any"].is_string()) return json{{key, {{"$text_any", m["text_any"]}}}};
    return Bad("'match' on '" + key.substr(0, 80) +
               "' must be {\"value\"}, {\"any\": [...]}, {\"except\": [...]}, {\"text\"}, {\"phrase\"} or {\"text_any\"}");
  }
  if (c.contains("range") && !c["range"].is_null()) return TranslateRange(key, c["range"], "range");
  const std::pair<const char*, const char*> areas[] = {
      {"geo_bounding_box", "$geo_box"}, {"geo_radius", "$geo_radius"}, {"values_count", "$values_count"}, {"geo_polygon", "$geo_polygon"}};
  for (const auto& [qdrant, ours] : areas)
    if (c.contains(qdrant) && !c[qdrant].is_null()) {
      json operand = c[qdrant];
      if (operand.is_object())
        for (auto it = operand.begin(); it != operand.end();)
          it = it.value().is_null() ? operand.erase(it) : std::next(it);
      return json{{key, {{ours, operand}}}};
    }
  return Bad("condition on '" + key.substr(0, 80) +
             "' needs one of match, range, geo_bounding_box, geo_radius, geo_polygon, values_count");
}

Result<json> TranslateFilter(const json& f, int depth) {
  if (depth > 16) return Bad("the filter nests too deep");
  if (!f.is_object()) return Bad("'filter' must be an object");
  json all = json::array();
  for (auto it = f.begin(); it != f.end(); ++it) {
    const std::string& k = it.key();
    if (k != "must" && k != "should" && k != "must_not" && k != "min_should")
      return Bad("unknown filter field '" + k.substr(0, 80) + "' (must, should, must_not, min_should)");
    if (it.value().is_null()) continue;
    if (k == "min_should") {
      const json& m = it.value();
      if (!m.is_object() || !m.contains("conditions") || !m.contains("min_count") || !m["min_count"].is_number_unsigned())
        return Bad("'min_should' must be {\"conditions\": [...], \"min_count\": a count}");
      MOEEDB_ASSIGN_OR_RETURN(json parts, TranslateConditions(m["conditions"], depth));
      all.push_back({{"$min_should", {{"min_count", m["min_count"]}, {"filters", parts}}}});
      continue;
    }
    MOEEDB_ASSIGN_OR_RETURN(json parts, TranslateConditions(it.value(), depth));
    if (parts.empty()) continue;  // Qdrant: an empty list is no condition
    if (k == "must") for (auto& p : parts) all.push_back(std::move(p));
    else if (k == "should") all.push_back({{"$or", parts}});
    else all.push_back({{"$not", {{"$or", parts}}}});
  }
  json out = json::object();
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
    // hnsw_ef and indexed_only tune Qdrant's own storage: accepted, no effect.
    if (p.contains("alpha")) MOEEDB_RETURN_IF_ERROR(set("alpha", p["alpha"], "'params.alpha'"));
    if (p.contains("exact")) MOEEDB_RETURN_IF_ERROR(set("exact", p["exact"], "'params.exact'"));
    if (p.contains("quantization") && !p["quantization"].is_null()) {
      const json& q = p["quantization"];
      if (!q.is_object()) return Bad("'params.quantization' must be an object {\"ignore\", \"rescore\", \"oversampling\"}");
      MOEEDB_RETURN_IF_ERROR(RefuseUnknown(q, {"ignore", "rescore", "oversampling"}, "'params.quantization'"));
      if (q.contains("oversampling") && !q["oversampling"].is_null())
        MOEEDB_RETURN_IF_ERROR(set("oversample", q["oversampling"], "'params.quantization.oversampling'"));
      for (const char* flag : {"ignore", "rescore"})
        if (q.contains(flag) && !q[flag].is_null() && !q[flag].is_boolean())
          return Bad(std::string("'params.quantization.") + flag + "' must be a boolean");
      if (q.value("ignore", json(false)) == json(true)) MOEEDB_RETURN_IF_ERROR(set("exact", true, "'params.quantization.ignore'"));
    }
  }
  MOEEDB_ASSIGN_OR_RETURN(std::string filter, FilterOf(j));
  MOEEDB_RETURN_IF_ERROR(s.SetFilter(filter));
  MOEEDB_RETURN_IF_ERROR(s.Check(spec::Spelling::kJson));
  return s;
}

Status ApplyQuantizationConfig(const json& config, DualIndexSpec* index) {
  if (config.is_null()) return Status::OK();
  if (config == json("Disabled")) {  // an update's way to say none
    index->hs.codes = index->rw.codes = CodeKind::kNone;
    return Status::OK();
  }
  if (!config.is_object() || config.size() != 1)
    return Bad("'quantization_config' must be one of {\"scalar\": {...}}, {\"product\": {...}}, {\"binary\": {...}}");
  const std::string kind = config.begin().key();
  const json& p = config.begin().value();
  if (!p.is_object()) return Bad("'quantization_config." + kind.substr(0, 40) + "' must be an object");
  CodeKind codes = CodeKind::kNone;
  int pq_dims = index->hs.pq_dims;
  if (kind == "scalar") {
    MOEEDB_RETURN_IF_ERROR(RefuseUnknown(p, {"type", "quantile", "always_ram"}, "'quantization_config.scalar'"));
    if (p.value("type", json("int8")) != json("int8")) return Bad("'quantization_config.scalar.type' must be \"int8\"");
    codes = CodeKind::kSq8;
  } else if (kind == "product") {
    MOEEDB_RETURN_IF_ERROR(RefuseUnknown(p, {"compression", "always_ram"}, "'quantization_config.product'"));
    // One byte per sub-quantizer: compression xN of 4-byte floats is N/4 dimensions a byte.
    static const std::pair<const char*, int> kCompression[] = {{"x4", 1}, {"x8", 2}, {"x16", 4}, {"x32", 8}, {"x64", 16}};
    const json c = p.value("compression", json());
    bool known = false;
    for (auto [name, dims] : kCompression)
      if (c == json(name)) pq_dims = dims, known = true;
    if (!known) return Bad("'quantization_config.product.compression' must be one of x4, x8, x16, x32, x64");
    codes = CodeKind::kPq;
  } else if (kind == "binary") {
    MOEEDB_RETURN_IF_ERROR(RefuseUnknown(p, {"always_ram", "encoding", "query_encoding"}, "'quantization_config.binary'"));
    if (p.contains("encoding") && !p["encoding"].is_null() && p["encoding"] != json("one_bit"))
      return Bad("'quantization_config.binary.encoding': moeedb's binary codes are one_bit");
    codes = CodeKind::kBinary;
  } else {
    return Bad("'quantization_config' must be one of {\"scalar\": {...}}, {\"product\": {...}}, {\"binary\": {...}}; got '" +
               kind.substr(0, 40) + "'");
  }
  index->hs.codes = index->rw.codes = codes;
  index->hs.pq_dims = index->rw.pq_dims = pq_dims;
  return Status::OK();
}

json QuantizationConfig(const SignalIndexSpec& index) {
  switch (index.codes) {
    case CodeKind::kSq8: return {{"scalar", {{"type", "int8"}, {"always_ram", true}}}};
    case CodeKind::kPq: return {{"product", {{"compression", "x" + std::to_string(4 * index.pq_dims)}, {"always_ram", true}}}};
    case CodeKind::kBinary: return {{"binary", {{"always_ram", true}}}};
    // 4-bit scalar codes have no Qdrant spelling: reported as scalar.
    case CodeKind::kSq4: return {{"scalar", {{"type", "int8"}, {"always_ram", true}}}};
    case CodeKind::kNone: break;
  }
  return nullptr;
}

Result<std::string> Using(const json& j) {
  if (!j.contains("using") || j["using"].is_null()) return std::string();
  if (!j["using"].is_string()) return Bad("'using' must be a string");
  return j["using"].get<std::string>();
}

Result<VectorSelector> VectorSelector::Parse(const json& w) {
  VectorSelector s;
  if (w.is_null()) return s;
  if (w.is_boolean()) {
    s.all_ = w.get<bool>();
    return s;
  }
  if (!w.is_array()) return Bad("'with_vector' must be true, false or a list of vector names");
  for (const auto& n : w) {
    if (!n.is_string()) return Bad("'with_vector' must be true, false or a list of vector names");
    s.names_.push_back(n.get<std::string>());
  }
  return s;
}

bool VectorSelector::Keeps(const std::string& name) const {
  return all_ || std::find(names_.begin(), names_.end(), name) != names_.end();
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

namespace {

// A key path cut where Qdrant compares selector patterns: "a.b[].c" as
// "a", ".b", "]", ".c" (each '.' starts a part, each '[' ends one).
std::vector<std::string> PatternParts(const std::string& s) {
  std::vector<std::string> parts(1);
  for (char ch : s) {
    if (ch == '.') parts.emplace_back(".");
    else if (ch == '[') parts.emplace_back();
    else parts.back() += ch;
  }
  return parts;
}

// Whether the parts agree as far as both go.
bool PrefixesAgree(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// The payload with the keys (paths, "[]" for list elements) `keep` refuses left out, recursively.
json FilterPayload(const json& v, const std::function<bool(const std::string&)>& keep, const std::string& path) {
  if (v.is_object()) {
    json out = json::object();
    const std::string prefix = path.empty() ? "" : path + ".";
    for (auto it = v.begin(); it != v.end(); ++it)
      if (keep(prefix + it.key())) out[it.key()] = FilterPayload(it.value(), keep, prefix + it.key());
    return out;
  }
  if (v.is_array()) {
    json out = json::array();
    const std::string at = path + "[]";
    for (const auto& e : v)
      if (keep(at)) out.push_back(FilterPayload(e, keep, at));
    return out;
  }
  return v;
}

}  // namespace

json PayloadSelector::Apply(const json& payload) const {
  if (none_) return nullptr;
  if (!payload.is_object()) return json::object();
  if (all_ && exclude_.empty()) return payload;
  // Qdrant's rules (qdrant-client's local mode): an included pattern keeps
  // the keys above and below it; an excluded one removes its key and all
  // below it.
  return FilterPayload(
      payload,
      [&](const std::string& key) {
        const std::vector<std::string> k = PatternParts(key);
        if (all_) {
          for (const auto& p : exclude_)
            if (p.size() <= key.size() && PrefixesAgree(PatternParts(p), k)) return false;
          return true;
        }
        for (const auto& p : include_)
          if (PrefixesAgree(PatternParts(p), k)) return true;
        return false;
      },
      "");
}

// A formula expression (Qdrant's): a number, a variable ("$score",
// "$score[i]", a payload key), a condition (any filter condition), or one
// object of sum, mult, neg, abs, div, sqrt, pow, exp, log10, ln,
// geo_distance, datetime, datetime_key, lin_decay, exp_decay, gauss_decay.
Result<ScoreFormula> ParseFormula(const json& e, int depth) {
  if (depth > 32) return Bad("the formula nests too deep");
  if (e.is_number()) return ScoreFormula::Constant(e.get<double>());
  if (e.is_string()) {
    const std::string s = e.get<std::string>();
    if (s == "$score") return ScoreFormula::PrefetchScore(0, s);
    if (s.rfind("$score", 0) == 0) {
      char* end = nullptr;
      const long v = s.size() > 7 && s[6] == '[' ? std::strtol(s.c_str() + 7, &end, 10) : -1;
      if (v < 0 || end == s.c_str() + 7 || end != s.c_str() + s.size() - 1 || s.back() != ']')
        return Bad("Invalid score pattern: " + s.substr(0, 80));
      return ScoreFormula::PrefetchScore(static_cast<size_t>(v), s);
    }
    MOEEDB_ASSIGN_OR_RETURN(PayloadKey key, PayloadKey::Parse(s));
    return ScoreFormula::PayloadNumber(std::move(key));
  }
  if (!e.is_object() || e.empty()) return Bad("a formula expression is a number, a variable, a condition or an operation");
  const std::string op = e.begin().key();
  const json& a = e.begin().value();
  auto sub = [&](const json& x) { return ParseFormula(x, depth + 1); };
  static const char* const kUnary[] = {"neg", "abs", "sqrt", "exp", "log10", "ln"};
  const bool unary = std::find(std::begin(kUnary), std::end(kUnary), op) != std::end(kUnary);
  const bool known = unary || op == "sum" || op == "mult" || op == "div" || op == "pow" || op == "geo_distance" ||
                     op == "datetime" || op == "datetime_key" || op == "lin_decay" || op == "exp_decay" || op == "gauss_decay";
  if (!known || e.size() != 1) {
    // Any other object is a filter condition: 1 where a point meets it, else 0.
    MOEEDB_ASSIGN_OR_RETURN(json f, TranslateFilter(json{{"must", json::array({e})}}, depth + 1));
    MOEEDB_ASSIGN_OR_RETURN(auto filter, MetadataFilter::Parse(f.dump()));
    return ScoreFormula::Condition(std::move(filter));
  }
  if (op == "sum" || op == "mult") {
    if (!a.is_array() || a.empty()) return Bad("'" + op + "' needs a non-empty list");
    std::vector<ScoreFormula> args;
    for (const auto& x : a) {
      MOEEDB_ASSIGN_OR_RETURN(ScoreFormula f, sub(x));
      args.push_back(std::move(f));
    }
    return op == "sum" ? ScoreFormula::Sum(std::move(args)) : ScoreFormula::Product(std::move(args));
  }
  if (unary) {
    MOEEDB_ASSIGN_OR_RETURN(ScoreFormula f, sub(a));
    if (op == "neg") return ScoreFormula::Negate(std::move(f));
    if (op == "abs") return ScoreFormula::Abs(std::move(f));
    if (op == "sqrt") return ScoreFormula::Sqrt(std::move(f));
    if (op == "exp") return ScoreFormula::Exp(std::move(f));
    if (op == "log10") return ScoreFormula::Log10(std::move(f));
    return ScoreFormula::Ln(std::move(f));
  }
  if (op == "div") {
    if (!a.is_object() || !a.contains("left") || !a.contains("right")) return Bad("'div' needs left and right");
    MOEEDB_ASSIGN_OR_RETURN(ScoreFormula l, sub(a["left"]));
    MOEEDB_ASSIGN_OR_RETURN(ScoreFormula r, sub(a["right"]));
    std::optional<double> by_zero;
    if (a.contains("by_zero_default") && !a["by_zero_default"].is_null()) {
      if (!a["by_zero_default"].is_number()) return Bad("'div.by_zero_default' must be a number");
      by_zero = a["by_zero_default"].get<double>();
    }
    return ScoreFormula::Divide(std::move(l), std::move(r), by_zero);
  }
  if (op == "pow") {
    if (!a.is_object() || !a.contains("base") || !a.contains("exponent")) return Bad("'pow' needs base and exponent");
    MOEEDB_ASSIGN_OR_RETURN(ScoreFormula b, sub(a["base"]));
    MOEEDB_ASSIGN_OR_RETURN(ScoreFormula x, sub(a["exponent"]));
    return ScoreFormula::Pow(std::move(b), std::move(x));
  }
  if (op == "geo_distance") {
    const json origin = a.is_object() ? a.value("origin", json()) : json();
    if (!origin.is_object() || !origin.value("lat", json()).is_number() || !origin.value("lon", json()).is_number() ||
        !a.value("to", json()).is_string())
      return Bad("'geo_distance' needs {\"origin\": {\"lat\", \"lon\"}, \"to\": a payload key}");
    MOEEDB_ASSIGN_OR_RETURN(PayloadKey to, PayloadKey::Parse(a["to"].get<std::string>()));
    return ScoreFormula::GeoDistance(origin["lat"].get<double>(), origin["lon"].get<double>(), std::move(to));
  }
  if (op == "datetime") {
    int64_t micros;
    if (!a.is_string() || !ParseDatetime(a.get<std::string>(), &micros))
      return Bad("Expected datetime in supported format for " + (a.is_string() ? a.get<std::string>().substr(0, 80) : a.dump()));
    return ScoreFormula::Constant(static_cast<double>(micros) / 1e6);
  }
  if (op == "datetime_key") {
    if (!a.is_string()) return Bad("'datetime_key' must be a payload key");
    MOEEDB_ASSIGN_OR_RETURN(PayloadKey key, PayloadKey::Parse(a.get<std::string>()));
    return ScoreFormula::DatetimeKey(std::move(key));
  }
  // The decays: {"x", "target", "midpoint": 0.5, "scale": 1}.
  if (!a.is_object() || !a.contains("x")) return Bad("'" + op + "' needs x");
  MOEEDB_ASSIGN_OR_RETURN(ScoreFormula x, sub(a["x"]));
  std::optional<ScoreFormula> target;
  if (a.contains("target") && !a["target"].is_null()) { MOEEDB_ASSIGN_OR_RETURN(target, sub(a["target"])); }
  auto number = [&](const char* k, double d) -> Result<double> {
    if (!a.contains(k) || a[k].is_null()) return d;
    if (!a[k].is_number()) return Bad("'" + op + "." + k + "' must be a number");
    return a[k].get<double>();
  };
  MOEEDB_ASSIGN_OR_RETURN(double midpoint, number("midpoint", 0.5));
  MOEEDB_ASSIGN_OR_RETURN(double scale, number("scale", 1.0));
  const auto kind = op == "lin_decay" ? ScoreFormula::Decay::kLinear
                    : op == "exp_decay" ? ScoreFormula::Decay::kExponential
                                        : ScoreFormula::Decay::kGauss;
  auto f = ScoreFormula::DecayOf(kind, std::move(x), std::move(target), midpoint, scale);
  if (!f.ok()) return Bad(f.status().message());
  return f;
}

}  // namespace moeedb::qdrant
