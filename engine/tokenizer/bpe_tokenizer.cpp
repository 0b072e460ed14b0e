#include "engine/tokenizer/bpe_tokenizer.h"

#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/tokenizer/byte_level.h"
#include "base/utf8.h"

namespace moeedb {

using json = nlohmann::json;

namespace {

std::string ToUtf8(const icu::UnicodeString& u) {
  std::string s;
  u.toUTF8String(s);
  return s;
}

struct AddedToken {
  std::string content;
  int32_t id;
  bool lstrip, rstrip;
};

struct RegexSplit {
  std::unique_ptr<icu::RegexPattern> pattern;
  bool invert = false;
};

}  // namespace

struct BpeTokenizer::Impl {
  std::unordered_map<std::string, int32_t> vocab;
  std::unordered_map<int32_t, std::string> id_to_token;
  std::unordered_map<std::string, int32_t> merge_rank;  // "left right" -> rank
  bool ignore_merges = false;
  std::optional<int32_t> unk_id;
  std::vector<AddedToken> added;  // longest first
  std::vector<const icu::Normalizer2*> normalizers;
  // Pre-tokenizer steps, in order: regex splits, then the byte-level step.
  std::vector<RegexSplit> splits;
  bool byte_level = false;
  bool add_prefix_space = false;
  std::vector<int32_t> prefix_ids, suffix_ids;  // post-processor template (single)
  std::vector<std::string> byte_table = ByteToUnicodeTable();
  std::unordered_map<std::string, uint8_t> unicode_to_byte;
  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  Status LoadNormalizer(const json& n, const std::string& src);
  Status LoadPreTokenizer(const json& p, const std::string& src);
  Status LoadPostProcessor(const json& p, const std::string& src);
  Status AddRegex(const std::string& pattern, bool invert, const std::string& src);

  std::vector<std::string> PreTokenize(const std::string& text) const;
  void Bpe(const std::string& word, std::vector<int32_t>* out) const;
};

Status BpeTokenizer::Impl::AddRegex(const std::string& pattern, bool invert, const std::string& src) {
  UErrorCode st = U_ZERO_ERROR;
  UParseError pe;
  RegexSplit s;
  s.pattern.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), 0, pe, st));
  if (U_FAILURE(st)) return Status::NotSupported(src + ": pre-tokenizer regex does not compile: " + pattern);
  s.invert = invert;
  splits.push_back(std::move(s));
  return Status::OK();
}

Status BpeTokenizer::Impl::LoadNormalizer(const json& n, const std::string& src) {
  if (n.is_null()) return Status::OK();
  const std::string type = n.value("type", "");
  UErrorCode st = U_ZERO_ERROR;
  if (type == "Sequence") {
    for (const auto& s : n.value("normalizers", json::array())) MOEEDB_RETURN_IF_ERROR(LoadNormalizer(s, src));
    return Status::OK();
  }
  const icu::Normalizer2* norm = nullptr;
  if (type == "NFC") norm = icu::Normalizer2::getNFCInstance(st);
  else if (type == "NFD") norm = icu::Normalizer2::getNFDInstance(st);
  else if (type == "NFKC") norm = icu::Normalizer2::getNFKCInstance(st);
  else if (type == "NFKD") norm = icu::Normalizer2::getNFKDInstance(st);
  else return Status::NotSupported(src + ": normalizer '" + type + "' is not supported (NFC, NFD, NFKC, NFKD, Sequence)");
  if (U_FAILURE(st) || norm == nullptr) return Status::Internal("ICU normalizer unavailable");
  normalizers.push_back(norm);
  return Status::OK();
}

