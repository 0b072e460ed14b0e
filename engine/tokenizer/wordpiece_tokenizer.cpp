#include "engine/tokenizer/wordpiece_tokenizer.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "base/utf8.h"

namespace moeedb {

using json = nlohmann::json;

namespace {

struct AddedToken {
  std::string content;
  int32_t id;
};

// The library's is_chinese_char: the CJK Unified Ideographs blocks and their
// extensions and compatibility forms (not Japanese or Korean scripts).
bool IsCjkIdeograph(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool IsWhitespace(UChar32 c) { return c == '\t' || c == '\n' || c == '\r' || u_isUWhiteSpace(c); }

// What the library's clean_text drops: control, format, surrogate and
// private-use characters (Cc, Cf, Cs, Co), tab and newlines excepted.
// Unassigned code points stay (the library keeps them: "a\u0378b" is one
// unknown word there, not "ab").
bool IsControl(UChar32 c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const int8_t t = u_charType(c);
  return t == U_CONTROL_CHAR || t == U_FORMAT_CHAR || t == U_SURROGATE || t == U_PRIVATE_USE_CHAR;
}

bool IsPunctuation(UChar32 c) {
  if (c < 128) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  const int8_t t = u_charType(c);
  return t == U_DASH_PUNCTUATION || t == U_START_PUNCTUATION || t == U_END_PUNCTUATION ||
         t == U_CONNECTOR_PUNCTUATION || t == U_OTHER_PUNCTUATION || t == U_INITIAL_PUNCTUATION ||
         t == U_FINAL_PUNCTUATION;
}

void AppendUtf8(UChar32 c, std::string* out) {
  icu::UnicodeString u(c);
  u.toUTF8String(*out);
}

}  // namespace

struct WordPieceTokenizer::Impl {
  std::unordered_map<std::string, int32_t> vocab;
  std::unordered_map<int32_t, std::string> id_to_token;
  std::vector<AddedToken> added;  // longest first
  int32_t unk_id = 0;
  std::string prefix = "##";
  int64_t max_word_chars = 100;
  bool clean_text = true, chinese_chars = true, strip_accents = true, lowercase = true;
  std::vector<int32_t> prefix_ids, suffix_ids;  // the template's [CLS] and [SEP]
  int64_t max_length = 0;                        // truncation: 0 none

