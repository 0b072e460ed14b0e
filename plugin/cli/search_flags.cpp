#include "plugin/cli/search_flags.h"

#include <limits>

namespace moeedb::cli {

std::vector<FlagSpec> LexicalFlagSpecs() {
  return {
      {"lexical", "on|off", "BM25 index over the texts of a new collection, for lexical and hybrid search (default on)"},
      {"language", "NAME", "stemmer of the lexical index: english (default), french, german, ... or none"},
      {"bm25-k1", "X", "BM25 k1 of a new collection (default 1.2)"},
      {"bm25-b", "X", "BM25 b of a new collection (default 0.75)"},
  };
}

Result<LexicalSpec> LexicalSpecFromFlags(const Args& args) {
  LexicalSpec s;
  const std::string on = args.Get("lexical", "on");
  if (on != "on" && on != "off") return Status::InvalidArgument("option --lexical must be on or off, got '" + on + "'");
  s.enabled = on == "on";
  s.language = args.Get("language", s.language);
  MOEEDB_ASSIGN_OR_RETURN(auto k1, args.GetDouble("bm25-k1"));
  MOEEDB_ASSIGN_OR_RETURN(auto b, args.GetDouble("bm25-b"));
  if (k1) s.k1 = *k1;
  if (b) s.b = *b;
  MOEEDB_RETURN_IF_ERROR(s.Validate());
  return s;
}

std::vector<FlagSpec> SearchModeFlagSpecs() {
  return {
      {"mode", "M", "fused (cos_HS + alpha cos_RW, default) | hs | rw | lexical (BM25 alone) | hybrid (all three fused)"},
      {"alpha", "X", "weight of RW (default: the collection's)"},
      {"beta", "X", "hybrid: weight of the lexical signal (default 16)"},
      {"w-hs", "X", "hybrid: weight of HS (default 1)"},
      {"fusion", "F", "hybrid: rrf (reciprocal ranks, default) | weighted (normalised scores)"},
      {"norm", "N", "hybrid weighted fusion: minmax (default) | zscore"},
      {"rrf-k", "N", "hybrid rrf fusion: the k of 1/(k + rank) (default 60)"},
  };
}

Status ReadFusionFlags(const Args& args, SearchOptions* so) {
  MOEEDB_ASSIGN_OR_RETURN(auto alpha, args.GetDouble("alpha"));
  MOEEDB_ASSIGN_OR_RETURN(auto beta, args.GetDouble("beta"));
  MOEEDB_ASSIGN_OR_RETURN(auto w_hs, args.GetDouble("w-hs"));
  if (alpha) so->alpha = static_cast<float>(*alpha);
  if (beta) so->beta = *beta;
  if (w_hs) so->w_hs = *w_hs;
  if (args.Has("fusion")) { MOEEDB_ASSIGN_OR_RETURN(so->fusion, ParseFusionKind(args.Get("fusion"))); }
  if (args.Has("norm")) { MOEEDB_ASSIGN_OR_RETURN(so->norm, ParseScoreNorm(args.Get("norm"))); }
  MOEEDB_ASSIGN_OR_RETURN(long long rrf_k, args.GetInt("rrf-k", 60, 1, 100000));
  so->rrf_k = static_cast<int>(rrf_k);
  return Status::OK();
}

Status ReadSearchModeFlags(const Args& args, SearchOptions* so) {
  MOEEDB_ASSIGN_OR_RETURN(so->mode, ParseQueryMode(args.Get("mode", "fused")));
  MOEEDB_RETURN_IF_ERROR(ReadFusionFlags(args, so));
  if (so->mode == QueryMode::kHybrid) {
    // The collection's alpha is not known here: check the weights given.
    Status s = FusionOf(*so, 0.0f).Validate();
    if (!s.ok()) return Status::InvalidArgument(s.message() + " (--w-hs, --alpha, --beta)");
  } else if (args.Has("beta") || args.Has("w-hs") || args.Has("fusion") || args.Has("norm") || args.Has("rrf-k")) {
    return Status::InvalidArgument("--beta, --w-hs, --fusion, --norm and --rrf-k apply to --mode hybrid only");
  }
  return Status::OK();
}

}  // namespace moeedb::cli