Status BpeTokenizer::Impl::LoadPreTokenizer(const json& p, const std::string& src) {
  if (p.is_null()) return Status::OK();
  const std::string type = p.value("type", "");
  if (type == "Sequence") {
    for (const auto& s : p.value("pretokenizers", json::array())) MOEEDB_RETURN_IF_ERROR(LoadPreTokenizer(s, src));
    return Status::OK();
  }
  if (type == "ByteLevel") {
    byte_level = true;
    add_prefix_space = p.value("add_prefix_space", false);
    if (p.value("use_regex", true)) MOEEDB_RETURN_IF_ERROR(AddRegex(kGpt2Pattern, false, src));
    return Status::OK();
  }
  if (type == "Split") {
    const std::string behavior = p.value("behavior", "Isolated");
    if (behavior != "Isolated")
      return Status::NotSupported(src + ": Split behavior '" + behavior + "' is not supported (Isolated)");
    const json& pat = p["pattern"];
    std::string regex;
    if (pat.contains("Regex")) {
      regex = pat["Regex"].get<std::string>();
    } else if (pat.contains("String")) {
      // A literal: quote it for ICU.
      regex = "\\Q" + pat["String"].get<std::string>() + "\\E";
    } else {
      return Status::NotSupported(src + ": Split pattern must be Regex or String");
    }
    return AddRegex(regex, p.value("invert", false), src);
  }
  return Status::NotSupported(src + ": pre-tokenizer '" + type + "' is not supported (ByteLevel, Split, Sequence)");
}

Status BpeTokenizer::Impl::LoadPostProcessor(const json& p, const std::string& src) {
  if (p.is_null()) return Status::OK();
  const std::string type = p.value("type", "");
  if (type == "ByteLevel") return Status::OK();  // offsets only
  if (type == "Sequence") {
    for (const auto& s : p.value("processors", json::array())) MOEEDB_RETURN_IF_ERROR(LoadPostProcessor(s, src));
    return Status::OK();
  }
  if (type == "TemplateProcessing") {
    const json& specials = p.value("special_tokens", json::object());
    bool seen_a = false;
    for (const auto& item : p.value("single", json::array())) {
      if (item.contains("Sequence")) {
        seen_a = true;
        continue;
      }
      if (!item.contains("SpecialToken"))
        return Status::NotSupported(src + ": post-processor template item is neither Sequence nor SpecialToken");
      const std::string name = item["SpecialToken"].value("id", "");
      if (!specials.contains(name)) return Status::InvalidArgument(src + ": template names unknown special token " + name);
      for (const auto& id : specials[name].value("ids", json::array()))
        (seen_a ? suffix_ids : prefix_ids).push_back(id.get<int32_t>());
    }
    return Status::OK();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    prefix_ids.push_back(p["cls"][1].get<int32_t>());
    suffix_ids.push_back(p["sep"][1].get<int32_t>());
    return Status::OK();
  }
  return Status::NotSupported(src + ": post-processor '" + type +
                              "' is not supported (ByteLevel, TemplateProcessing, RobertaProcessing, Sequence)");
}

std::vector<std::string> BpeTokenizer::Impl::PreTokenize(const std::string& text) const {
  std::vector<std::string> pieces{text};
  if (add_prefix_space && !text.empty() && text[0] != ' ') pieces[0] = " " + text;
  for (const auto& split : splits) {
    std::vector<std::string> next;
    for (const auto& piece : pieces) {
      icu::UnicodeString u = icu::UnicodeString::fromUTF8(piece);
      UErrorCode st = U_ZERO_ERROR;
      std::unique_ptr<icu::RegexMatcher> m(split.pattern->matcher(u, st));
      int32_t prev = 0;
      while (U_SUCCESS(st) && m->find()) {
        const int32_t b = m->start(st), e = m->end(st);
        if (e == b) continue;  // empty matches split nothing
        if (b > prev) next.push_back(ToUtf8(u.tempSubStringBetween(prev, b)));
        next.push_back(ToUtf8(u.tempSubStringBetween(b, e)));
        prev = e;
      }
      if (prev < u.length()) next.push_back(ToUtf8(u.tempSubStringBetween(prev, u.length())));
    }
    pieces = std::move(next);
  }
  return pieces;
}