  // BertNormalizer then BertPreTokenizer: the words of a text (no added token in it).
  std::vector<std::string> Words(std::string_view text) const;
  void WordPiece(const std::string& word, std::vector<int32_t>* ids) const;
};

std::vector<std::string> WordPieceTokenizer::Impl::Words(std::string_view text) const {
  icu::UnicodeString in = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  icu::UnicodeString cleaned;
  for (int32_t i = 0; i < in.length();) {
    const UChar32 c = in.char32At(i);
    i += U16_LENGTH(c);
    if (clean_text) {
      if (c == 0 || c == 0xFFFD || IsControl(c)) continue;
      if (IsWhitespace(c)) {
        cleaned.append(static_cast<UChar32>(' '));
        continue;
      }
    }
    if (chinese_chars && IsCjkIdeograph(c)) {
      cleaned.append(static_cast<UChar32>(' ')).append(c).append(static_cast<UChar32>(' '));
      continue;
    }
    cleaned.append(c);
  }
  if (strip_accents) {
    UErrorCode st = U_ZERO_ERROR;
    const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(st);
    if (U_SUCCESS(st)) {
      icu::UnicodeString decomposed = nfd->normalize(cleaned, st);
      if (U_SUCCESS(st)) {
        cleaned.remove();
        for (int32_t i = 0; i < decomposed.length();) {
          const UChar32 c = decomposed.char32At(i);
          i += U16_LENGTH(c);
          if (u_charType(c) != U_NON_SPACING_MARK) cleaned.append(c);
        }
      }
    }
  }
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (int32_t i = 0; i < cleaned.length();) {
    UChar32 c = cleaned.char32At(i);
    i += U16_LENGTH(c);
    if (lowercase) c = u_tolower(c);
    if (IsWhitespace(c)) {
      flush();
    } else if (IsPunctuation(c)) {
      flush();
      AppendUtf8(c, &word);
      flush();
    } else {
      AppendUtf8(c, &word);
    }
  }
  flush();
  return words;
}

void WordPieceTokenizer::Impl::WordPiece(const std::string& word, std::vector<int32_t>* ids) const {
  // Character boundaries of the word, in bytes.
  std::vector<size_t> bounds;
  for (size_t i = 0; i < word.size(); ++i)
    if ((static_cast<unsigned char>(word[i]) & 0xC0) != 0x80) bounds.push_back(i);
  bounds.push_back(word.size());
  const size_t chars = bounds.size() - 1;
  if (static_cast<int64_t>(chars) > max_word_chars) {
    ids->push_back(unk_id);
    return;
  }
  std::vector<int32_t> pieces;
  size_t start = 0;
  while (start < chars) {
    size_t end = chars;
    int32_t found = -1;
    for (; end > start; --end) {
      std::string piece = word.substr(bounds[start], bounds[end] - bounds[start]);
      if (start > 0) piece = prefix + piece;
      auto it = vocab.find(piece);
      if (it != vocab.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {  // no split of the whole word: it is unknown
      ids->push_back(unk_id);
      return;
    }
    pieces.push_back(found);
    start = end;
  }
  ids->insert(ids->end(), pieces.begin(), pieces.end());
}

WordPieceTokenizer::WordPieceTokenizer() : impl_(new Impl()) {}
WordPieceTokenizer::~WordPieceTokenizer() = default;

Result<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::FromJson(const std::string& text, const std::string& src) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument(src + ": not a JSON object");
  std::unique_ptr<WordPieceTokenizer> t(new WordPieceTokenizer());
  Impl& im = *t->impl_;
  try {
    const json& m = j.at("model");
    if (m.value("type", "") != "WordPiece")
      return Status::InvalidArgument(src + ": model type is not WordPiece");
    if (!m.contains("vocab") || !m["vocab"].is_object()) return Status::InvalidArgument(src + ": model has no vocab");
    int64_t max_id = -1;
    for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
      const int32_t id = it.value().get<int32_t>();
      if (id < 0) return Status::InvalidArgument(src + ": negative id for '" + it.key() + "'");
      im.vocab[it.key()] = id;
      im.id_to_token[id] = it.key();
      max_id = std::max<int64_t>(max_id, id);
    }
    const std::string unk = m.value("unk_token", "[UNK]");
    auto u = im.vocab.find(unk);
    if (u == im.vocab.end()) return Status::InvalidArgument(src + ": unk_token '" + unk + "' is not in the vocabulary");
    im.unk_id = u->second;
    im.prefix = m.value("continuing_subword_prefix", "##");
    im.max_word_chars = m.value("max_input_chars_per_word", int64_t{100});
    for (const auto& a : j.value("added_tokens", json::array())) {
      AddedToken at{a.value("content", ""), a.value("id", 0)};
      if (at.content.empty()) continue;
      im.id_to_token[at.id] = at.content;
      max_id = std::max<int64_t>(max_id, at.id);
      im.added.push_back(std::move(at));
    }
    std::stable_sort(im.added.begin(), im.added.end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
    const json n = j.value("normalizer", json());
    if (!n.is_null()) {
      if (n.value("type", "") != "BertNormalizer")
        return Status::NotSupported(src + ": normalizer '" + n.value("type", "") + "' is not supported (BertNormalizer)");
      im.clean_text = n.value("clean_text", true);
      im.chinese_chars = n.value("handle_chinese_chars", true);
      im.lowercase = n.value("lowercase", true);
      im.strip_accents = n.contains("strip_accents") && n["strip_accents"].is_boolean() ? n["strip_accents"].get<bool>()
                                                                                        : im.lowercase;
    } else {
      im.clean_text = im.chinese_chars = im.strip_accents = im.lowercase = false;
    }
    const json p = j.value("pre_tokenizer", json());
    if (p.is_null() || p.value("type", "") != "BertPreTokenizer")
      return Status::NotSupported(src + ": pre-tokenizer '" + (p.is_null() ? std::string("none") : p.value("type", "")) +
                                  "' is not supported (BertPreTokenizer)");
    const json pp = j.value("post_processor", json());
    if (!pp.is_null()) {
      const std::string type = pp.value("type", "");
      if (type == "TemplateProcessing") {
        const json& specials = pp.at("special_tokens");
        bool seen_a = false;
        for (const auto& item : pp.at("single")) {
          if (item.contains("Sequence")) {
            seen_a = true;
            continue;
          }
          const std::string name = item.at("SpecialToken").value("id", "");
          if (!specials.contains(name)) return Status::InvalidArgument(src + ": template names unknown token " + name);
          for (const auto& id : specials[name].at("ids")) (seen_a ? im.suffix_ids : im.prefix_ids).push_back(id.get<int32_t>());
        }
      } else if (type == "BertProcessing") {
        im.prefix_ids.push_back(pp.at("cls").at(1).get<int32_t>());
        im.suffix_ids.push_back(pp.at("sep").at(1).get<int32_t>());
      } else {
        return Status::NotSupported(src + ": post-processor '" + type +
                                    "' is not supported (TemplateProcessing, BertProcessing)");
      }
    }
    const json tr = j.value("truncation", json());
    if (tr.is_object()) {
      im.max_length = tr.value("max_length", int64_t{0});
      const int64_t specials = static_cast<int64_t>(im.prefix_ids.size() + im.suffix_ids.size());
      if (im.max_length <= specials)
        return Status::InvalidArgument(src + ": truncation max_length " + std::to_string(im.max_length) +
                                       " leaves no room for a token beside the template's");
    }
    t->vocab_size_ = max_id + 1;
  } catch (const json::exception& e) {
    return Status::InvalidArgument(src + ": malformed tokenizer.json: " + e.what());
  }
  return t;
}

Result<std::vector<int32_t>> WordPieceTokenizer::Encode(std::string_view text, bool add_special) const {
  size_t bad = 0;
  if (!IsValidUtf8(text, &bad)) return Status::InvalidArgument("invalid UTF-8 at byte " + std::to_string(bad));
  const Impl& im = *impl_;
  std::vector<int32_t> ids;
  auto encode_segment = [&](std::string_view seg) {
    for (const auto& w : im.Words(seg)) im.WordPiece(w, &ids);
  };
  // Added tokens ([CLS], [MASK], ...) split out of the raw text, leftmost, longest first.
  size_t seg_start = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (const auto& a : im.added)
      if (text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    encode_segment(text.substr(seg_start, i - seg_start));
    ids.push_back(hit->id);
    i += hit->content.size();
    seg_start = i;
  }
  encode_segment(text.substr(seg_start));
  if (add_special) {
    if (im.max_length > 0) {
      const size_t room = static_cast<size_t>(im.max_length) - im.prefix_ids.size() - im.suffix_ids.size();
      if (ids.size() > room) ids.resize(room);
    }
    ids.insert(ids.begin(), im.prefix_ids.begin(), im.prefix_ids.end());
    ids.insert(ids.end(), im.suffix_ids.begin(), im.suffix_ids.end());
  } else if (im.max_length > 0 && ids.size() > static_cast<size_t>(im.max_length)) {
    ids.resize(static_cast<size_t>(im.max_length));
  }
  return ids;
}

Result<std::string> WordPieceTokenizer::Decode(const std::vector<int32_t>& ids) const {
  // The library's cleanup, applied to each piece with the space put before it.
  static const std::pair<const char*, const char*> kCleanup[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = impl_->id_to_token.find(ids[i]);
    if (it == impl_->id_to_token.end()) return Status::InvalidArgument("unknown token id " + std::to_string(ids[i]));
    std::string piece = it->second;
    if (i > 0 && piece.compare(0, impl_->prefix.size(), impl_->prefix) == 0) {
      piece = piece.substr(impl_->prefix.size());
    } else if (i > 0) {
      piece = " " + piece;
    }
    for (const auto& [from, to] : kCleanup) {
      const std::string f(from), t(to);
      for (size_t p = piece.find(f); p != std::string::npos; p = piece.find(f, p + t.size())) piece.replace(p, f.size(), t);
    }
    out += piece;
  }
  return out;
}

std::optional<int32_t> WordPieceTokenizer::TokenId(const std::string& token) const {
  for (const auto& a : impl_->added)
    if (a.content == token) return a.id;
  auto it = impl_->vocab.find(token);
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}

bool WordPieceTokenizer::IsAdded(int32_t id) const {
  for (const auto& a : impl_->added)
    if (a.id == id) return true;
  return false;
}

}  // namespace moeedb
