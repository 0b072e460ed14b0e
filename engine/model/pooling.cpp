#include "engine/model/pooling.h"

namespace moeedb {

const char* HsPoolingName(HsPooling p) {
  switch (p) {
    case HsPooling::kLast: return "last";
    case HsPooling::kMean: return "mean";
    case HsPooling::kLayersMean: return "layers-mean";
    case HsPooling::kTrained: return "trained";
  }
  return "?";
}

const char* RwPoolingName(RwPooling p) { return p == RwPooling::kLast ? "last" : "mean"; }

bool ParseHsPooling(const std::string& name, HsPooling* out) {
  for (HsPooling p : {HsPooling::kLast, HsPooling::kMean, HsPooling::kLayersMean, HsPooling::kTrained})
    if (name == HsPoolingName(p)) {
      *out = p;
      return true;
    }
  return false;
}

bool ParseRwPooling(const std::string& name, RwPooling* out) {
  for (RwPooling p : {RwPooling::kLast, RwPooling::kMean})
    if (name == RwPoolingName(p)) {
      *out = p;
      return true;
    }
  return false;
}

}  // namespace moeedb
