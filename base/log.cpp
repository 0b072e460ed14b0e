#include "base/log.h"

#include <iostream>
#include <mutex>

namespace moeedb {

namespace {

std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}

LogSink& Sink() {
  static LogSink sink;
  return sink;
}

}  // namespace

void LogLine(const std::string& line) {
  std::lock_guard lock(Mu());
  if (Sink()) Sink()(line);
  else std::cerr << line << "\n";
}

LogSink SetLogSink(LogSink sink) {
  std::lock_guard lock(Mu());
  LogSink previous = std::move(Sink());
  Sink() = std::move(sink);
  return previous;
}

}  // namespace moeedb
