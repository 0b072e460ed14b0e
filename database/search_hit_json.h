// The wire forms of a search hit and of a stored document, shared by the
// HTTP collections API and the CLI so both print the same fields. A hit:
//   {"id", "score", "score_hs", "score_rw", "score_lex"?, "parts": {"hs",
//    "rw", "lex"?}, "text", "metadata"}
// score_lex and parts.lex only for collections with a lexical index. A
// document: {"id", "text", "metadata"}.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "database/vector_collection.h"

namespace moeedb {

nlohmann::json SearchHitJson(const SearchHit& hit, bool has_lexical);
nlohmann::json DocumentJson(const StoredDocument& doc);

}  // namespace moeedb
