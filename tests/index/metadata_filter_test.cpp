// Metadata filters (index/metadata_filter.h) with Qdrant's semantics: each
// expectation below is worked out by hand from qdrant-client's local-mode
// rules (payload_filters.py), not by running moeedb's code; distances and
// times against values computed independently (haversine by hand, epoch
// seconds of known dates).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "index/metadata_filter.h"

namespace moeedb {
namespace {

using json = nlohmann::json;

bool Matches(const std::string& filter, const json& meta, const std::string& id = "p",
             const std::vector<std::string>* vectors = nullptr) {
  auto f = MetadataFilter::Parse(filter);
  EXPECT_TRUE(f.ok()) << filter << ": " << f.status().ToString();
  return f.ok() && MatchesDocument(**f, meta.dump(), id, vectors);
}

const json kCountry = json::parse(R"({
  "country": {"name": "Germany", "cities": [
    {"name": "Berlin", "population": 3.7, "sightseeing": ["Brandenburg Gate", "Reichstag"]},
    {"name": "Munich", "population": 1.5, "sightseeing": ["Marienplatz"]},
    {"name": "Bonn", "population": null, "sightseeing": []}]},
  "tags": ["a", "b"], "nones": [null, null], "empty": [], "null": null, "n": 5,
  "words": "the quick brown fox", "at": "2024-02-29T12:00:00+01:00",
  "where": {"lat": 52.52, "lon": 13.405}})");

TEST(MetadataFilter, PathsIntoListsFlattenOneLevel) {
  EXPECT_TRUE(Matches(R"({"country.cities[].name": "Munich"})", kCountry));
  EXPECT_FALSE(Matches(R"({"country.cities[].name": "Paris"})", kCountry));
  EXPECT_TRUE(Matches(R"({"country.cities[0].name": "Berlin"})", kCountry));
  EXPECT_FALSE(Matches(R"({"country.cities[1].name": "Berlin"})", kCountry));
  EXPECT_FALSE(Matches(R"({"country.cities[7].name": "Berlin"})", kCountry));  // past the end: no value
  // The sightseeing lists flatten into their strings.
  EXPECT_TRUE(Matches(R"({"country.cities[].sightseeing": "Reichstag"})", kCountry));
  EXPECT_TRUE(Matches(R"({"country.cities[].population": {"$gte": 3, "$lt": 4}})", kCountry));
  // One value must meet every bound: 1.5 >= 1 and 3.7 <= 2 are different values.
  EXPECT_FALSE(Matches(R"({"country.cities[].population": {"$gte": 3, "$lte": 2}})", kCountry));
  EXPECT_TRUE(Matches(R"({"tags[]": "b"})", kCountry));
  EXPECT_TRUE(Matches(R"({"\"country\".name": "Germany"})", kCountry));  // a quoted key
}

TEST(MetadataFilter, EmptyNullAndValuesCountSeeListsWhole) {
  // is_empty: missing, or every value null or [].
  EXPECT_TRUE(Matches(R"({"missing": {"$empty": true}})", kCountry));
  EXPECT_TRUE(Matches(R"({"empty": {"$empty": true}})", kCountry));
  EXPECT_TRUE(Matches(R"({"null": {"$empty": true}})", kCountry));
  EXPECT_FALSE(Matches(R"({"nones": {"$empty": true}})", kCountry));  // [null, null] is one non-empty value
  EXPECT_FALSE(Matches(R"({"country.cities[].sightseeing": {"$empty": true}})", kCountry));
  // is_null: some value is null; a list of nulls is a list, not null.
  EXPECT_TRUE(Matches(R"({"null": {"$null": true}})", kCountry));
  EXPECT_FALSE(Matches(R"({"nones": {"$null": true}})", kCountry));
  EXPECT_FALSE(Matches(R"({"missing": {"$null": true}})", kCountry));
  EXPECT_TRUE(Matches(R"({"country.cities[].population": {"$null": true}})", kCountry));  // Bonn's
  // values_count: tags has 2; the cities' sightseeing lists count 2, 1, 0.
  EXPECT_TRUE(Matches(R"({"tags": {"$values_count": {"gte": 2, "lt": 3}}})", kCountry));
  EXPECT_FALSE(Matches(R"({"tags": {"$values_count": {"gt": 2}}})", kCountry));
  EXPECT_TRUE(Matches(R"({"country.cities[].sightseeing": {"$values_count": {"gte": 2}}})", kCountry));
  EXPECT_FALSE(Matches(R"({"country.cities[].sightseeing": {"$values_count": {"gt": 2}}})", kCountry));
  EXPECT_FALSE(Matches(R"({"missing": {"$values_count": {"lt": 5}}})", kCountry));
  EXPECT_TRUE(Matches(R"({"n": {"$values_count": {"lte": 1}}})", kCountry));
}

TEST(MetadataFilter, ExceptTextAndTextAny) {
  EXPECT_TRUE(Matches(R"({"tags": {"$except": ["a"]}})", kCountry));        // "b" is not "a"
  EXPECT_FALSE(Matches(R"({"tags": {"$except": ["a", "b"]}})", kCountry));
  EXPECT_FALSE(Matches(R"({"missing": {"$except": ["a"]}})", kCountry));    // no value: no match
  EXPECT_TRUE(Matches(R"({"missing": {"$nin": ["a"]}})", kCountry));        // $nin: none of them
  EXPECT_TRUE(Matches(R"({"words": {"$text": "quick brown"}})", kCountry));
  EXPECT_FALSE(Matches(R"({"words": {"$text": "brown quick"}})", kCountry));
  EXPECT_TRUE(Matches(R"({"words": {"$text_any": "slow fox"}})", kCountry));
  EXPECT_FALSE(Matches(R"({"words": {"$text_any": "slow dog"}})", kCountry));
  EXPECT_TRUE(Matches(R"({"country.cities[].sightseeing": {"$text": "Gate"}})", kCountry));
}

TEST(MetadataFilter, NestedMinShouldAndHasVector) {
  // Nested: one city must meet both conditions; across cities is not enough.
  EXPECT_TRUE(Matches(R"({"$nested": {"key": "country.cities", "filter": {"name": "Munich", "population": {"$lt": 2}}}})", kCountry));
  EXPECT_FALSE(Matches(R"({"$nested": {"key": "country.cities", "filter": {"name": "Munich", "population": {"$gt": 2}}}})", kCountry));
  EXPECT_TRUE(Matches(R"({"country.cities[].name": "Munich", "country.cities[].population": {"$gt": 2}})", kCountry));
  EXPECT_TRUE(Matches(R"({"$nested": {"key": "country.cities", "filter": {"sightseeing": {"$empty": true}}}})", kCountry));
  const char* two_of_three = R"({"$min_should": {"min_count": 2, "filters": [{"n": 5}, {"tags": "z"}, {"null": {"$null": true}}]}})";
  EXPECT_TRUE(Matches(two_of_three, kCountry));
  EXPECT_FALSE(Matches(R"({"$min_should": {"min_count": 2, "filters": [{"n": 5}, {"tags": "z"}, {"n": 6}]}})", kCountry));
  EXPECT_FALSE(Matches(R"({"$min_should": {"min_count": 1, "filters": []}})", kCountry));
  EXPECT_TRUE(Matches(R"({"$min_should": {"min_count": 0, "filters": []}})", kCountry));
  const std::vector<std::string> has = {"text", "code"};
  auto f = MetadataFilter::Parse(R"({"$has_vector": "code"})");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE((*f)->UsesVectors());
  EXPECT_FALSE((*f)->UsesIds());
  EXPECT_TRUE(Matches(R"({"$has_vector": "code"})", kCountry, "p", &has));
  EXPECT_FALSE(Matches(R"({"$has_vector": "image"})", kCountry, "p", &has));
  EXPECT_TRUE(Matches(R"({"$not": {"$has_vector": "image"}})", kCountry, "p", &has));
  EXPECT_FALSE(Matches(R"({"$has_vector": "code"})", kCountry));  // no vectors given: none
  // A nested filter sees the element alone: no id or vectors asked of the caller.
  EXPECT_FALSE((*MetadataFilter::Parse(R"({"$nested": {"key": "a", "filter": {"$id": "x"}}})"))->UsesIds());
}

TEST(MetadataFilter, GeoAreas) {
  // Haversine with R = 6371008.8 m, worked out apart from moeedb: Berlin (52.52, 13.405) to
  // (52.5096, 13.3760) is 2,277.8 m.
  EXPECT_TRUE(Matches(R"({"where": {"$geo_radius": {"center": {"lat": 52.5096, "lon": 13.3760}, "radius": 2290}}})", kCountry));
  EXPECT_FALSE(Matches(R"({"where": {"$geo_radius": {"center": {"lat": 52.5096, "lon": 13.3760}, "radius": 2270}}})", kCountry));
  EXPECT_TRUE(Matches(R"({"where": {"$geo_box": {"top_left": {"lat": 53, "lon": 13}, "bottom_right": {"lat": 52, "lon": 14}}}})", kCountry));
  EXPECT_FALSE(Matches(R"({"where": {"$geo_box": {"top_left": {"lat": 53, "lon": 14}, "bottom_right": {"lat": 52, "lon": 15}}}})", kCountry));
  // A box across the antimeridian (top left lon 170, bottom right lon -170) holds lon 175 and -175 only.
  const json east = {{"where", {{"lat", 0}, {"lon", 175}}}}, west = {{"where", {{"lat", 0}, {"lon", -175}}}};
  const char* across = R"({"where": {"$geo_box": {"top_left": {"lat": 10, "lon": 170}, "bottom_right": {"lat": -10, "lon": -170}}}})";
  EXPECT_TRUE(Matches(across, east));
  EXPECT_TRUE(Matches(across, west));
  EXPECT_FALSE(Matches(across, json{{"where", {{"lat", 0}, {"lon", 0}}}}));
  // A square 52..53 x 13..14 with a hole 52.4..52.6 x 13.3..13.5 around Berlin.
  const std::string ring = R"({"points": [{"lat": 52, "lon": 13}, {"lat": 53, "lon": 13}, {"lat": 53, "lon": 14}, {"lat": 52, "lon": 14}, {"lat": 52, "lon": 13}]})";
  const std::string hole = R"({"points": [{"lat": 52.4, "lon": 13.3}, {"lat": 52.6, "lon": 13.3}, {"lat": 52.6, "lon": 13.5}, {"lat": 52.4, "lon": 13.5}, {"lat": 52.4, "lon": 13.3}]})";
  EXPECT_TRUE(Matches(R"({"where": {"$geo_polygon": {"exterior": )" + ring + "}}}", kCountry));
  EXPECT_FALSE(Matches(R"({"where": {"$geo_polygon": {"exterior": )" + ring + R"(, "interiors": [)" + hole + "]}}}", kCountry));
  EXPECT_FALSE(MetadataFilter::Parse(R"({"where": {"$geo_polygon": {"exterior": {"points": [{"lat": 1, "lon": 2}]}}}})").ok());
}

TEST(MetadataFilter, DatetimesCompareAsInstants) {
  int64_t t = 0;
  ASSERT_TRUE(ParseDatetime("1970-01-02", &t));
  EXPECT_EQ(t, 86400LL * 1000000);
  ASSERT_TRUE(ParseDatetime("2000-03-01T00:00:00Z", &t));
  EXPECT_EQ(t, 951868800LL * 1000000);  // date -u -d 2000-03-01 +%s
  ASSERT_TRUE(ParseDatetime("2000-03-01 01:30:00.25+01:30", &t));
  EXPECT_EQ(t, 951868800LL * 1000000 + 250000);
  ASSERT_TRUE(ParseDatetime("2000-03-01 00:00", &t));
  EXPECT_EQ(t, 951868800LL * 1000000);
  ASSERT_TRUE(ParseDatetime("2000-03-01T02:00:00-02", &t));
  EXPECT_EQ(t, 951868800LL * 1000000 + 4 * 3600LL * 1000000);
  for (const char* bad : {"2000-02-30", "2001-02-29", "2000-03-01T00:00", "2000-3-1", "2000-03-01T00:00:00X", "noon"})
    EXPECT_FALSE(ParseDatetime(bad, &t)) << bad;
  // 2024-02-29T12:00:00+01:00 is 11:00 UTC.
  EXPECT_TRUE(Matches(R"({"at": {"$time_gte": "2024-02-29T11:00:00Z", "$time_lt": "2024-02-29T11:00:01Z"}})", kCountry));
  EXPECT_FALSE(Matches(R"({"at": {"$time_gt": "2024-02-29T11:00:00Z"}})", kCountry));
  EXPECT_TRUE(Matches(R"({"at": {"$time_lt": "2024-03-01"}})", kCountry));
  EXPECT_FALSE(Matches(R"({"words": {"$time_lt": "2024-03-01"}})", kCountry));  // not a datetime: no match
  EXPECT_FALSE(MetadataFilter::Parse(R"({"at": {"$time_lt": "tomorrow"}})").ok());
}

TEST(MetadataFilter, AKeyThatIsNoPathNamesItselfOnly) {
  const json meta = {{"price[usd]", 3}, {"a..b", "x"}};
  EXPECT_TRUE(Matches(R"({"price[usd]": 3})", meta));
  EXPECT_TRUE(Matches(R"({"a..b": "x"})", meta));
  EXPECT_FALSE(Matches(R"({"price[eur]": 3})", meta));
  EXPECT_FALSE(PayloadKey::Parse("price[usd]").ok());  // as a path (facets, order_by) it is refused
}

TEST(MetadataFilter, BadFiltersNameTheirField) {
  for (const auto& [filter, named] : std::vector<std::pair<std::string, std::string>>{
           {R"({"tags": {"$values_count": {"most": 1}}})", "tags"},
           {R"({"where": {"$geo_radius": {"center": {"lat": 1}}}})", "where"},
           {R"({"n": {"$regex": "x"}})", "n"},
           {R"({"$nested": {"key": "a"}})", "$nested"}}) {
    auto f = MetadataFilter::Parse(filter);
    ASSERT_FALSE(f.ok()) << filter;
    EXPECT_NE(f.status().message().find(named), std::string::npos) << f.status().message();
  }
}

}  // namespace
}  // namespace moeedb

