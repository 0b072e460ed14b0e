#include "index/payload_index.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <roaring/roaring64map.hh>
#include <set>
#include <unordered_map>
#include <utility>

namespace moeedb {

using json = nlohmann::json;

namespace roaring {}  // Roaring64Map is in namespace roaring from CRoaring 0.3 on, global before
using namespace roaring;

namespace {

bool Ordered(PayloadFieldKind k) {
  return k == PayloadFieldKind::kInteger || k == PayloadFieldKind::kFloat || k == PayloadFieldKind::kDatetime;
}
bool Keyed(PayloadFieldKind k) {
  return k == PayloadFieldKind::kKeyword || k == PayloadFieldKind::kUuid || k == PayloadFieldKind::kBool;
}

}  // namespace

struct PayloadIndex::Field {
  PayloadFieldKind kind;
  PayloadKey key;
  std::unordered_map<std::string, Roaring64Map> by_value;  // keyword, uuid, bool: ScalarKey -> ids
  std::set<std::pair<double, uint64_t>> ordered;            // integer, float, datetime
  Roaring64Map holders;                                     // documents with a value at the key

  // The keys (keyed kinds) or numbers (ordered kinds) of the values this
  // field's kind indexes in `metadata`.
  void Values(const json& metadata, std::vector<std::string>* keys, std::vector<double>* numbers) const {
    auto one = [&](const json& v) {
      if (kind == PayloadFieldKind::kBool ? v.is_boolean() : Keyed(kind) ? v.is_string() : false) {
        keys->push_back(ScalarKey(v));
      } else if ((kind == PayloadFieldKind::kInteger || kind == PayloadFieldKind::kFloat) && v.is_number()) {
        numbers->push_back(v.get<double>());
      } else if (kind == PayloadFieldKind::kDatetime && v.is_string()) {
        int64_t t;
        if (ParseDatetime(v.get<std::string>(), &t)) numbers->push_back(static_cast<double>(t));
      }
    };
    for (const json* v : key.Values(metadata, /*flat=*/true)) {
      // A list left after the one level of flattening (a list of lists)
      // equals a value when an element does (filters' Equal): its elements
      // are indexed too.
      if (v->is_array())
        for (const json& e : *v) one(e);
      else
        one(*v);
    }
  }

  // The ids that can meet `r`, or nullopt when this kind cannot answer it.
  std::optional<Roaring64Map> Answer(const FilterRequirement& r) const {
    using K = FilterRequirement::Kind;
    if (r.kind == K::kEquals && Keyed(kind)) {
      // A listed value of a type the kind does not hold (a number asked of
      // a keyword index) could match a document this index does not hold.
      const char type = kind == PayloadFieldKind::kBool ? 'b' : 's';
      for (const std::string& v : r.equals)
        if (v.empty() || v[0] != type) return std::nullopt;
      Roaring64Map out;
      for (const std::string& v : r.equals)
        if (auto it = by_value.find(v); it != by_value.end()) out |= it->second;
      return out;
    }
    const bool numbers = kind == PayloadFieldKind::kInteger || kind == PayloadFieldKind::kFloat;
    if (r.kind == K::kEquals && numbers) {
      // Only numbers can equal what an ordered set holds: any other listed
      // value (a string) could match a document this index does not hold.
      Roaring64Map out;
      for (const std::string& v : r.equals) {
        if (v.empty() || v[0] != 'n') return std::nullopt;
        const double x = std::strtod(v.c_str() + 1, nullptr);
        for (auto it = ordered.lower_bound({x, 0}); it != ordered.end() && it->first == x; ++it) out.add(it->second);
      }
      return out;
    }
    if ((r.kind == K::kNumberRange && numbers) || (r.kind == K::kTimeRange && kind == PayloadFieldKind::kDatetime)) {
      // Both ends closed: a value beyond 2^53 rounds to a double that may
      // equal an open end it exceeds; the filter decides such documents.
      Roaring64Map out;
      for (auto it = ordered.lower_bound({r.lo, 0}); it != ordered.end() && it->first <= r.hi; ++it) out.add(it->second);
      return out;
    }
    return std::nullopt;
  }
};

Result<PayloadIndexFields> PayloadIndexFieldsFromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("payload_indexes must be an object of key: kind");
  if (j.size() > kMaxPayloadIndexes)
    return Status::InvalidArgument("at most " + std::to_string(kMaxPayloadIndexes) + " payload indexes per collection");
  PayloadIndexFields out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key().empty()) return Status::InvalidArgument("payload index: the key is empty");
    if (!it.value().is_string())
      return Status::InvalidArgument("payload index '" + it.key() + "': the kind must be one of " +
                                     kPayloadFieldKinds.Alternatives());
    auto kind = kPayloadFieldKinds.Parse(it.value().get<std::string>());
    if (!kind.ok()) return Status::InvalidArgument("payload index '" + it.key() + "': " + kind.status().message());
    auto key = PayloadKey::Parse(it.key());
    if (!key.ok()) return Status::InvalidArgument("payload index '" + it.key() + "': " + key.status().message());
    out[it.key()] = *kind;
  }
  return out;
}

