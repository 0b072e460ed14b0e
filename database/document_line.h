// One line of a JSONL documents file (what `moeedb ingest` reads):
// {"id": non-empty string, "text": non-blank string, "metadata": object?}.
#pragma once

#include <string>

#include "base/status.h"
#include "storage/store.h"

namespace moeedb {

// The document (no vectors yet), or InvalidArgument saying what is wrong:
// invalid UTF-8, not JSON, not an object, a bad id, text or metadata.
Result<StoredDocument> ParseDocumentLine(const std::string& line);

}  // namespace moeedb
