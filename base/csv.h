// CSV files as rows of fields: what the evaluation sets, the training
// corpora and the training commands read.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb {

// RFC 4180 CSV: fields separated by commas, optionally double-quoted ("" is a
// quote inside a quoted field; quoted fields may span lines). NotFound for an
// unreadable file; InvalidArgument with the line of an unterminated quote.
Result<std::vector<std::vector<std::string>>> ReadCsv(const std::string& path);

}  // namespace moeedb