void BpeTokenizer::Impl::Bpe(const std::string& word, std::vector<int32_t>* out) const {
  {
    std::lock_guard<std::mutex> lock(cache_mu);
    auto it = cache.find(word);
    if (it != cache.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  auto whole = vocab.find(word);
  if (ignore_merges && whole != vocab.end()) {
    ids.push_back(whole->second);
  } else {
    // Split into characters (UTF-8 sequences), then merge the best-ranked pair
    // until none applies; all occurrences of the best pair merge left to right.
    std::vector<std::string> sym;
    for (size_t i = 0; i < word.size();) {
      size_t len = 1;
      const auto c = static_cast<unsigned char>(word[i]);
      if (c >= 0xF0) len = 4; else if (c >= 0xE0) len = 3; else if (c >= 0xC0) len = 2;
      sym.push_back(word.substr(i, len));
      i += len;
    }
    std::string key;
    while (sym.size() > 1) {
      int32_t best = INT32_MAX;
      size_t best_i = 0;
      for (size_t i = 0; i + 1 < sym.size(); ++i) {
        key.assign(sym[i]).append(" ").append(sym[i + 1]);
        auto it = merge_rank.find(key);
        if (it != merge_rank.end() && it->second < best) {
          best = it->second;
          best_i = i;
        }
      }
      if (best == INT32_MAX) break;
      const std::string left = sym[best_i], right = sym[best_i + 1];
      std::vector<std::string> merged;
      merged.reserve(sym.size());
      for (size_t i = 0; i < sym.size();) {
        if (i + 1 < sym.size() && sym[i] == left && sym[i + 1] == right) {
          merged.push_back(left + right);
          i += 2;
        } else {
          merged.push_back(std::move(sym[i]));
          ++i;
        }
      }
      sym = std::move(merged);
    }
    for (const auto& s : sym) {
      auto it = vocab.find(s);
      if (it != vocab.end()) ids.push_back(it->second);
      else if (unk_id) ids.push_back(*unk_id);
      // else: a symbol outside the vocabulary cannot occur with a complete
      // byte-level alphabet; without one it is dropped as HF does without unk.
    }
  }
  out->insert(out->end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mu);
  if (cache.size() > 200000) cache.clear();
  cache.emplace(word, std::move(ids));
}

BpeTokenizer::BpeTokenizer() : impl_(std::make_unique<Impl>()) {}
BpeTokenizer::~BpeTokenizer() = default;

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot open tokenizer file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return FromJson(ss.str(), path);
}

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromJson(const std::string& text, const std::string& src) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(src + ": not valid JSON: " + e.what());
  }
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
  Impl& im = *t->impl_;
  try {
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
      return Status::InvalidArgument(src + ": no 'model' object (not a HuggingFace tokenizer.json?)");
    const json& m = j["model"];
    if (m.value("type", "BPE") != "BPE")
      return Status::NotSupported(src + ": model type '" + m.value("type", "") + "' is not supported (BPE only)");
    if (!m.contains("vocab") || !m["vocab"].is_object()) return Status::InvalidArgument(src + ": model has no vocab");
    int64_t max_id = -1;
    for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
      const int32_t id = it.value().get<int32_t>();
      im.vocab[it.key()] = id;
      im.id_to_token[id] = it.key();
      max_id = std::max<int64_t>(max_id, id);
    }
    int32_t rank = 0;
    for (const auto& mg : m.value("merges", json::array())) {
      std::string key;
      if (mg.is_string()) key = mg.get<std::string>();
      else if (mg.is_array() && mg.size() == 2) key = mg[0].get<std::string>() + " " + mg[1].get<std::string>();
      else return Status::InvalidArgument(src + ": merge " + std::to_string(rank) + " is malformed");
      im.merge_rank.emplace(key, rank++);
    }
    im.ignore_merges = m.value("ignore_merges", false);
    if (m.contains("unk_token") && m["unk_token"].is_string()) {
      auto it = im.vocab.find(m["unk_token"].get<std::string>());
      if (it != im.vocab.end()) im.unk_id = it->second;
    }
    for (const auto& a : j.value("added_tokens", json::array())) {
      AddedToken at{a.value("content", ""), a.value("id", 0), a.value("lstrip", false), a.value("rstrip", false)};
      if (at.content.empty()) continue;
      im.id_to_token[at.id] = at.content;
      max_id = std::max<int64_t>(max_id, at.id);
      im.added.push_back(std::move(at));
    }
    std::stable_sort(im.added.begin(), im.added.end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
    MOEEDB_RETURN_IF_ERROR(im.LoadNormalizer(j.value("normalizer", json()), src));
    MOEEDB_RETURN_IF_ERROR(im.LoadPreTokenizer(j.value("pre_tokenizer", json()), src));
    MOEEDB_RETURN_IF_ERROR(im.LoadPostProcessor(j.value("post_processor", json()), src));
    if (!im.byte_level)
      return Status::NotSupported(src + ": only byte-level BPE tokenizers are supported (no ByteLevel pre-tokenizer)");
    for (int b = 0; b < 256; ++b) im.unicode_to_byte[im.byte_table[b]] = static_cast<uint8_t>(b);
    t->vocab_size_ = max_id + 1;
  } catch (const json::exception& e) {
    return Status::InvalidArgument(src + ": malformed tokenizer.json: " + e.what());
  }
  return t;
}

