#include "engine/tokenizer/bpe_trainer.h"

#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_set>

#include "engine/tokenizer/byte_level.h"
#include "base/utf8.h"

namespace moeedb {

struct BpeTrainer::Regex {
  std::unique_ptr<icu::RegexPattern> pattern;
  const icu::Normalizer2* nfc = nullptr;
};

BpeTrainer::BpeTrainer(BpeTrainerOptions options) : options_(std::move(options)), regex_(new Regex) {
  UErrorCode st = U_ZERO_ERROR;
  UParseError pe;
  regex_->pattern.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(kGpt2Pattern), 0, pe, st));
  st = U_ZERO_ERROR;
  regex_->nfc = icu::Normalizer2::getNFCInstance(st);
}

BpeTrainer::~BpeTrainer() = default;

Status BpeTrainer::AddText(std::string_view text) {
  size_t bad = 0;
  if (!IsValidUtf8(text, &bad)) return Status::InvalidArgument("invalid UTF-8 at byte " + std::to_string(bad));
  if (regex_->pattern == nullptr || regex_->nfc == nullptr) return Status::Internal("ICU regex or NFC unavailable");
  // Line by line: the regex never matches across a newline except in runs of
  // whitespace, and short inputs keep ICU's work per match small.
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    UErrorCode st = U_ZERO_ERROR;
    icu::UnicodeString u =
        regex_->nfc->normalize(icu::UnicodeString::fromUTF8(icu::StringPiece(text.data() + start, end - start)), st);
    std::unique_ptr<icu::RegexMatcher> m(regex_->pattern->matcher(u, st));
    std::string piece;
    while (U_SUCCESS(st) && m->find()) {
      const int32_t b = m->start(st), e = m->end(st);
      if (e == b) continue;
      piece.clear();
      u.tempSubStringBetween(b, e).toUTF8String(piece);
      ++word_counts_[piece];
      ++words_;
    }
    if (U_FAILURE(st)) return Status::Internal("ICU regex failed on the corpus");
    start = end;
  }
  return Status::OK();
}

