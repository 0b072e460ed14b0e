#include "eval/harness/harness_util.h"

namespace moeedb::eval::harness {

nlohmann::json SetupJson(const EvalInput& in) {
  if (in.setup) return nlohmann::json::parse(in.setup->InfoJson());
  if (in.vectors) return {{"vectors", in.label}, {"dim_hs", in.vectors->dim()}};
  return {{"baseline", "tfidf"}};
}

}  // namespace moeedb::eval::harness