std::optional<int32_t> BpeTokenizer::TokenId(const std::string& token) const {
  for (const auto& a : impl_->added)
    if (a.content == token) return a.id;
  auto it = impl_->vocab.find(token);
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}

bool BpeTokenizer::IsAdded(int32_t id) const {
  for (const auto& a : impl_->added)
    if (a.id == id) return true;
  return false;
}

Result<std::vector<int32_t>> BpeTokenizer::Encode(std::string_view text, bool add_special) const {
  size_t bad = 0;
  if (!IsValidUtf8(text, &bad)) return Status::InvalidArgument("invalid UTF-8 at byte " + std::to_string(bad));
  const Impl& im = *impl_;
  std::vector<int32_t> ids;
  if (add_special) ids = im.prefix_ids;

  auto encode_segment = [&](std::string_view seg) {
    if (seg.empty()) return;
    std::string s(seg);
    for (const auto* n : im.normalizers) {
      UErrorCode st = U_ZERO_ERROR;
      icu::UnicodeString u = n->normalize(icu::UnicodeString::fromUTF8(s), st);
      if (U_SUCCESS(st)) s = ToUtf8(u);
    }
    for (const auto& piece : im.PreTokenize(s)) {
      std::string mapped;
      for (unsigned char ch : piece) mapped += im.byte_table[ch];
      im.Bpe(mapped, &ids);
    }
  };

  // Split out added tokens (leftmost, longest first), honouring lstrip/rstrip.
  size_t seg_start = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (const auto& a : im.added)
      if (text.compare(i, a.content.size(), a.content) == 0) { hit = &a; break; }
    if (hit == nullptr) { ++i; continue; }
    size_t seg_end = i, next = i + hit->content.size();
    if (hit->lstrip)
      while (seg_end > seg_start && std::isspace(static_cast<unsigned char>(text[seg_end - 1]))) --seg_end;
    if (hit->rstrip)
      while (next < text.size() && std::isspace(static_cast<unsigned char>(text[next]))) ++next;
    encode_segment(text.substr(seg_start, seg_end - seg_start));
    ids.push_back(hit->id);
    seg_start = i = next;
  }
  encode_segment(text.substr(seg_start));
  if (add_special) ids.insert(ids.end(), im.suffix_ids.begin(), im.suffix_ids.end());
  return ids;
}

Result<std::string> BpeTokenizer::Decode(const std::vector<int32_t>& ids) const {
  const Impl& im = *impl_;
  std::string out;
  for (int32_t id : ids) {
    bool is_added = false;
    for (const auto& a : im.added)
      if (a.id == id) { out += a.content; is_added = true; break; }
    if (is_added) continue;
    auto it = im.id_to_token.find(id);
    if (it == im.id_to_token.end()) return Status::InvalidArgument("unknown token id " + std::to_string(id));
    const std::string& tok = it->second;
    for (size_t i = 0; i < tok.size();) {
      size_t len = 1;
      const auto c = static_cast<unsigned char>(tok[i]);
      if (c >= 0xF0) len = 4; else if (c >= 0xE0) len = 3; else if (c >= 0xC0) len = 2;
      auto b = im.unicode_to_byte.find(tok.substr(i, len));
      if (b != im.unicode_to_byte.end()) out.push_back(static_cast<char>(b->second));
      else out += tok.substr(i, len);
      i += len;
    }
  }
  return out;
}

}  // namespace moeedb
