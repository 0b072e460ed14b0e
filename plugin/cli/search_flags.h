// The CLI flags of the lexical index (new collections) and of a search's
// mode and fusion, shared by ingest, search and eval.
#pragma once

#include <vector>

#include "base/status.h"
#include "plugin/cli/args.h"
#include "database/vector_collection.h"

namespace moeedb::cli {

// --lexical on|off, --language, --bm25-k1, --bm25-b.
std::vector<FlagSpec> LexicalFlagSpecs();
// The lexical settings of a new collection (on, english, 1.2, 0.75 by default).
Result<LexicalSpec> LexicalSpecFromFlags(const Args& args);

// --mode, --alpha, --beta, --w-hs, --fusion, --norm, --rrf-k.
std::vector<FlagSpec> SearchModeFlagSpecs();
// Fills in so's mode, weights and fusion; InvalidArgument naming the flag
// (also for a fusion flag without --mode hybrid).
Status ReadSearchModeFlags(const Args& args, SearchOptions* so);
// The weights and fusion flags alone (what eval, which runs every mode, reads).
Status ReadFusionFlags(const Args& args, SearchOptions* so);

}  // namespace moeedb::cli
