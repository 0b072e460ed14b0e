// The payload index (index/payload_index.h) against the filter it serves:
// for random documents and filters, the candidates it answers must hold
// every document the filter keeps (MatchesDocument over each document is
// the reference), and equal them where every condition is on an indexed
// key of a kind that answers it; through removals and re-additions too.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "index/payload_index.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

const char* kColors[] = {"red", "green", "blue", "cyan", "gold"};

json RandomDocument(std::mt19937& rng) {
  json d = json::object();
  if (rng() % 10) d["color"] = kColors[rng() % 5];
  if (rng() % 4 == 0) d["color"] = 7;  // a number under a keyword-indexed key
  d["n"] = static_cast<int>(rng() % 100);
  if (rng() % 3 == 0) d["n"] = json::array({static_cast<int>(rng() % 100), static_cast<double>(rng() % 100) + 0.5});
  d["price"] = static_cast<double>(rng() % 1000) / 10.0;
  d["flag"] = rng() % 2 == 0;
  d["tags"] = json::array();
  for (int i = rng() % 3; i > 0; --i) d["tags"].push_back(kColors[rng() % 5]);
  d["city"] = {{"name", kColors[rng() % 5]}};
  // A list of lists: an inner list equals a value when an element does.
  if (rng() % 5 == 0) d["tags"] = json::array({json::array({kColors[rng() % 5]}), kColors[rng() % 5]});
  if (rng() % 7 == 0) d["n"] = json::array({json::array({static_cast<int>(rng() % 100)})});
  d["at"] = "2024-01-" + std::to_string(10 + rng() % 20) + "T10:00:00Z";
  return d;
}

std::vector<uint64_t> Reference(const MetadataFilter& f, const std::map<uint64_t, json>& docs) {
  std::vector<uint64_t> out;
  for (const auto& [id, d] : docs)
    if (f.Matches(d)) out.push_back(id);
  return out;
}

struct Case {
  std::string filter;
  bool exact;  // every condition answered by the index: candidates == matches
};

const std::vector<Case> kCases = {
    {R"({"color": "red"})", true},
    {R"({"color": {"$in": ["red", "blue"]}})", true},
    {R"({"color": 7})", false},  // a number asked of a keyword index: not answered
    {R"({"n": 42})", true},
    {R"({"n": {"$in": [3, 4.5, 5]}})", true},
    {R"({"n": {"$gte": 10, "$lt": 20}})", false},  // closed ends: 20 itself is a candidate
    {R"({"price": {"$gt": 50.5, "$lte": 60}})", false},
    {R"({"flag": true, "color": "gold"})", true},
    {R"({"tags": "cyan"})", true},
    {R"({"city.name": "green", "n": {"$lt": 50}})", false},
    {R"({"$and": [{"color": "red"}, {"flag": false}]})", true},
    {R"({"color": "red", "$or": [{"n": 1}, {"n": 2}]})", false},  // $or is tested per candidate
    {R"({"at": {"$time_gte": "2024-01-15T00:00:00Z", "$time_lt": "2024-01-20T00:00:00Z"}})", false},
    {R"({"color": "red", "price": {"$lt": 10}, "tags": {"$values_count": {"gte": 1}}})", false},
};

