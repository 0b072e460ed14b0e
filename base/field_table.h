// A typed spec's field table: each field of a spec (SearchSpec,
// CollectionSpec, EmbeddingSpec, EmbedTrainOptions) declared once, with its name, type, range or
// allowed values, one-line help and how it is read from and written to the
// spec. Everything a front end needs comes from the table: the JSON reader
// and writer (request bodies, the C API, forwarding a spec between nodes),
// the CLI's flags, their parser and help lines, and every error text. A
// front end never restates a rule; it only chooses how a field is named in
// its errors ('rrf_k' in JSON, option --rrf-k on the command line).
//
// Defaults live in the spec struct's member initialisers (the table reads a
// default-constructed spec for its help text); a field whose default depends
// on something else (the collection's alpha) is a std::optional, unset until
// given, with `default_text` saying where the value comes from.
#pragma once

#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/enum_table.h"
#include "base/status.h"

namespace moeedb::spec {

using json = nlohmann::json;

enum class FieldType { kInteger, kNumber, kBoolean, kString, kEnum, kObject };

// How a front end names a field in its errors: 'rrf_k' (JSON) or option --rrf-k (CLI).
enum class Spelling { kJson, kFlag };
// rrf_k -> rrf-k.
std::string FlagName(std::string_view json_name);
std::string FieldLabel(std::string_view json_name, Spelling spelling);

// The type and range a value must have.
struct FieldRule {
  FieldType type = FieldType::kString;
  double min = -HUGE_VAL, max = HUGE_VAL;  // kInteger, kNumber (inclusive)
  std::vector<std::string> values;          // kEnum: the allowed names
  std::vector<std::string> aliases;         // kEnum: names also accepted, never listed
  bool non_empty = false;                   // kString

  // "an integer in [1, 64]", "a finite number >= 0", "one of rrf, weighted", ...
  std::string Describe() const;
  // OK when `v` satisfies the rule; else InvalidArgument "<label> must be <Describe()>".
  Status Check(const json& v, std::string_view label) const;
  // A flag's text as the JSON value Check takes (numbers parsed, an object
  // parsed as JSON, a boolean flag's presence as true); InvalidArgument
  // naming the flag when the text cannot be one.
  Result<json> FromText(const std::string& text, std::string_view label) const;
};

template <typename Spec>
struct Field {
  const char* name = "";  // the JSON key; the CLI flag is FlagName(name)
  const char* meta = "";  // the CLI's value placeholder ("N", "X"); "" for a bare boolean flag
  const char* help = "";  // one line; the default is appended from the spec
  FieldRule rule;
  std::function<json(const Spec&)> get;           // null when unset
  std::function<Status(Spec*, const json&)> set;  // takes a value that passed `rule`
  const char* default_text = nullptr;             // an unset optional's default, in words
  json fallback;                                  // or its value (a constant the service layer uses)

