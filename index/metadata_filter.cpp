#include "index/metadata_filter.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace moeedb {

using json = nlohmann::json;

namespace {

// One step of a payload path: a key, every element of a list ("[]"), or one ("[i]").
struct Step {
  enum class Kind { kKey, kEvery, kIndex } kind = Kind::kKey;
  std::string key;
  size_t index = 0;
};

// "a.b[].c[0]" as steps; InvalidArgument for an empty key or a bad bracket.
Result<std::vector<Step>> ParsePath(const std::string& field) {
  std::vector<Step> steps;
  size_t i = 0;
  auto bad = [&](const std::string& why) { return Status::InvalidArgument("filter field '" + field.substr(0, 80) + "': " + why); };
  while (i < field.size()) {
    std::string key;
    if (field[i] == '"') {  // a quoted key may hold dots, or be empty ('""' names the key "")
      const size_t end = field.find('"', i + 1);
      if (end == std::string::npos) return bad("an unclosed quote");
      key = field.substr(i + 1, end - i - 1);
      i = end + 1;
    } else {
      const size_t end = field.find_first_of(".[", i);
      key = field.substr(i, end == std::string::npos ? std::string::npos : end - i);
      i = end == std::string::npos ? field.size() : end;
      if (key.empty()) return bad("an empty key in the path");
    }
    steps.push_back({Step::Kind::kKey, key, 0});
    while (i < field.size() && field[i] == '[') {
      const size_t close = field.find(']', i);
      if (close == std::string::npos) return bad("an unclosed '['");
      const std::string inside = field.substr(i + 1, close - i - 1);
      if (inside.empty()) {
        steps.push_back({Step::Kind::kEvery, "", 0});
      } else {
        if (inside.size() > 9 || inside.find_first_not_of("0123456789") != std::string::npos)
          return bad("'[" + inside + "]' is not an index ([] or [0], [1], ...)");
        steps.push_back({Step::Kind::kIndex, "", std::stoul(inside)});
      }
      i = close + 1;
    }
    if (i < field.size()) {
      if (field[i] != '.') return bad("expected '.' after ']'");
      if (++i == field.size()) return bad("a path may not end with '.'");
    }
  }
  if (steps.empty()) return bad("an empty path");
  return steps;
}

// The values at `steps` from `at` (qdrant-client's value_by_key): a list at
// the last key is flattened into its elements when `flat`.
void Collect(const json& at, const std::vector<Step>& steps, size_t i, bool flat, std::vector<const json*>* out) {
  const Step& s = steps[i];
  const bool last = i + 1 == steps.size();
  const json* next = nullptr;
  if (s.kind == Step::Kind::kKey) {
    if (!at.is_object()) return;
    auto it = at.find(s.key);
    if (it == at.end()) return;
    next = &*it;
    if (last) {
      if (flat && next->is_array())
        for (const auto& e : *next) out->push_back(&e);
      else
        out->push_back(next);
      return;
    }
    Collect(*next, steps, i + 1, flat, out);
    return;
  }
  if (!at.is_array()) return;
  if (s.kind == Step::Kind::kEvery) {
    for (const auto& e : at) {
      if (last) out->push_back(&e);
      else Collect(e, steps, i + 1, flat, out);
    }
    return;
  }
  if (s.index >= at.size()) return;
  if (last) out->push_back(&at[s.index]);
  else Collect(at[s.index], steps, i + 1, flat, out);
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

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// A fixed number of digits at `*i`, advancing past them.
bool Digits(const std::string& s, size_t* i, size_t n, int* out) {
  if (*i + n > s.size()) return false;
  int v = 0;
  for (size_t k = 0; k < n; ++k) {
    const char c = s[*i + k];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *i += n;
  *out = v;
  return true;
}

double Number(const json& j, const char* key) { return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN; }

// A {"lat", "lon"} object's coordinates; false when it is none.
bool LatLon(const json& v, double* lat, double* lon) {
  if (!v.is_object()) return false;
  *lat = Number(v, "lat");
  *lon = Number(v, "lon");
  return std::isfinite(*lat) && std::isfinite(*lon);
}

// Haversine distance in metres over the mean Earth radius (IUGG), as qdrant-client's local mode.
double GeoDistance(double lat1, double lon1, double lat2, double lon2) {
  constexpr double kRadius = 6371008.8, kRad = M_PI / 180;
  const double dlat = (lat2 - lat1) * kRad, dlon = (lon2 - lon1) * kRad;
  const double a = std::pow(std::sin(dlat / 2), 2) + std::cos(lat1 * kRad) * std::cos(lat2 * kRad) * std::pow(std::sin(dlon / 2), 2);
  return kRadius * 2 * std::asin(std::sqrt(a));
}

using Ring = std::vector<std::pair<double, double>>;  // (lat, lon)

// Ray casting; a point on the boundary counts as `boundary`.
bool InRing(double lat, double lon, Ring ring, bool boundary) {
  if (ring.size() > 1 && ring.front() == ring.back()) ring.pop_back();
  bool inside = false;
  for (size_t i = 0, j = ring.size() - 1; i < ring.size(); j = i++) {
    const double xi = ring[i].first, yi = ring[i].second, xj = ring[j].first, yj = ring[j].second;
    const bool on_edge = lon * (xi - xj) + yi * (xj - lat) + yj * (lat - xi) == 0 && (xi - lat) * (xj - lat) <= 0 &&
                         (yi - lon) * (yj - lon) <= 0;
    if (on_edge) return boundary;
    if ((yi > lon) != (yj > lon) && lat < (xj - xi) * (lon - yi) / (yj - yi) + xi) inside = !inside;
  }
  return inside;
}

Result<Ring> ParseRing(const json& r, const std::string& what) {
  const json* points = r.is_object() && r.contains("points") ? &r["points"] : &r;
  if (!points->is_array() || points->size() < 4)
    return Status::InvalidArgument(what + " needs a closed ring of at least 4 points {\"lat\", \"lon\"}");
  Ring ring;
  for (const auto& p : *points) {
    double lat, lon;
    if (!LatLon(p, &lat, &lon)) return Status::InvalidArgument(what + ": a point must be {\"lat\": number, \"lon\": number}");
    ring.push_back({lat, lon});
  }
  if (ring.front() != ring.back()) return Status::InvalidArgument(what + ": the ring must end where it starts");
  return ring;
}

struct Condition {
  std::string field;
  std::vector<Step> path;  // when the field is not a key of the document
  std::string op;          // $eq $ne $in $nin $except $contains $not_contains $text $text_any $empty $null
                           // $range $time $values_count $geo_radius $geo_box $geo_polygon
  json value;
  std::vector<std::pair<std::string, json>> bounds;       // $range, $values_count: gt gte lt lte
  std::vector<std::pair<std::string, int64_t>> times;     // $time: gt gte lt lte in microseconds
  std::vector<std::string> words;                         // $text_any
  double lat = 0, lon = 0, radius = 0, lat2 = 0, lon2 = 0;  // $geo_radius (center), $geo_box (top left, bottom right)
  Ring exterior;
  std::vector<Ring> interiors;

  std::vector<const json*> Values(const json& meta, bool flat) const;
};

// A field's values in `meta`: the key itself, else the path.
std::vector<const json*> FieldValues(const std::string& field, const std::vector<Step>& path, const json& meta, bool flat) {
  std::vector<const json*> out;
  if (meta.is_object()) {
    auto it = meta.find(field);
    if (it != meta.end()) {
      if (flat && it->is_array())
        for (const auto& e : *it) out.push_back(&e);
      else
        out.push_back(&*it);
      return out;
    }
  }
  if (!path.empty()) Collect(meta, path, 0, flat, &out);
  return out;
}

std::vector<const json*> Condition::Values(const json& meta, bool flat) const { return FieldValues(field, path, meta, flat); }

bool InBounds(const json& v, const std::vector<std::pair<std::string, json>>& bounds) {
  for (const auto& [op, b] : bounds) {
    if (!Comparable(v, b)) return false;
    if ((op == "gt" && !(v > b)) || (op == "gte" && !(v >= b)) || (op == "lt" && !(v < b)) || (op == "lte" && !(v <= b)))
      return false;
  }
  return true;
}

bool InTimes(int64_t t, const std::vector<std::pair<std::string, int64_t>>& times) {
  for (const auto& [op, b] : times)
    if ((op == "gt" && !(t > b)) || (op == "gte" && !(t >= b)) || (op == "lt" && !(t < b)) || (op == "lte" && !(t <= b)))
      return false;
  return true;
}

bool Test(const Condition& c, const json& meta) {
  // Conditions on the values as stored, lists not flattened.
  if (c.op == "$empty" || c.op == "$null" || c.op == "$values_count" || c.op == "$contains" || c.op == "$not_contains") {
    const std::vector<const json*> raw = c.Values(meta, /*flat=*/false);
    if (c.op == "$empty") {
      bool empty = true;
      for (const json* v : raw) empty = empty && (v->is_null() || (v->is_array() && v->empty()));
      return empty == c.value.get<bool>();
    }
    if (c.op == "$null") {
      bool any_null = false;
      for (const json* v : raw) any_null = any_null || v->is_null();
      return any_null == c.value.get<bool>();
    }
    if (c.op == "$values_count") {
      if (raw.empty()) return false;
      std::vector<json> counts;
      bool all_null = true;
      for (const json* v : raw) all_null = all_null && v->is_null();
      if (all_null) counts.push_back(0);
      else for (const json* v : raw) counts.push_back(v->is_null() ? 0 : v->is_array() ? v->size() : 1);
      // A bound fails only when every count misses it (qdrant-client's rule).
      for (const auto& bound : c.bounds) {
        bool any = false;
        for (const json& n : counts) any = any || InBounds(n, {bound});
        if (!any) return false;
      }
      return true;
    }
    bool has = false;
    for (const json* v : raw) {
      if (v->is_string() && c.value.is_string()) has = has || v->get<std::string>().find(c.value.get<std::string>()) != std::string::npos;
      else has = has || (v->is_array() && Equal(*v, c.value));
    }
    return raw.empty() ? c.op == "$not_contains" : has == (c.op == "$contains");
  }
  const std::vector<const json*> values = c.Values(meta, /*flat=*/true);
  if (values.empty()) return c.op == "$ne" || c.op == "$nin";
  auto any = [&](const std::function<bool(const json&)>& f) {
    for (const json* v : values)
      if (f(*v)) return true;
    return false;
  };
  if (c.op == "$eq") return any([&](const json& v) { return Equal(v, c.value); });
  if (c.op == "$ne") return !any([&](const json& v) { return Equal(v, c.value); });
  if (c.op == "$in") return any([&](const json& v) { return InList(v, c.value); });
  if (c.op == "$nin") return !any([&](const json& v) { return InList(v, c.value); });
  if (c.op == "$except") return any([&](const json& v) { return !InList(v, c.value); });
  if (c.op == "$text")
    return any([&](const json& v) { return v.is_string() && v.get<std::string>().find(c.value.get<std::string>()) != std::string::npos; });
  if (c.op == "$text_any")
    return any([&](const json& v) {
      if (!v.is_string()) return false;
      const std::string& s = v.get_ref<const std::string&>();
      for (const auto& w : c.words)
        if (s.find(w) != std::string::npos) return true;
      return false;
    });
  if (c.op == "$range") return any([&](const json& v) { return InBounds(v, c.bounds); });
  if (c.op == "$time")
    return any([&](const json& v) {
      int64_t t;
      return v.is_string() && ParseDatetime(v.get<std::string>(), &t) && InTimes(t, c.times);
    });
  double lat, lon;
  if (c.op == "$geo_radius")
    return any([&](const json& v) { return LatLon(v, &lat, &lon) && GeoDistance(lat, lon, c.lat, c.lon) < c.radius; });
  if (c.op == "$geo_box")
    return any([&](const json& v) {
      if (!LatLon(v, &lat, &lon)) return false;
      // top left (c.lat, c.lon), bottom right (c.lat2, c.lon2); a box may cross the antimeridian.
      const bool in_lon = c.lon > c.lon2 ? (lon > c.lon || lon < c.lon2) : (c.lon < lon && lon < c.lon2);
      return in_lon && c.lat > lat && lat > c.lat2;
    });
  if (c.op == "$geo_polygon")
    return any([&](const json& v) {
      if (!LatLon(v, &lat, &lon) || !InRing(lat, lon, c.exterior, true)) return false;
      for (const Ring& hole : c.interiors)
        if (InRing(lat, lon, hole, false)) return false;
      return true;
    });
  return false;
}

class JsonFilter final : public MetadataFilter {
 public:
  enum class Logic { kAnd, kOr, kNot, kMinShould, kNested };
  struct Group {
    Logic logic;
    std::vector<std::shared_ptr<const JsonFilter>> parts;
    size_t min_count = 0;   // kMinShould
    Condition nested;       // kNested: the list's field
  };
  JsonFilter(std::vector<Condition> c, std::vector<Group> g) : conds_(std::move(c)), groups_(std::move(g)) {
    for (const auto& x : conds_) {
      uses_ids_ = uses_ids_ || x.field == "$id";
      uses_vectors_ = uses_vectors_ || x.field == "$vectors";
    }
    // A nested filter sees a list element, never the document's id or vectors.
    for (const auto& gr : groups_)
      for (const auto& p : gr.parts)
        if (gr.logic != Logic::kNested) {
          uses_ids_ = uses_ids_ || p->UsesIds();
          uses_vectors_ = uses_vectors_ || p->UsesVectors();
        }
  }
  bool UsesIds() const override { return uses_ids_; }
  bool UsesVectors() const override { return uses_vectors_; }
  std::vector<FilterRequirement> Requirements() const override {
    std::vector<FilterRequirement> out;
    for (const auto& c : conds_) {
      if (c.field == "$id" || c.field == "$vectors") continue;
      FilterRequirement r;
      r.key = c.field;
      if (c.op == "$eq" || c.op == "$in") {
        // Every listed value must have a key, or a document holding one
        // without a key would be missed.
        bool all = true;
        for (const json& v : c.op == "$eq" ? json::array({c.value}) : c.value) {
          std::string k = ScalarKey(v);
          all = all && !k.empty();
          r.equals.push_back(std::move(k));
        }
        if (all) out.push_back(std::move(r));
      } else if (c.op == "$range" || c.op == "$time") {
        r.kind = c.op == "$range" ? FilterRequirement::Kind::kNumberRange : FilterRequirement::Kind::kTimeRange;
        bool numbers = true;
        auto bound = [&](const std::string& op, double b) {
          if ((op == "gt" || op == "gte") && (b > r.lo || (b == r.lo && op == "gt"))) r.lo = b, r.lo_open = op == "gt";
          if ((op == "lt" || op == "lte") && (b < r.hi || (b == r.hi && op == "lt"))) r.hi = b, r.hi_open = op == "lt";
        };
        for (const auto& [op, b] : c.bounds) {
          numbers = numbers && b.is_number();
          if (b.is_number()) bound(op, b.get<double>());
        }
        for (const auto& [op, t] : c.times) bound(op, static_cast<double>(t));
        if (numbers) out.push_back(std::move(r));
      }
    }
    for (const auto& g : groups_)
      if (g.logic == Logic::kAnd)
        for (const auto& p : g.parts)
          for (auto& r : p->Requirements()) out.push_back(std::move(r));
    return out;
  }
  bool OnlyEqualities() const override {
    for (const auto& c : conds_) {
      if (c.field == "$id" || c.field == "$vectors" || (c.op != "$eq" && c.op != "$in")) return false;
      for (const json& v : c.op == "$eq" ? json::array({c.value}) : c.value)
        if (ScalarKey(v).empty()) return false;
    }
    for (const auto& g : groups_) {
      if (g.logic != Logic::kAnd) return false;
      for (const auto& p : g.parts)
        if (!p->OnlyEqualities()) return false;
    }
    return true;
  }
  bool Matches(const json& meta) const override {
    for (const auto& c : conds_)
      if (!Test(c, meta)) return false;
    for (const auto& g : groups_) {
      if (g.logic == Logic::kNested) {
        bool any = false;
        for (const json* e : g.nested.Values(meta, /*flat=*/true)) any = any || g.parts[0]->Matches(*e);
        if (!any) return false;
        continue;
      }
      size_t matched = 0;
      for (const auto& p : g.parts) matched += p->Matches(meta) ? 1 : 0;
      if (g.logic == Logic::kAnd && matched != g.parts.size()) return false;
      if (g.logic == Logic::kOr && matched == 0) return false;
      if (g.logic == Logic::kNot && matched > 0) return false;
      if (g.logic == Logic::kMinShould && matched < g.min_count) return false;
    }
    return true;
  }

 private:
  std::vector<Condition> conds_;
  std::vector<Group> groups_;
  bool uses_ids_ = false, uses_vectors_ = false;
};

Result<std::shared_ptr<const JsonFilter>> ParseObject(const json& j, int depth);

Result<std::vector<std::shared_ptr<const JsonFilter>>> ParseList(const std::string& what, const json& v, int depth) {
  if (!v.is_array() || v.empty()) return Status::InvalidArgument("filter: " + what + " needs a non-empty list of filter objects");
  std::vector<std::shared_ptr<const JsonFilter>> out;
  for (const auto& x : v) {
    if (!x.is_object()) return Status::InvalidArgument("filter: " + what + " needs a list of filter objects");
    MOEEDB_ASSIGN_OR_RETURN(auto f, ParseObject(x, depth + 1));
    out.push_back(std::move(f));
  }
  return out;
}

// A field condition on `field`, its path parsed unless it is reserved ($id, $vectors).
Result<Condition> FieldCondition(const std::string& field, std::string op, json value) {
  Condition c;
  c.field = field;
  c.op = std::move(op);
  c.value = std::move(value);
  if (field == "$id" || field == "$vectors") return c;
  // A key that is no path ("price[usd]", "a..b") still names itself: only
  // an exact key of the document matches it.
  auto path = ParsePath(field);
  if (path.ok()) c.path = std::move(path).value();
  return c;
}

Result<JsonFilter::Group> ParseGroup(const std::string& name, const json& v, int depth) {
  JsonFilter::Group g{JsonFilter::Logic::kAnd, {}, 0, {}};
  if (name == "$not") {
    if (!v.is_object()) return Status::InvalidArgument("filter: $not needs a filter object");
    g.logic = JsonFilter::Logic::kNot;
    MOEEDB_ASSIGN_OR_RETURN(auto f, ParseObject(v, depth + 1));
    g.parts.push_back(std::move(f));
    return g;
  }
  if (name == "$min_should") {
    if (!v.is_object() || !v.contains("min_count") || !v["min_count"].is_number_unsigned() || !v.contains("filters"))
      return Status::InvalidArgument("filter: $min_should needs {\"min_count\": a count, \"filters\": [...]}");
    g.logic = JsonFilter::Logic::kMinShould;
    g.min_count = v["min_count"].get<size_t>();
    // No filters: met by a min_count of 0 only.
    if (v["filters"].is_array() && v["filters"].empty()) return g;
    MOEEDB_ASSIGN_OR_RETURN(g.parts, ParseList(name, v["filters"], depth));
    return g;
  }
  if (name == "$nested") {
    if (!v.is_object() || !v.contains("key") || !v["key"].is_string() || !v.contains("filter") || !v["filter"].is_object())
      return Status::InvalidArgument("filter: $nested needs {\"key\": a list field, \"filter\": {...}}");
    g.logic = JsonFilter::Logic::kNested;
    MOEEDB_ASSIGN_OR_RETURN(g.nested, FieldCondition(v["key"].get<std::string>(), "", json()));
    MOEEDB_ASSIGN_OR_RETURN(auto f, ParseObject(v["filter"], depth + 1));
    g.parts.push_back(std::move(f));
    return g;
  }
  g.logic = name == "$and" ? JsonFilter::Logic::kAnd : JsonFilter::Logic::kOr;
  MOEEDB_ASSIGN_OR_RETURN(g.parts, ParseList(name, v, depth));
  return g;
}

// The bounds of a $values_count or one range operator's value, checked.
Status RangeBound(const std::string& field, const std::string& op, const json& b) {
  if (!b.is_number() && !b.is_string())
    return Status::InvalidArgument("filter field '" + field + "': " + op + " needs a number or a string");
  return Status::OK();
}

Status ParseArea(const std::string& field, const std::string& op, const json& v, Condition* c) {
  const std::string what = "filter field '" + field + "': " + op;
  if (!v.is_object()) return Status::InvalidArgument(what + " needs an object");
  if (op == "$geo_radius") {
    if (!v.contains("center") || !LatLon(v["center"], &c->lat, &c->lon) || !v.contains("radius") || !v["radius"].is_number())
      return Status::InvalidArgument(what + " needs {\"center\": {\"lat\", \"lon\"}, \"radius\": metres}");
    c->radius = v["radius"].get<double>();
    return Status::OK();
  }
  if (op == "$geo_box") {
    if (!v.contains("top_left") || !LatLon(v["top_left"], &c->lat, &c->lon) || !v.contains("bottom_right") ||
        !LatLon(v["bottom_right"], &c->lat2, &c->lon2))
      return Status::InvalidArgument(what + " needs {\"top_left\": {\"lat\", \"lon\"}, \"bottom_right\": {\"lat\", \"lon\"}}");
    return Status::OK();
  }
  if (!v.contains("exterior")) return Status::InvalidArgument(what + " needs \"exterior\": {\"points\": [...]}");
  MOEEDB_ASSIGN_OR_RETURN(c->exterior, ParseRing(v["exterior"], what + "'s exterior"));
  if (v.contains("interiors") && !v["interiors"].is_null()) {
    if (!v["interiors"].is_array()) return Status::InvalidArgument(what + ": \"interiors\" must be a list of rings");
    for (const auto& r : v["interiors"]) {
      MOEEDB_ASSIGN_OR_RETURN(Ring ring, ParseRing(r, what + "'s interior"));
      c->interiors.push_back(std::move(ring));
    }
  }
  return Status::OK();
}

// The conditions of one field's operator object, appended to `conds`.
Status ParseOperators(const std::string& field, const json& v, std::vector<Condition>* conds) {
  if (v.empty()) return Status::InvalidArgument("filter field '" + field + "': empty condition");
  Condition range, time;
  for (auto op = v.begin(); op != v.end(); ++op) {
    const std::string& name = op.key();
    const json& x = op.value();
    const std::string label = "filter field '" + field + "': " + name;
    if (name == "$gt" || name == "$gte" || name == "$lt" || name == "$lte") {
      MOEEDB_RETURN_IF_ERROR(RangeBound(field, name, x));
      range.bounds.push_back({name.substr(1), x});
      continue;
    }
    if (name == "$time_gt" || name == "$time_gte" || name == "$time_lt" || name == "$time_lte") {
      int64_t t;
      if (!x.is_string() || !ParseDatetime(x.get<std::string>(), &t))
        return Status::InvalidArgument(label + " needs a datetime (RFC 3339, e.g. \"2024-01-31T10:00:00Z\")");
      time.times.push_back({name.substr(6), t});
      continue;
    }
    MOEEDB_ASSIGN_OR_RETURN(Condition c, FieldCondition(field, name, x));
    if (name == "$in" || name == "$nin" || name == "$except") {
      if (!x.is_array()) return Status::InvalidArgument(label + " needs a list");
    } else if (name == "$empty" || name == "$null") {
      if (!x.is_boolean()) return Status::InvalidArgument(label + " needs true or false");
    } else if (name == "$contains" || name == "$not_contains") {
      if (x.is_object() || x.is_array() || x.is_null()) return Status::InvalidArgument(label + " needs a string, number or boolean");
    } else if (name == "$text") {
      if (!x.is_string()) return Status::InvalidArgument(label + " needs a string");
    } else if (name == "$text_any") {
      if (!x.is_string()) return Status::InvalidArgument(label + " needs a string of words");
      std::istringstream words(x.get<std::string>());
      for (std::string w; words >> w;) c.words.push_back(w);
    } else if (name == "$values_count") {
      if (!x.is_object() || x.empty()) return Status::InvalidArgument(label + " needs an object of gt, gte, lt, lte");
      for (auto b = x.begin(); b != x.end(); ++b) {
        if (b.value().is_null()) continue;
        if (b.key() != "gt" && b.key() != "gte" && b.key() != "lt" && b.key() != "lte")
          return Status::InvalidArgument(label + " takes gt, gte, lt, lte; not '" + b.key().substr(0, 40) + "'");
        if (!b.value().is_number_unsigned()) return Status::InvalidArgument(label + "." + b.key() + " needs a count");
        c.bounds.push_back({b.key(), b.value()});
      }
    } else if (name == "$geo_radius" || name == "$geo_box" || name == "$geo_polygon") {
      MOEEDB_RETURN_IF_ERROR(ParseArea(field, name, x, &c));
    } else if (name != "$eq" && name != "$ne") {
      return Status::InvalidArgument("filter field '" + field + "': unknown operator '" + name +
                                     "' (use $eq $ne $gt $gte $lt $lte $time_gt $time_gte $time_lt $time_lte $in $nin $except "
                                     "$contains $not_contains $text $text_any $empty $null $values_count $geo_radius $geo_box "
                                     "$geo_polygon)");
    }
    conds->push_back(std::move(c));
  }
  // Every bound of one object is met by one value (a range, not a set of them).
  for (auto* group : {&range, &time}) {
    if (group->bounds.empty() && group->times.empty()) continue;
    MOEEDB_ASSIGN_OR_RETURN(Condition c, FieldCondition(field, group == &range ? "$range" : "$time", json()));
    c.bounds = std::move(group->bounds);
    c.times = std::move(group->times);
    conds->push_back(std::move(c));
  }
  return Status::OK();
}

Result<std::shared_ptr<const JsonFilter>> ParseObject(const json& j, int depth) {
  if (depth > 32) return Status::InvalidArgument("filter nests deeper than 32 levels");
  std::vector<Condition> conds;
  std::vector<JsonFilter::Group> groups;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& field = it.key();
    const json& v = it.value();
    if (field == "$and" || field == "$or" || field == "$not" || field == "$min_should" || field == "$nested") {
      MOEEDB_ASSIGN_OR_RETURN(auto g, ParseGroup(field, v, depth));
      groups.push_back(std::move(g));
    } else if (field == "$has_vector") {
      if (!v.is_string()) return Status::InvalidArgument("filter: $has_vector needs a vector's name");
      MOEEDB_ASSIGN_OR_RETURN(Condition c, FieldCondition("$vectors", "$contains", v));
      conds.push_back(std::move(c));
    } else if (!field.empty() && field[0] == '$' && field != "$id") {
      return Status::InvalidArgument("filter: unknown operator '" + field.substr(0, 80) +
                                     "' at the top of a filter ($and $or $not $min_should $nested $id $has_vector)");
    } else if (v.is_object()) {
      MOEEDB_RETURN_IF_ERROR(ParseOperators(field, v, &conds));
    } else if (v.is_array()) {
      return Status::InvalidArgument("filter field '" + field + "': use {\"$in\": [...]} for set membership");
    } else {
      MOEEDB_ASSIGN_OR_RETURN(Condition c, FieldCondition(field, "$eq", v));
      conds.push_back(std::move(c));
    }
  }
  return std::make_shared<const JsonFilter>(std::move(conds), std::move(groups));
}

}  // namespace

Result<PayloadKey> PayloadKey::Parse(const std::string& key) {
  PayloadKey k;
  k.key_ = key;
  MOEEDB_ASSIGN_OR_RETURN(std::vector<Step> steps, ParsePath(key));
  k.path_ = std::make_shared<const std::vector<Step>>(std::move(steps));
  return k;
}

std::vector<const json*> PayloadKey::Values(const json& metadata, bool flat) const {
  return FieldValues(key_, *static_cast<const std::vector<Step>*>(path_.get()), metadata, flat);
}

namespace {

// PayloadKey::MergeInto from step i at `at` (its parent's slot for it).
void MergeAt(json* at, const std::vector<Step>& steps, size_t i, const json& values, bool top) {
  const Step& s = steps[i];
  const bool last = i + 1 == steps.size();
  auto merge = [&](json* e) {
    if (e->is_object()) e->update(values);
    else *e = values;
  };
  if (s.kind == Step::Kind::kKey) {
    if (!at->is_object()) {
      if (top) return;
      *at = json::object();
    }
    json& child = (*at)[s.key];  // a missing key (or a null) is an empty object to merge into
    if (child.is_null()) child = json::object();
    if (last) merge(&child);
    else MergeAt(&child, steps, i + 1, values, false);
    return;
  }
  if (!at->is_array()) {
    if (!top) *at = json::array();
    return;
  }
  if (s.kind == Step::Kind::kIndex) {
    if (s.index >= at->size()) return;
    if (last) merge(&(*at)[s.index]);
    else MergeAt(&(*at)[s.index], steps, i + 1, values, false);
    return;
  }
  for (auto& e : *at) {
    if (last) merge(&e);
    else MergeAt(&e, steps, i + 1, values, false);
  }
}

}  // namespace

void PayloadKey::MergeInto(json* payload, const json& values) const {
  const auto& steps = *static_cast<const std::vector<Step>*>(path_.get());
  if (!steps.empty()) MergeAt(payload, steps, 0, values, true);
}

bool ParseDatetime(const std::string& s, int64_t* micros) {
  size_t i = 0;
  int y, mo, d, h = 0, mi = 0, sec = 0;
  if (!Digits(s, &i, 4, &y) || i >= s.size() || s[i++] != '-' || !Digits(s, &i, 2, &mo) || i >= s.size() || s[i++] != '-' ||
      !Digits(s, &i, 2, &d))
    return false;
  int64_t frac_us = 0, offset_s = 0;
  if (i < s.size()) {
    const char sep = s[i++];
    if ((sep != 'T' && sep != ' ') || !Digits(s, &i, 2, &h) || i >= s.size() || s[i++] != ':' || !Digits(s, &i, 2, &mi))
      return false;
    const bool seconds = i < s.size() && s[i] == ':';
    if (!seconds && (sep == 'T' || i != s.size())) return false;  // "HH:MM" only with a space and nothing after
    if (seconds) {
      ++i;
      if (!Digits(s, &i, 2, &sec)) return false;
      if (i < s.size() && s[i] == '.') {
        ++i;
        const size_t start = i;
        int64_t scale = 100000;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
          frac_us += (s[i] - '0') * scale;
          scale /= 10;
          ++i;
        }
        if (i == start || i - start > 6) return false;
      }
      if (i < s.size()) {
        const char z = s[i++];
        if (z == 'Z' && i == s.size()) {
        } else if (z == '+' || z == '-') {
          int oh, om = 0;
          if (!Digits(s, &i, 2, &oh)) return false;
          if (i < s.size() && s[i] == ':') ++i;
          if (i < s.size() && !Digits(s, &i, 2, &om)) return false;
          if (i != s.size() || oh > 23 || om > 59) return false;
          offset_s = (z == '+' ? 1 : -1) * (oh * 3600 + om * 60);
        } else {
          return false;
        }
      }
    }
  }
  static const int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] || (mo == 2 && d == 29 && !leap) || h > 23 || mi > 59 || sec > 59)
    return false;
  const int64_t secs = DaysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset_s;
  *micros = secs * 1000000 + frac_us;
  return true;
}

std::string ScalarKey(const json& v) {
  if (v.is_string()) return "s" + v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "b1" : "b0";
  if (v.is_number()) {
    // Filters compare numbers as nlohmann::json does (an integer with a
    // float as doubles), so the double's shortest form keys them all.
    char buf[32];
    std::snprintf(buf, sizeof buf, "n%.17g", v.get<double>());
    return buf;
  }
  return "";
}

double GeoDistanceMetres(double lat1, double lon1, double lat2, double lon2) { return GeoDistance(lat1, lon1, lat2, lon2); }

bool MatchesDocument(const MetadataFilter& filter, const std::string& metadata_json, const std::string& id,
                     const std::vector<std::string>* vectors) {
  json meta = json::parse(metadata_json, nullptr, false);
  if (filter.UsesIds() && meta.is_object()) meta["$id"] = id;
  if (filter.UsesVectors() && meta.is_object()) meta["$vectors"] = vectors ? *vectors : std::vector<std::string>();
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
