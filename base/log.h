// One place every layer writes its operational log lines to (a node's
// warnings: a change log that went back, a replica rebuilt), so a process
// chooses where they go: standard error by default, a test or a server's
// own sink otherwise.
#pragma once

#include <functional>
#include <string>

namespace moeedb {

using LogSink = std::function<void(const std::string& line)>;

// Writes `line` (no trailing newline) to the current sink. Thread-safe.
void LogLine(const std::string& line);
// Replaces the sink (nullptr: standard error again); returns the previous one.
LogSink SetLogSink(LogSink sink);

}  // namespace moeedb