json PayloadIndexFieldsToJson(const PayloadIndexFields& fields) {
  json j = json::object();
  for (const auto& [key, kind] : fields) j[key] = kPayloadFieldKinds.Name(kind);
  return j;
}

PayloadIndex::~PayloadIndex() = default;

Result<std::unique_ptr<PayloadIndex>> PayloadIndex::Create(const PayloadIndexFields& fields) {
  std::unique_ptr<PayloadIndex> p(new PayloadIndex());
  p->fields_ = fields;
  for (const auto& [key, kind] : fields) {
    MOEEDB_ASSIGN_OR_RETURN(PayloadKey k, PayloadKey::Parse(key));
    p->by_key_.push_back(std::unique_ptr<Field>(new Field{kind, std::move(k), {}, {}, {}}));
  }
  return p;
}

void PayloadIndex::Add(uint64_t id, const json& metadata) {
  for (auto& f : by_key_) {
    std::vector<std::string> keys;
    std::vector<double> numbers;
    f->Values(metadata, &keys, &numbers);
    for (const std::string& k : keys) f->by_value[k].add(id);
    for (double x : numbers) f->ordered.insert({x, id});
    if (!f->key.Values(metadata).empty()) f->holders.add(id);
  }
}

void PayloadIndex::Remove(uint64_t id, const json& metadata) {
  for (auto& f : by_key_) {
    std::vector<std::string> keys;
    std::vector<double> numbers;
    f->Values(metadata, &keys, &numbers);
    for (const std::string& k : keys) {
      auto it = f->by_value.find(k);
      if (it == f->by_value.end()) continue;
      it->second.remove(id);
      if (it->second.isEmpty()) f->by_value.erase(it);
    }
    for (double x : numbers) f->ordered.erase({x, id});
    f->holders.remove(id);
  }
}

std::optional<std::vector<uint64_t>> PayloadIndex::Candidates(const std::vector<FilterRequirement>& requirements,
                                                              bool* exact) const {
  std::optional<Roaring64Map> ids;
  bool all_exact = true;
  for (const FilterRequirement& r : requirements) {
    auto it = fields_.find(r.key);
    if (it == fields_.end()) {
      all_exact = false;
      continue;
    }
    const Field& f = *by_key_[std::distance(fields_.begin(), it)];
    std::optional<Roaring64Map> answer = f.Answer(r);
    // Only a keyed kind's equality is exact: an ordered set's double keys
    // and closed range ends may hold more than the requirement keeps.
    all_exact = all_exact && answer && r.kind == FilterRequirement::Kind::kEquals && Keyed(f.kind);
    if (!answer) continue;
    if (ids) *ids &= *answer;
    else ids = std::move(answer);
  }
  if (exact) *exact = ids.has_value() && all_exact;
  if (!ids) return std::nullopt;
  std::vector<uint64_t> out(ids->cardinality());
  ids->toUint64Array(out.data());
  return out;
}

uint64_t PayloadIndex::Points(const std::string& key) const {
  auto it = fields_.find(key);
  return it == fields_.end() ? 0 : by_key_[std::distance(fields_.begin(), it)]->holders.cardinality();
}

size_t PayloadIndex::memory_bytes() const {
  // A std::set node: the pair and three pointers and a colour, rounded by the allocator.
  constexpr size_t kSetNode = 48;
  size_t n = 0;
  for (const auto& f : by_key_) {
    n += f->holders.getSizeInBytes() + f->ordered.size() * kSetNode;
    for (const auto& [k, ids] : f->by_value) n += k.size() + ids.getSizeInBytes() + sizeof(Roaring64Map);
  }
  return n;
}

}  // namespace moeedb
