// A small corpus of short texts (aerodynamics, dogs, snow, ...) and BM25
// computed from term lists with plain loops: the reference the lexical
// index and the collections' lexical search are checked against.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace moeedb::test {

inline const std::vector<std::string> kCorpus = {
    "The boundary layer on a flat plate thickens downstream of the leading edge.",
    "Heat transfer in supersonic flow over a cone was measured in the wind tunnel.",
    "A dog runs through the snow, chasing a red ball.",
    "Dogs running on the beach at sunset.",
    "The pressure distribution on a wing at high angles of attack.",
    "Running shoes for long-distance runners wear out after about 500 miles.",
    "Supersonic wind tunnels need a large pressure ratio to start.",
    "The cat sleeps on the warm windowsill.",
    "Laminar flow over a flat plate: the boundary layer equations and their similarity solution.",
    "A study of turbulent boundary layers in adverse pressure gradients, with heat transfer.",
    "Wing flutter appears when aerodynamic forces couple with the structure's elastic modes.",
    "The snow fell all night and the roads were closed.",
    "Shock waves form ahead of blunt bodies in supersonic and hypersonic flow.",
    "How to train a dog to fetch a ball.",
    "Heat heat heat: a very repetitive sentence about heat.",
    "Pressure.",
};

// BM25 as index/lexical_index.h states it, over the term lists the index itself makes
// (so tokenisation and stemming are the same), with plain loops.
inline std::map<size_t, double> ReferenceBm25(const std::vector<std::vector<std::string>>& docs,
                                       const std::vector<std::string>& query, double k1, double b) {
  const double N = static_cast<double>(docs.size());
  double avgdl = 0;
  for (const auto& d : docs) avgdl += static_cast<double>(d.size());
  avgdl /= N;
  std::map<size_t, double> scores;
  for (size_t i = 0; i < docs.size(); ++i) {
    double s = 0;
    bool any = false;
    for (const auto& t : query) {  // a repeated query word counts once per occurrence
      double n = 0;
      for (const auto& d : docs) n += std::count(d.begin(), d.end(), t) > 0 ? 1 : 0;
      const double f = static_cast<double>(std::count(docs[i].begin(), docs[i].end(), t));
      if (f == 0) continue;
      any = true;
      const double idf = std::log(1 + (N - n + 0.5) / (n + 0.5));
      s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * static_cast<double>(docs[i].size()) / avgdl));
    }
    if (any) scores[i] = s;
  }
  return scores;
}

}  // namespace moeedb::test
