// The typed specs (database/spec/): every field a front end carries
// round-trips through the collections API's JSON and the CLI's flags to the
// same spec, and a bad value gets the same rule's error through each, named
// as that front end names the field. The C API's JSON entry point is tested
// in tests/plugin/capi_spec_test.cpp (it needs the model library).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/enum_table.h"
#include "database/spec/collection_spec.h"
#include "database/spec/search_spec.h"
#include "plugin/cli/spec_flags.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

// Every member of a SearchSpec, read directly (not through the table), so a
// field the table forgets to read or write shows up as a difference.
json Members(const SearchSpec& s) {
  auto opt = [](const auto& o) { return o ? json(*o) : json(nullptr); };
  return {{"query", s.query},
          {"k", s.k},
          {"mode", kQueryModes.Name(s.mode)},
          {"alpha", opt(s.alpha)},
          {"beta", opt(s.beta)},
          {"w_hs", opt(s.w_hs)},
          {"fusion", s.fusion ? json(kFusionKinds.Name(*s.fusion)) : json(nullptr)},
          {"norm", s.norm ? json(kScoreNorms.Name(*s.norm)) : json(nullptr)},
          {"rrf_k", opt(s.rrf_k)},
          {"filter", s.filter_json},
          {"has_filter", s.filter != nullptr},
          {"exact", s.exact},
          {"oversample", opt(s.oversample)},
          {"partial", s.partial},
          {"min_seq", s.min_seq},
          {"consistency", kReadConsistencies.Name(s.consistency)}};
}

json Members(const CollectionSpec& s) {
  return {{"index_hs", kIndexKinds.Name(s.index_hs)},
          {"index_rw", kIndexKinds.Name(s.index_rw)},
          {"sq8", s.sq8},
          {"codes", kCodeKinds.Name(s.codes)},
          {"pq_dims", s.pq_dims},
          {"oversample", s.oversample},
          {"on_disk", s.on_disk},
          {"fp16_rows", s.fp16_rows},
          {"alpha", s.alpha ? json(*s.alpha) : json(nullptr)},
          {"lexical", s.lexical},
          {"language", s.language},
          {"bm25_k1", s.bm25_k1},
          {"bm25_b", s.bm25_b},
          {"vector_size", s.vector_size ? json(*s.vector_size) : json(nullptr)},
          {"distance", kDistances.Name(s.distance)},
          {"text_key", s.text_key}};
}

// A search with every field away from its default.
SearchSpec FullSearch() {
  SearchSpec s;
  s.query = "card not delivered";
  s.k = 7;
  s.mode = QueryMode::kHybrid;
  s.alpha = 0.5f;
  s.beta = 2.5;
  s.w_hs = 0.75;
  s.fusion = FusionKind::kWeighted;
  s.norm = ScoreNorm::kZScore;
  s.rrf_k = 30;
  EXPECT_TRUE(s.SetFilter(R"({"topic": {"$in": ["banking", "cards"]}, "year": {"$gte": 2000}})").ok());
  s.exact = true;
  s.oversample = 6.5;
  s.partial = true;
  s.min_seq = 12345678901ull;
  s.consistency = ReadConsistency::kHead;
  return s;
}

CollectionSpec FullCollection() {
  CollectionSpec c;
  c.index_hs = IndexKind::kHnsw;
  c.index_rw = IndexKind::kIvf;
  c.sq8 = true;
  c.codes = CodeKind::kSq8;  // the same as sq8: both may be given when they agree
  c.pq_dims = 4;
  c.oversample = 12;
  c.on_disk = true;
  c.fp16_rows = true;
  c.alpha = 0.25f;
  c.lexical = false;
  c.language = "french";
  c.bm25_k1 = 0.9;
  c.bm25_b = 0.5;
  c.vector_size = 384;
  c.distance = Distance::kEuclid;
  c.text_key = "body";
  return c;
}

// The command line that says `j` (a spec's JSON): --flag value per field, a
// bare --flag for a true boolean without a placeholder, `skip` left out.
template <typename Spec>
std::vector<std::string> Argv(const spec::FieldTable<Spec>& table, const json& j, const std::string& skip = "") {
  std::vector<std::string> argv;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == skip) continue;
    const auto* f = spec::FindField(table, it.key());
    EXPECT_NE(f, nullptr) << it.key();
    argv.push_back("--" + spec::FlagName(it.key()));
    if (f->rule.type == spec::FieldType::kBoolean && std::string(f->meta).empty()) continue;
    argv.push_back(it.value().is_string() ? it.value().get<std::string>() : it.value().dump());
  }
  return argv;
}

