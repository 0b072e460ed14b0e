#include "base/field_table.h"

#include <charconv>
#include <cstdio>

namespace moeedb::spec {

std::string FlagName(std::string_view json_name) {
  std::string s(json_name);
  for (char& c : s)
    if (c == '_') c = '-';
  return s;
}

std::string FieldLabel(std::string_view json_name, Spelling spelling) {
  return spelling == Spelling::kJson ? "'" + std::string(json_name) + "'" : "option --" + FlagName(json_name);
}

namespace {

// A bound as written in a rule: integers without a decimal point.
std::string Bound(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string Range(double min, double max) {
  const bool lo = std::isfinite(min), hi = std::isfinite(max);
  if (lo && hi) return " in [" + Bound(min) + ", " + Bound(max) + "]";
  if (lo) return " >= " + Bound(min);
  if (hi) return " <= " + Bound(max);
  return "";
}

}  // namespace

std::string FieldRule::Describe() const {
  switch (type) {
    case FieldType::kInteger: return "an integer" + Range(min, max);
    case FieldType::kNumber: return "a finite number" + Range(min, max);
    case FieldType::kBoolean: return "true or false";
    case FieldType::kString: return non_empty ? "a non-empty string" : "a string";
    case FieldType::kObject: return "a JSON object";
    case FieldType::kEnum: {
      std::string s = "one of ";
      for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + values[i];
      return s;
    }
  }
  return "?";
}

Status FieldRule::Check(const json& v, std::string_view label) const {
  bool ok = false;
  switch (type) {
    case FieldType::kInteger:
      // 3.0 is not an integer on the wire: JSON clients that mean one send 3.
      ok = (v.is_number_integer() || v.is_number_unsigned()) && v.get<double>() >= min && v.get<double>() <= max;
      break;
    case FieldType::kNumber:
      ok = v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= min && v.get<double>() <= max;
      break;
    case FieldType::kBoolean: ok = v.is_boolean(); break;
    case FieldType::kString: ok = v.is_string() && (!non_empty || !v.get<std::string>().empty()); break;
    case FieldType::kObject: ok = v.is_object(); break;
    case FieldType::kEnum:
      if (v.is_string()) {
        for (const auto& name : values) ok |= name == v.get<std::string>();
        for (const auto& name : aliases) ok |= name == v.get<std::string>();
      }
      break;
  }
  if (ok) return Status::OK();
  return Status::InvalidArgument(std::string(label) + " must be " + Describe());
}

Result<json> FieldRule::FromText(const std::string& text, std::string_view label) const {
  auto bad = [&] {
    return Status::InvalidArgument(std::string(label) + " must be " + Describe() + ", got '" + text.substr(0, 80) + "'");
  };
  switch (type) {
    case FieldType::kInteger: {
      long long v = 0;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || p != text.data() + text.size()) return bad();
      if (v < min || v > max) return bad();
      return json(v);
    }
    case FieldType::kNumber: {
      double v = 0;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v) || v < min || v > max) return bad();
      return json(v);
    }
    case FieldType::kBoolean:
      if (text == "1" || text == "true" || text == "on") return json(true);
      if (text == "0" || text == "false" || text == "off") return json(false);
      return bad();
    case FieldType::kObject: {
      if (text.empty()) return json(nullptr);  // --filter '': none
      json v = json::parse(text, nullptr, false);
      if (v.is_discarded() || !v.is_object()) return Status::InvalidArgument(std::string(label) + " must be a JSON object");
      return v;
    }
    case FieldType::kString:
    case FieldType::kEnum: {
      json v(text);
      if (Status s = Check(v, label); !s.ok()) return bad();
      return v;
    }
  }
  return bad();
}

std::string HelpWithDefault(const char* help, const json& default_value, const char* default_text) {
  std::string s = help;
  if (!default_value.is_null()) {
    if (default_value.is_string()) s += " (default " + default_value.get<std::string>() + ")";
    else if (default_value.is_number_float()) s += " (default " + Bound(default_value.get<double>()) + ")";
    else s += " (default " + default_value.dump() + ")";
  } else if (default_text != nullptr) {
    s += std::string(" (default: ") + default_text + ")";
  }
  return s;
}

}  // namespace moeedb::spec
