// EnumTable: the one spelling of each value of an enum, and the one way an
// enum is parsed (Result<E>, with an error that lists the allowed names).
// Declared next to its enum as
//   inline constexpr EnumTable<Color, 2> kColors{"color", {{{Color::kRed, "red"}, {Color::kBlue, "blue"}}}};
// so that parsers, printers, help texts and the typed specs' allowed values
// (database/spec/) all read the same list.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace moeedb {

template <typename E>
struct EnumSpelling {
  E value;
  const char* name;
  bool alias = false;  // accepted by Parse, never printed (an older or longer spelling)
};

template <typename E, size_t N>
struct EnumTable {
  const char* what;  // what the enum is, for errors: "search mode"
  std::array<EnumSpelling<E>, N> entries;

  // InvalidArgument "unknown <what> '<name>' (a, b or c)" for a name not in the table.
  Result<E> Parse(std::string_view name) const {
    for (const auto& e : entries)
      if (name == e.name) return e.value;
    return Status::InvalidArgument("unknown " + std::string(what) + " '" + std::string(name.substr(0, 80)) + "' (" +
                                   Alternatives() + ")");
  }
  // The value's spelling ("?" for a value outside the table).
  const char* Name(E value) const {
    for (const auto& e : entries)
      if (e.value == value && !e.alias) return e.name;
    return "?";
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (const auto& e : entries)
      if (!e.alias) out.emplace_back(e.name);
    return out;
  }
  // "a, b or c".
  std::string Alternatives() const {
    const std::vector<std::string> names = Names();
    std::string s;
    for (size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    return s;
  }
};

}  // namespace moeedb