template <typename Spec>
Result<Spec> FromArgv(const spec::FieldTable<Spec>& table, const std::vector<std::string>& argv,
                      const cli::FieldPick& pick = {}) {
  MOEEDB_ASSIGN_OR_RETURN(cli::Args args, cli::Args::Parse(argv, cli::SpecFlags(table, pick)));
  Spec s;
  MOEEDB_RETURN_IF_ERROR(cli::ReadSpecFlags(args, table, &s));
  MOEEDB_RETURN_IF_ERROR(s.Check(spec::Spelling::kFlag));
  if (!args.positional().empty()) {
    if constexpr (std::is_same_v<Spec, SearchSpec>) s.query = args.positional()[0];
  }
  return s;
}

TEST(SearchSpecTest, EveryFieldRoundTripsThroughJson) {
  const SearchSpec full = FullSearch();
  const json wire = SearchSpecToJson(full);
  // Every table field is on the wire (the full spec sets them all).
  for (const auto& f : SearchFields()) EXPECT_TRUE(wire.contains(f.name)) << f.name;
  auto back = SearchSpecFromJson(json::parse(wire.dump()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(Members(*back), Members(full));
  // Defaults stay unset on the wire, so a forwarded spec keeps "not given".
  auto minimal = SearchSpecFromJson({{"query", "x"}});
  ASSERT_TRUE(minimal.ok());
  EXPECT_EQ(SearchSpecToJson(*minimal), json({{"query", "x"}, {"k", 10}, {"mode", "fused"}, {"exact", false}, {"partial", false}, {"min_seq", 0}, {"consistency", "any"}}));
}

TEST(SearchSpecTest, EveryFieldRoundTripsThroughTheCommandLine) {
  const SearchSpec full = FullSearch();
  std::vector<std::string> argv = Argv(SearchFields(), SearchSpecToJson(full), "query");
  argv.push_back(full.query);
  auto back = FromArgv(SearchFields(), argv, {.skip = {"query"}});
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(Members(*back), Members(full));
  // The CLI's search flags are the table's fields (all but the query, its argument).
  const auto flags = cli::SpecFlags(SearchFields(), {.skip = {"query"}});
  EXPECT_EQ(flags.size() + 1, SearchFields().size());
}

TEST(SearchSpecTest, DefaultsAndLimitsComeFromOnePlace) {
  std::map<std::string, std::string> help;
  for (const auto& f : cli::SpecFlags(SearchFields())) help[f.name] = f.help;
  EXPECT_NE(help["k"].find("(default " + std::to_string(SearchSpec{}.k) + ")"), std::string::npos) << help["k"];
  EXPECT_NE(help["rrf-k"].find("(default " + std::to_string(kDefaultRrfK) + ")"), std::string::npos) << help["rrf-k"];
  EXPECT_NE(help["fusion"].find(std::string("(default ") + kFusionKinds.Name(kDefaultFusion) + ")"), std::string::npos);
  EXPECT_NE(help["alpha"].find("the collection's"), std::string::npos);
  // What a hybrid search runs with when the spec names nothing.
  const FusionOptions fo = FusionOf(SearchSpec{}, 0.5f);
  EXPECT_EQ(fo.kind, kDefaultFusion);
  EXPECT_EQ(fo.rrf_k, kDefaultRrfK);
  EXPECT_EQ(fo.w_lex, kDefaultBeta);
  EXPECT_EQ(fo.w_rw, 0.5);
  // The limit the table enforces is the one the collection enforces.
  const auto* k = spec::FindField(SearchFields(), "k");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->rule.max, static_cast<double>(kMaxSearchK));
}

struct BadCase {
  json body;                // the collections API's body
  std::string field;        // the field the error must name
  std::string rule;         // the rule's words, the same in every front end
};

TEST(SearchSpecTest, AnOutOfRangeValueGetsTheSameRuleThroughEachFrontEnd) {
  const std::vector<BadCase> cases = {
      {{{"query", "x"}, {"k", 0}}, "k", "must be an integer in [1, 10000]"},
      {{{"query", "x"}, {"k", 10001}}, "k", "must be an integer in [1, 10000]"},
      {{{"query", "x"}, {"mode", "borda"}}, "mode", "must be one of fused, hs, rw, lexical, hybrid"},
      {{{"query", "x"}, {"mode", "hybrid"}, {"rrf_k", 0}}, "rrf_k", "must be an integer in [1, 100000]"},
      {{{"query", "x"}, {"mode", "hybrid"}, {"beta", -1}}, "beta", "must be a finite number >= 0"},
      {{{"query", "x"}, {"mode", "hybrid"}, {"norm", "l2"}}, "norm", "must be one of minmax, zscore"},
      {{{"query", "x"}, {"beta", 1}}, "beta", "applies to"},
      {{{"query", "x"}, {"mode", "hybrid"}, {"alpha", -1}}, "alpha", "must be >= 0 in hybrid search"},
      {{{"query", "x"}, {"filter", {{"n", {{"$near", 1}}}}}}, "filter", "$near"},
  };
  for (const auto& c : cases) {
    auto j = SearchSpecFromJson(c.body);
    ASSERT_FALSE(j.ok()) << c.body;
    EXPECT_EQ(j.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(j.status().message().find("'" + c.field + "'"), std::string::npos) << j.status().message();
    EXPECT_NE(j.status().message().find(c.rule), std::string::npos) << j.status().message();
    std::vector<std::string> argv = Argv(SearchFields(), c.body, "query");
    argv.push_back("x");
    auto f = FromArgv(SearchFields(), argv, {.skip = {"query"}});
    ASSERT_FALSE(f.ok()) << c.body;
    EXPECT_EQ(f.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(f.status().message().find("--" + spec::FlagName(c.field)), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find(c.rule), std::string::npos) << f.status().message();
  }
  // Types: the JSON front end says what it wanted.
  auto t = SearchSpecFromJson({{"query", "x"}, {"k", "ten"}});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("'k' must be an integer"), std::string::npos) << t.status().message();
  auto q = SearchSpecFromJson({{"k", 3}});
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("'query'"), std::string::npos);
}

TEST(CollectionSpecTest, EveryFieldRoundTripsThroughJsonAndTheCommandLine) {
  const CollectionSpec full = FullCollection();
  const json wire = CollectionSpecToJson(full);
  for (const auto& f : CollectionFields()) EXPECT_TRUE(wire.contains(f.name)) << f.name;
  auto back = CollectionSpecFromJson(json::parse(wire.dump()));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(Members(*back), Members(full));
  auto cli = FromArgv(CollectionFields(), Argv(CollectionFields(), wire));
  ASSERT_TRUE(cli.ok()) << cli.status().message();
  EXPECT_EQ(Members(*cli), Members(full));
  // The collections API's nested forms read as the same spec.
  auto nested = CollectionSpecFromJson({{"index", {{"hs", "hnsw"}, {"rw", "ivf"}, {"sq8", true}, {"codes", "sq8"},
                                                  {"pq_dims", 4}, {"oversample", 12}, {"on_disk", true},
                                                  {"fp16_rows", true}}},
                                        {"alpha", 0.25},
                                        {"lexical", {{"enabled", false}, {"language", "french"}, {"k1", 0.9}, {"b", 0.5}}},
                                        {"vector_size", 384}, {"distance", "Euclid"}, {"text_key", "body"}});
  ASSERT_TRUE(nested.ok()) << nested.status().message();
  EXPECT_EQ(Members(*nested), Members(full));
  // ApplyTo puts every field where the collection reads it.
  CollectionOptions o;
  full.ApplyTo(&o);
  EXPECT_EQ(o.index.hs.kind, IndexKind::kHnsw);
  EXPECT_EQ(o.index.rw.kind, IndexKind::kIvf);
  EXPECT_TRUE(o.index.hs.codes == CodeKind::kSq8 && o.index.rw.codes == CodeKind::kSq8);
  EXPECT_TRUE(o.index.hs.pq_dims == 4 && o.index.rw.pq_dims == 4);
  EXPECT_EQ(o.index.oversample, 12);
  EXPECT_TRUE(o.index.rows_on_disk && o.index.fp16_rows);
  // sq8 and a different code kind contradict each other: refused by name.
  auto both = CollectionSpecFromJson({{"sq8", true}, {"codes", "binary"}});
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("'codes'"), std::string::npos) << both.status().message();
  auto bad_codes = CollectionSpecFromJson({{"index", {{"codes", "rabitq"}}}});
  ASSERT_FALSE(bad_codes.ok());
  EXPECT_NE(bad_codes.status().message().find("none, sq8, sq4, pq, binary"), std::string::npos) << bad_codes.status().message();
  EXPECT_EQ(o.default_alpha, 0.25f);
  EXPECT_FALSE(o.lexical.enabled);
  EXPECT_EQ(o.lexical.language, "french");
  EXPECT_EQ(o.lexical.k1, 0.9);
  EXPECT_EQ(o.lexical.b, 0.5);
  // NewOptions: the vector schema from vector_size and distance.
  CollectionOptions model;
  model.dim_hs = 12;
  model.dim_rw = 6;
  model.info_json = R"({"model_dir": "m"})";
  auto plain = full.NewOptions(model);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->dim_hs, 385u);  // the Euclid vector's segment: x, then -|x|^2/2
  EXPECT_EQ(plain->dim_rw, 1u);    // its absence flag
  EXPECT_EQ(VectorSchema::FromInfo(plain->info_json)->kind, VectorKind::kPlain);
  EXPECT_EQ(VectorSchema::FromInfo(plain->info_json)->text_key, "body");
  CollectionSpec fused;
  fused.vector_size = 18;
  auto f = fused.NewOptions(model);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->dim_hs, 12u);
  EXPECT_EQ(VectorSchema::FromInfo(f->info_json)->kind, VectorKind::kFused);
  EXPECT_EQ(json::parse(f->info_json)["model_dir"], "m");
  fused.distance = Distance::kDot;  // the fused size compared by Dot: the client's own plain vectors
  EXPECT_EQ(VectorSchema::FromInfo(fused.NewOptions(model)->info_json)->kind, VectorKind::kPlain);
  EXPECT_EQ(VectorSchema::FromInfo(CollectionSpec{}.NewOptions(model)->info_json)->kind, VectorKind::kModel);
}

