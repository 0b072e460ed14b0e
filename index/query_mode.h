// What a collection search ranks by: the dense MoEE sum (fused), one dense
// signal alone, BM25 alone, or all three fused (hybrid). The dense index
// (dual_index.h) serves the first three; the collection (database/) the rest.
#pragma once

#include "base/enum_table.h"

namespace moeedb {

enum class QueryMode { kFused, kHs, kRw, kLexical, kHybrid };
inline constexpr EnumTable<QueryMode, 5> kQueryModes{"search mode",
                                                     {{{QueryMode::kFused, "fused"},
                                                       {QueryMode::kHs, "hs"},
                                                       {QueryMode::kRw, "rw"},
                                                       {QueryMode::kLexical, "lexical"},
                                                       {QueryMode::kHybrid, "hybrid"}}}};

// Whether the dense index answers `mode` alone (fused, hs, rw).
inline bool IsDenseMode(QueryMode mode) { return mode == QueryMode::kFused || mode == QueryMode::kHs || mode == QueryMode::kRw; }

}  // namespace moeedb