namespace {

uint64_t PairKey(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

struct HeapEntry {
  int64_t count;
  uint64_t pair;
  // Max count first; among equal counts the smaller pair key (older symbols).
  bool operator<(const HeapEntry& o) const { return count != o.count ? count < o.count : pair > o.pair; }
};

}  // namespace

Result<std::string> BpeTrainer::Train(BpeTrainingStats* stats) {
  const int64_t nspecial = static_cast<int64_t>(options_.special_tokens.size());
  if (options_.vocab_size < nspecial + 256)
    return Status::InvalidArgument("vocab size " + std::to_string(options_.vocab_size) +
                                   " is below the specials + 256 byte tokens (" + std::to_string(nspecial + 256) + ")");
  if (word_counts_.empty()) return Status::InvalidArgument("no text to train on");

  // Words in a fixed order (sorted), as byte-symbol sequences. Symbol s < 256
  // is byte s; symbol 256 + m is the result of merge m.
  std::vector<std::pair<std::string, int64_t>> sorted(word_counts_.begin(), word_counts_.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<int32_t>> words(sorted.size());
  std::vector<int64_t> counts(sorted.size());
  for (size_t w = 0; w < sorted.size(); ++w) {
    for (unsigned char ch : sorted[w].first) words[w].push_back(ch);
    counts[w] = sorted[w].second;
  }
  std::vector<std::string> symbol_bytes(256);
  for (int b = 0; b < 256; ++b) symbol_bytes[b] = std::string(1, static_cast<char>(b));

  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;  // words that contain(ed) the pair
  for (size_t w = 0; w < words.size(); ++w)
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const uint64_t p = PairKey(words[w][i], words[w][i + 1]);
      pair_count[p] += counts[w];
      auto& list = where[p];
      if (list.empty() || list.back() != static_cast<int32_t>(w)) list.push_back(static_cast<int32_t>(w));
    }
  std::priority_queue<HeapEntry> heap;
  for (const auto& [p, c] : pair_count) heap.push({c, p});

  std::vector<std::pair<int32_t, int32_t>> merges;
  const int64_t max_merges = options_.vocab_size - nspecial - 256;
  std::unordered_set<uint64_t> touched;
  while (static_cast<int64_t>(merges.size()) < max_merges && !heap.empty()) {
    const HeapEntry top = heap.top();
    heap.pop();
    auto pc = pair_count.find(top.pair);
    const int64_t current = pc == pair_count.end() ? 0 : pc->second;
    if (current != top.count) {  // stale entry: requeue with the live count
      if (current > 0) heap.push({current, top.pair});
      continue;
    }
    if (current < options_.min_frequency) break;
    const int32_t a = static_cast<int32_t>(top.pair >> 32), b = static_cast<int32_t>(top.pair & 0xffffffffu);
    const int32_t merged = static_cast<int32_t>(256 + merges.size());
    merges.emplace_back(a, b);
    symbol_bytes.push_back(symbol_bytes[a] + symbol_bytes[b]);
    touched.clear();
    std::vector<int32_t> affected = std::move(where[top.pair]);
    where.erase(top.pair);
    for (int32_t w : affected) {
      auto& seq = words[w];
      bool has = false;
      for (size_t i = 0; i + 1 < seq.size() && !has; ++i) has = seq[i] == a && seq[i + 1] == b;
      if (!has) continue;
      const int64_t c = counts[w];
      for (size_t i = 0; i + 1 < seq.size(); ++i) {
        const uint64_t p = PairKey(seq[i], seq[i + 1]);
        pair_count[p] -= c;
        touched.insert(p);
      }
      std::vector<int32_t> next;
      next.reserve(seq.size());
      for (size_t i = 0; i < seq.size();) {
        if (i + 1 < seq.size() && seq[i] == a && seq[i + 1] == b) {
          next.push_back(merged);
          i += 2;
        } else {
          next.push_back(seq[i++]);
        }
      }
      seq = std::move(next);
      for (size_t i = 0; i + 1 < seq.size(); ++i) {
        const uint64_t p = PairKey(seq[i], seq[i + 1]);
        pair_count[p] += c;
        touched.insert(p);
        if (seq[i] == merged || seq[i + 1] == merged) {  // a pair the word did not have before
          auto& list = where[p];
          if (list.empty() || list.back() != w) list.push_back(w);
        }
      }
    }
    for (uint64_t p : touched) {
      auto it = pair_count.find(p);
      if (it == pair_count.end()) continue;
      if (it->second <= 0) {
        pair_count.erase(it);
      } else {
        heap.push({it->second, p});
      }
    }
  }

  // tokenizer.json. Ids: specials, then the 256 bytes, then one per merge.
  const std::vector<std::string> table = ByteToUnicodeTable();
  auto visible = [&](const std::string& bytes) {
    std::string s;
    for (unsigned char ch : bytes) s += table[ch];
    return s;
  };
  using ojson = nlohmann::ordered_json;
  ojson added = ojson::array();
  for (int64_t i = 0; i < nspecial; ++i)
    added.push_back({{"id", i}, {"content", options_.special_tokens[i]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  ojson vocab = ojson::object();
  for (int64_t i = 0; i < nspecial; ++i) vocab[options_.special_tokens[i]] = i;
  for (size_t s = 0; s < symbol_bytes.size(); ++s) {
    const std::string v = visible(symbol_bytes[s]);
    if (vocab.contains(v)) return Status::Internal("duplicate token " + v);  // cannot happen: merges are unique
    vocab[v] = nspecial + static_cast<int64_t>(s);
  }
  ojson merge_list = ojson::array();
  for (const auto& [l, r] : merges) merge_list.push_back(visible(symbol_bytes[l]) + " " + visible(symbol_bytes[r]));
  const ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  ojson j = {{"version", "1.0"},
             {"truncation", nullptr},
             {"padding", nullptr},
             {"added_tokens", added},
             {"normalizer", {{"type", "NFC"}}},
             {"pre_tokenizer", byte_level},
             {"post_processor", byte_level},
             {"decoder", byte_level},
             {"model",
              {{"type", "BPE"},
               {"dropout", nullptr},
               {"unk_token", nullptr},
               {"continuing_subword_prefix", nullptr},
               {"end_of_word_suffix", nullptr},
               {"fuse_unk", false},
               {"byte_fallback", false},
               {"vocab", vocab},
               {"merges", merge_list}}}};
  if (stats != nullptr) {
    stats->words = words_;
    stats->unique_words = static_cast<int64_t>(word_counts_.size());
    stats->merges = static_cast<int64_t>(merges.size());
    stats->vocab_size = nspecial + static_cast<int64_t>(symbol_bytes.size());
  }
  return j.dump(1);
}

}  // namespace moeedb
