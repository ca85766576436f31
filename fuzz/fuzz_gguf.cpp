// GGUF files from outside: the header, metadata and tensor table (GgufFile::parse), every
// typed getter on every key the file has, then the model loader's readers of that metadata
// (tokenizer, chat template, sampling defaults, architecture config, weight views, static
// activation scales, identity) through Model::load, and the loaded tokenizer and chat
// template on a short conversation. The bytes are a heap copy of exactly their size
// (MappedFile::from_bytes), so a read one byte past the end is an ASan report.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"

using namespace pllm;

namespace {

// Reads every byte a tensor claims: its bounds were checked against the file at parse time.
uint8_t touch(const TensorInfo& t) {
  if (t.n_bytes == 0) return 0;
  return uint8_t(t.data[0] ^ t.data[t.n_bytes - 1]);
}

void exercise(const Model& m) {
  const std::vector<ChatMessage> chat = {{"system", "Be brief."}, {"user", "Hi <|im_end|> there \xC3\xA9"}};
  auto text = render_chat(m.chat_family(), m.chat_template(), chat, true);
  if (!text.ok()) return;
  const Tokenizer& tok = m.tokenizer();
  auto ids = tok.encode(*text, true, true);
  if (!ids.ok()) return;
  StreamDecoder sd(tok);
  for (const TokenId id : *ids) (void)sd.push(id);
  (void)sd.flush();
  // Every token's text (bounded: a file may hold millions).
  for (TokenId id = 0; id < tok.n_vocab() && id < 4096; ++id) (void)tok.token_to_piece(id, true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = GgufFile::parse(MappedFile::from_bytes({data, size}, "fuzz.gguf"));
  if (!file.ok()) return 0;
  const GgufFile& g = **file;
  for (const auto& kv : g.metadata()) {
    const std::string& k = kv.first;
    (void)g.get_string(k), (void)g.get_u64(k), (void)g.get_f64(k), (void)g.get_bool(k);
    (void)g.get_string_array(k), (void)g.get_f64_array(k), (void)g.get_i64_array(k);
  }
  volatile uint8_t sink = 0;
  for (const TensorInfo& t : g.tensors()) sink = sink ^ touch(t);
  // The full load reads the architecture's config and weights; a file without a supported
  // architecture may still be a vocabulary (vocab-only load).
  auto m = Model::load(*file, false);
  if (!m.ok()) m = Model::load(*file, true);
  if (m.ok()) exercise(**m);
  return 0;
}