TEST(CollectionSpecTest, BadSettingsNameTheFieldInEachFrontEnd) {
  const std::vector<BadCase> cases = {
      {{{"index_hs", "lsh"}}, "index_hs", "must be one of flat, hnsw, ivf"},
      {{{"bm25_b", 2}}, "bm25_b", "must be a finite number in [0, 1]"},
      {{{"bm25_k1", -1}}, "bm25_k1", "must be a finite number >= 0"},
      {{{"language", "klingon"}}, "language", "unknown stemmer language"},
  };
  for (const auto& c : cases) {
    auto j = CollectionSpecFromJson(c.body);
    ASSERT_FALSE(j.ok()) << c.body;
    EXPECT_NE(j.status().message().find("'" + c.field + "'"), std::string::npos) << j.status().message();
    EXPECT_NE(j.status().message().find(c.rule), std::string::npos) << j.status().message();
    auto f = FromArgv(CollectionFields(), Argv(CollectionFields(), c.body));
    ASSERT_FALSE(f.ok()) << c.body;
    EXPECT_NE(f.status().message().find("--" + spec::FlagName(c.field)), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find(c.rule), std::string::npos) << f.status().message();
  }
  EXPECT_FALSE(CollectionSpecFromJson({{"index", {{"pq", true}}}}).ok());
  EXPECT_FALSE(CollectionSpecFromJson({{"lexical", "yes"}}).ok());
  EXPECT_FALSE(CollectionSpecFromJson({{"lexical", {{"stemmer", "english"}}}}).ok());
}

enum class Color { kRed, kBlue };
constexpr EnumTable<Color, 3> kColors{"color", {{{Color::kRed, "red"}, {Color::kBlue, "blue"}, {Color::kBlue, "azure", true}}}};

TEST(EnumTableTest, ParsesOneWayAndListsTheAlternatives) {
  EXPECT_EQ(*kColors.Parse("red"), Color::kRed);
  EXPECT_EQ(*kColors.Parse("azure"), Color::kBlue);  // an alias parses...
  EXPECT_STREQ(kColors.Name(Color::kBlue), "blue");  // ...but is never printed
  auto bad = kColors.Parse("green");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "unknown color 'green' (red or blue)");
  EXPECT_EQ(kColors.Names(), (std::vector<std::string>{"red", "blue"}));
  EXPECT_EQ(kQueryModes.Alternatives(), "fused, hs, rw, lexical or hybrid");
}

}  // namespace
}  // namespace moeedb