TEST(PayloadIndex, CandidatesHoldEveryMatchThroughChanges) {
  PayloadIndexFields fields = {{"color", PayloadFieldKind::kKeyword}, {"n", PayloadFieldKind::kInteger},
                               {"price", PayloadFieldKind::kFloat},   {"flag", PayloadFieldKind::kBool},
                               {"tags", PayloadFieldKind::kKeyword},  {"city.name", PayloadFieldKind::kKeyword},
                               {"at", PayloadFieldKind::kDatetime}};
  auto index = PayloadIndex::Create(fields);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  std::mt19937 rng(7);
  std::map<uint64_t, json> docs;
  for (uint64_t id = 1; id <= 3000; ++id) {
    docs[id] = RandomDocument(rng);
    (*index)->Add(id, docs[id]);
  }
  for (int round = 0; round < 2; ++round) {
    for (const Case& c : kCases) {
      auto f = MetadataFilter::Parse(c.filter);
      ASSERT_TRUE(f.ok()) << c.filter;
      const std::vector<uint64_t> want = Reference(**f, docs);
      bool exact = false;
      auto got = (*index)->Candidates((*f)->Requirements(), &exact);
      if (c.filter == R"({"color": 7})") {
        EXPECT_FALSE(got.has_value()) << "a keyword index answered a number";
        continue;
      }
      ASSERT_TRUE(got.has_value()) << c.filter;
      EXPECT_TRUE(std::is_sorted(got->begin(), got->end()));
      EXPECT_TRUE(std::includes(got->begin(), got->end(), want.begin(), want.end())) << c.filter;
      if (c.exact) EXPECT_EQ(*got, want) << c.filter;
      // Decided by the index alone only where both say so, and then exactly.
      if (exact && (*f)->OnlyEqualities()) EXPECT_EQ(*got, want) << c.filter;
      // Equalities on keyword and bool keys only.
      const std::set<std::string> decided = {R"({"color": "red"})", R"({"color": {"$in": ["red", "blue"]}})",
                                             R"({"flag": true, "color": "gold"})", R"({"tags": "cyan"})",
                                             R"({"$and": [{"color": "red"}, {"flag": false}]})"};
      EXPECT_EQ(exact && (*f)->OnlyEqualities(), decided.count(c.filter) > 0) << c.filter;
      EXPECT_LT(got->size(), docs.size()) << c.filter << ": the index did not narrow";
      EXPECT_GT(want.size(), 0u) << c.filter << ": a case that keeps nothing tests little";
    }
    // Remove a third, replace another third with new payloads.
    for (auto it = docs.begin(); it != docs.end();) {
      const uint64_t id = it->first;
      if (id % 3 == 0) {
        (*index)->Remove(id, it->second);
        it = docs.erase(it);
        continue;
      }
      if (id % 3 == 1) {
        (*index)->Remove(id, it->second);
        it->second = RandomDocument(rng);
        (*index)->Add(id, it->second);
      }
      ++it;
    }
  }
  uint64_t with_color = 0;
  for (const auto& [id, d] : docs) with_color += d.contains("color") ? 1 : 0;
  EXPECT_EQ((*index)->Points("color"), with_color);
  EXPECT_EQ((*index)->Points("unknown"), 0u);
  EXPECT_GT((*index)->memory_bytes(), 0u);
}

TEST(PayloadIndex, AnswersNothingWithoutAnIndexedRequirement) {
  auto index = PayloadIndex::Create({{"color", PayloadFieldKind::kKeyword}, {"body", PayloadFieldKind::kText}});
  ASSERT_TRUE(index.ok());
  (*index)->Add(1, json{{"color", "red"}, {"size", 3}, {"body", "red fox"}});
  for (const char* filter : {R"({"size": 3})", R"({"$or": [{"color": "red"}, {"size": 3}]})",
                             R"({"$not": {"color": "red"}})", R"({"color": {"$ne": "red"}})",
                             R"({"body": {"$text": "fox"}})", R"({"color": {"$gt": "a"}})"}) {
    auto f = MetadataFilter::Parse(filter);
    ASSERT_TRUE(f.ok());
    EXPECT_FALSE((*index)->Candidates((*f)->Requirements()).has_value()) << filter;
  }
  EXPECT_EQ((*index)->Points("body"), 1u);
}

TEST(PayloadIndex, DeclarationsParseAndNameTheBadKey) {
  auto ok = PayloadIndexFieldsFromJson(json{{"a.b[]", "keyword"}, {"n", "integer"}});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(PayloadIndexFieldsToJson(*ok), (json{{"a.b[]", "keyword"}, {"n", "integer"}}));
  auto bad = PayloadIndexFieldsFromJson(json{{"lang", "keywords"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'lang'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("keyword"), std::string::npos);
  EXPECT_FALSE(PayloadIndexFieldsFromJson(json{{"x", 3}}).ok());
  EXPECT_FALSE(PayloadIndexFieldsFromJson(json::array()).ok());
}

}  // namespace
}  // namespace moeedb
