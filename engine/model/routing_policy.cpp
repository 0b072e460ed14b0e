#include "engine/model/routing_policy.h"

#include <charconv>
#include <cstdio>
#include <sstream>

namespace moeedb {

namespace {

Status Bad(const std::string& spec, const std::string& why) {
  return Status::InvalidArgument("routing '" + spec + "': " + why +
                                 " (expected learned | ssmoe[:c=0.5,k=50,sign=canonical|reference] | "
                                 "top1[:weight=raw|one])");
}

}  // namespace

Result<RoutingPolicy> RoutingPolicy::Parse(const std::string& spec) {
  RoutingPolicy p;
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string params = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind == "learned") p.kind = Kind::kLearned;
  else if (kind == "ssmoe") p.kind = Kind::kSsmoe;
  else if (kind == "top1") p.kind = Kind::kTop1;
  else return Bad(spec, "unknown routing '" + kind + "'");
  if (colon != std::string::npos && params.empty()) return Bad(spec, "empty parameter list");
  std::stringstream ss(params);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return Bad(spec, "parameter '" + item + "' is not name=value");
    const std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    if (p.kind == Kind::kSsmoe && key == "c") {
      double c = 0;
      auto [ptr, ec] = std::from_chars(val.data(), val.data() + val.size(), c);
      if (ec != std::errc() || ptr != val.data() + val.size() || !(c >= 0 && c <= 1))
        return Bad(spec, "c must be a number in [0, 1]");
      p.c = c;
    } else if (p.kind == Kind::kSsmoe && key == "k") {
      int k = 0;
      auto [ptr, ec] = std::from_chars(val.data(), val.data() + val.size(), k);
      if (ec != std::errc() || ptr != val.data() + val.size() || k < 1) return Bad(spec, "k must be a positive integer");
      p.k = k;
    } else if (p.kind == Kind::kSsmoe && key == "sign") {
      if (val == "canonical") p.sign = Sign::kCanonical;
      else if (val == "reference") p.sign = Sign::kReference;
      else return Bad(spec, "sign must be canonical or reference");
    } else if (p.kind == Kind::kTop1 && key == "weight") {
      if (val == "raw") p.top1_weight = Top1Weight::kRaw;
      else if (val == "one") p.top1_weight = Top1Weight::kOne;
      else return Bad(spec, "weight must be raw or one");
    } else {
      return Bad(spec, "unknown parameter '" + key + "' for " + kind);
    }
  }
  return p;
}

std::string RoutingPolicy::ToString() const {
  switch (kind) {
    case Kind::kLearned: return "learned";
    case Kind::kTop1: return std::string("top1:weight=") + (top1_weight == Top1Weight::kRaw ? "raw" : "one");
    case Kind::kSsmoe: {
      char buf[96];
      std::snprintf(buf, sizeof(buf), "ssmoe:c=%g,k=%d,sign=%s", c, k, sign == Sign::kCanonical ? "canonical" : "reference");
      return buf;
    }
  }
  return "?";
}

}  // namespace moeedb