  // This field with `v` as what an unset optional means (for help texts).
  Field Or(json v) && {
    fallback = std::move(v);
    return std::move(*this);
  }
};

template <typename Spec>
using FieldTable = std::vector<Field<Spec>>;

// One CLI flag of a field: --name META help.
struct FlagDoc {
  std::string name, meta, help;
};

// ---- Builders -------------------------------------------------------------

namespace internal {
template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {
  using Value = T;
};
template <typename M>
json Get(const M& m) {
  if constexpr (IsOptional<M>::value) return m ? json(*m) : json(nullptr);
  else return json(m);
}
template <typename Spec>
Field<Spec> Make(const char* name, const char* meta, const char* help, FieldType type, double min = -HUGE_VAL,
                 double max = HUGE_VAL) {
  Field<Spec> f;
  f.name = name;
  f.meta = meta;
  f.help = help;
  f.rule.type = type;
  f.rule.min = min;
  f.rule.max = max;
  return f;
}
template <typename M, typename V>
void Assign(M* m, V v) {
  if constexpr (IsOptional<M>::value) *m = static_cast<typename IsOptional<M>::Value>(v);
  else *m = static_cast<M>(v);
}
}  // namespace internal

namespace internal {
// A numeric member (or an optional of one) read from JSON as `Wire`.
template <typename Wire, typename Spec, typename M>
Field<Spec> Numeric(FieldType type, const char* name, M Spec::*member, double min, double max, const char* meta,
                    const char* help, const char* default_text) {
  auto f = Make<Spec>(name, meta, help, type, min, max);
  f.get = [member](const Spec& s) { return Get(s.*member); };
  f.set = [member](Spec* s, const json& v) {
    Assign(&(s->*member), v.get<Wire>());
    return Status::OK();
  };
  f.default_text = default_text;
  return f;
}
}  // namespace internal

// An integer member (any integer type, or an optional of one) in [min, max].
template <typename Spec, typename M>
Field<Spec> Integer(const char* name, M Spec::*member, double min, double max, const char* meta, const char* help,
                    const char* default_text = nullptr) {
  return internal::Numeric<int64_t>(FieldType::kInteger, name, member, min, max, meta, help, default_text);
}

// A finite number member (float, double, or an optional of one) in [min, max].
template <typename Spec, typename M>
Field<Spec> Number(const char* name, M Spec::*member, double min, double max, const char* meta, const char* help,
                   const char* default_text = nullptr) {
  return internal::Numeric<double>(FieldType::kNumber, name, member, min, max, meta, help, default_text);
}

// A boolean member; on the command line a bare --flag.
template <typename Spec>
Field<Spec> Boolean(const char* name, bool Spec::*member, const char* help) {
  auto f = internal::Make<Spec>(name, "", help, FieldType::kBoolean);
  f.get = [member](const Spec& s) { return json(s.*member); };
  f.set = [member](Spec* s, const json& v) {
    s->*member = v.get<bool>();
    return Status::OK();
  };
  return f;
}

// A string member ("" when unset).
template <typename Spec>
Field<Spec> String(const char* name, std::string Spec::*member, const char* meta, const char* help,
                   const char* default_text = nullptr) {
  auto f = internal::Make<Spec>(name, meta, help, FieldType::kString);
  f.get = [member](const Spec& s) { return (s.*member).empty() ? json(nullptr) : json(s.*member); };
  f.set = [member](Spec* s, const json& v) {
    s->*member = v.get<std::string>();
    return Status::OK();
  };
  f.default_text = default_text;
  return f;
}

// An enum member (or an optional of one) spelled by its EnumTable.
template <typename Spec, typename M, typename E, size_t N>
Field<Spec> Enum(const char* name, M Spec::*member, const EnumTable<E, N>& table, const char* meta, const char* help,
                 const char* default_text = nullptr) {
  auto f = internal::Make<Spec>(name, meta, help, FieldType::kEnum);
  f.rule.values = table.Names();
  f.get = [member, &table](const Spec& s) {
    const M& m = s.*member;
    if constexpr (internal::IsOptional<M>::value) return m ? json(table.Name(*m)) : json(nullptr);
    else return json(table.Name(m));
  };
  f.set = [member, &table](Spec* s, const json& v) -> Status {
    MOEEDB_ASSIGN_OR_RETURN(E e, table.Parse(v.get<std::string>()));
    s->*member = e;
    return Status::OK();
  };
  f.default_text = default_text;
  return f;
}

// A string member that holds one of an EnumTable's names ("" when unset:
// the value comes from elsewhere, `default_text` says where).
template <typename Spec, typename E, size_t N>
Field<Spec> Choice(const char* name, std::string Spec::*member, const EnumTable<E, N>& table, const char* meta,
                   const char* help, const char* default_text = nullptr) {
  auto f = String(name, member, meta, help, default_text);
  f.rule.type = FieldType::kEnum;
  f.rule.values = table.Names();
  for (const auto& e : table.entries)
    if (e.alias) f.rule.aliases.emplace_back(e.name);
  return f;
}

// ---- What the table gives every front end ----------------------------------

// The table's entry for `name`, or nullptr.
template <typename Spec>
const Field<Spec>* FindField(const FieldTable<Spec>& table, std::string_view name) {
  for (const auto& f : table)
    if (name == f.name) return &f;
  return nullptr;
}

// Checks `v` against the field's rule and stores it; null leaves the spec as
// is. Errors name the field as `label` (a protocol's own name for it, such as
// Qdrant's 'limit' for k).
template <typename Spec>
Status SetFieldAs(const Field<Spec>& f, const json& v, const std::string& label, Spec* spec) {
  if (v.is_null()) return Status::OK();
  MOEEDB_RETURN_IF_ERROR(f.rule.Check(v, label));
  Status s = f.set(spec, v);
  if (!s.ok()) return Status::InvalidArgument(label + ": " + s.message());
  return s;
}

// SetFieldAs with the field named as `spelling` names it.
template <typename Spec>
Status SetField(const Field<Spec>& f, const json& v, Spelling spelling, Spec* spec) {
  return SetFieldAs(f, v, FieldLabel(f.name, spelling), spec);
}

// The fields of a JSON object into *spec (absent and null fields keep their
// values). With `refuse_unknown`, a key the table does not hold is an error.
// `given` (if not null) receives the keys that were present and not null.
template <typename Spec>
Status ReadJson(const FieldTable<Spec>& table, const json& body, bool refuse_unknown, Spec* spec,
                std::vector<std::string>* given = nullptr) {
  if (!body.is_object()) return Status::InvalidArgument("the spec must be a JSON object");
  for (auto it = body.begin(); it != body.end(); ++it) {
    const Field<Spec>* f = FindField(table, it.key());
    if (f == nullptr) {
      if (refuse_unknown) return Status::InvalidArgument("unknown field '" + it.key().substr(0, 80) + "'");
      continue;
    }
    MOEEDB_RETURN_IF_ERROR(SetField(*f, it.value(), Spelling::kJson, spec));
    if (given != nullptr && !it.value().is_null()) given->push_back(it.key());
  }
  return Status::OK();
}

// Every field that is set, as a JSON object ReadJson reads back to an equal spec.
template <typename Spec>
json WriteJson(const FieldTable<Spec>& table, const Spec& spec) {
  json out = json::object();
  for (const auto& f : table)
    if (json v = f.get(spec); !v.is_null()) out[f.name] = std::move(v);
  return out;
}

// A field whose get and set the caller writes (a value with its own parser).
template <typename Spec>
Field<Spec> Custom(const char* name, FieldType type, const char* meta, const char* help) {
  return internal::Make<Spec>(name, meta, help, type);
}

// Reads the CLI's flags: `flag(name)` is the text given for --name, or
// nullopt when the flag is absent ("1" for a bare boolean flag).
using FlagLookup = std::function<std::optional<std::string>(const std::string& flag)>;
template <typename Spec>
Status ReadFlags(const FieldTable<Spec>& table, const FlagLookup& flag, Spec* spec,
                 std::vector<std::string>* given = nullptr) {
  for (const auto& f : table) {
    std::optional<std::string> text = flag(FlagName(f.name));
    if (!text) continue;
    const std::string label = FieldLabel(f.name, Spelling::kFlag);
    MOEEDB_ASSIGN_OR_RETURN(json v, f.rule.FromText(*text, label));
    MOEEDB_RETURN_IF_ERROR(SetField(f, v, Spelling::kFlag, spec));
    if (given != nullptr) given->push_back(f.name);
  }
  return Status::OK();
}

// "help (default X)": the default read from a default-constructed spec (or
// the field's fallback), else "help (default: <default_text>)".
std::string HelpWithDefault(const char* help, const json& default_value, const char* default_text);

// The table's flags, in table order (`skip`: fields a command takes another way).
template <typename Spec>
std::vector<FlagDoc> FlagDocs(const FieldTable<Spec>& table, const std::vector<std::string>& skip = {}) {
  const Spec defaults{};
  std::vector<FlagDoc> out;
  for (const auto& f : table) {
    bool skipped = false;
    for (const auto& s : skip) skipped |= s == f.name;
    if (skipped) continue;
    json d = f.get(defaults);
    if (d.is_null()) d = f.fallback;
    if (f.rule.type == FieldType::kBoolean && d == false) d = nullptr;  // a bare flag is off unless given
    out.push_back({FlagName(f.name), f.meta, HelpWithDefault(f.help, d, f.default_text)});
  }
  return out;
}

}  // namespace moeedb::spec