namespace moeedb {
namespace {

// set_payload with a key, Qdrant's rules (qdrant-client's local mode,
// payload_value_setter.py) worked out by hand for each case.
json Merged(json payload, const std::string& key, const json& values) {
  auto k = PayloadKey::Parse(key);
  EXPECT_TRUE(k.ok()) << key;
  if (k.ok()) k->MergeInto(&payload, values);
  return payload;
}

TEST(PayloadKey, MergeIntoFollowsQdrantsSetPayloadWithAKey) {
  const json nest = json::parse(R"({"nest": [{"a": "100", "b": "200"}]})");
  EXPECT_EQ(Merged(nest, "nest[0]", {{"a", "101"}}), json::parse(R"({"nest": [{"a": "101", "b": "200"}]})"));
  EXPECT_EQ(Merged(nest, "nest[1]", {{"d", "404"}}), nest);  // no such element: unchanged
  EXPECT_EQ(Merged(nest, "nest[].nest", {{"d", "404"}}),
            json::parse(R"({"nest": [{"a": "100", "b": "200", "nest": {"d": "404"}}]})"));
  EXPECT_EQ(Merged(nest, "nest[]", {{"d", "404"}}), json::parse(R"({"nest": [{"a": "100", "b": "200", "d": "404"}]})"));
  EXPECT_EQ(Merged(json::object(), "nest[]", {{"d", "404"}}), json::parse(R"({"nest": []})"));  // made a list, empty
  const json lists = json::parse(R"({"nest": [{"a": [], "b": "200"}]})");
  EXPECT_EQ(Merged(lists, "nest[0].a[]", {{"a", "101"}}), lists);  // no element to merge into
  EXPECT_EQ(Merged(json::parse(R"({"a": {"b": {"c": {"d": {"e": 1}}}}})"), "a.b.c.d", {{"f", 2}}),
            json::parse(R"({"a": {"b": {"c": {"d": {"e": 1, "f": 2}}}}})"));
  EXPECT_EQ(Merged(json::parse(R"({"a": []})"), "a.b", json::object()), json::parse(R"({"a": {"b": {}}})"));
  // A scalar where an object is named is replaced; a missing path is made.
  EXPECT_EQ(Merged(json::parse(R"({"a": 5})"), "a", {{"x", 1}}), json::parse(R"({"a": {"x": 1}})"));
  EXPECT_EQ(Merged(json::parse(R"({"k": 1})"), "p.q", {{"x", 1}}), json::parse(R"({"k": 1, "p": {"q": {"x": 1}}})"));
  // The key "" is spelled '""'; an unquoted empty path is no key.
  EXPECT_EQ(Merged(json::parse(R"({"": {"a": 1}})"), R"("")", {{"b", 2}}), json::parse(R"({"": {"a": 1, "b": 2}})"));
  EXPECT_TRUE(Matches(R"({"\"\"": "xc"})", json{{"", "xc"}}));
  EXPECT_FALSE(PayloadKey::Parse("").ok());
  EXPECT_FALSE(PayloadKey::Parse("a..b").ok());
}

}  // namespace
}  // namespace moeedb
