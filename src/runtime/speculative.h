// Speculative decoding: a drafter guesses the next tokens cheaply, the target model checks
// them all in one batched pass, and every guess the target would have drawn itself is kept.
//
// Drafters (one interface, chosen per request):
//   lookup  the continuation of the latest earlier occurrence of the sequence's last n-gram
//           (prompt lookup: no model, no memory);
//   model   a second, smaller model with the same vocabulary (its own session and KV cache on
//           the target's engine, so it shares the threads);
//   skip    the target itself with some layers left out (self-speculation: no second model,
//           no second cache: the draft's positions are truncated and the verify pass rewrites
//           them); which layers is measured by calibrate_skip_layers and saved.
//
// Every drafter guesses greedily, so a draft is a point mass q = delta(d). The standard
// acceptance rule (accept d with probability min(1, p(d) / q(d)) = p(d); on rejection draw from
// (p - q)+ normalised = p without d) is then exactly "draw from the target's row as plain
// decoding would and keep d when the draw is d": generator.cpp draws each token once, from
// the target's logits for its position, with the same sampler and history. The int16 and
// exact kernels give a row the same logits whatever the step's row count, so greedy output
// is plain decoding's bit for bit and seeded sampling draws the same tokens.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/model.h"

namespace pllm {

class Session;

enum class DraftKind { none, lookup, model, skip };
const char* draft_kind_name(DraftKind k);

struct DraftSpec {
  DraftKind kind = DraftKind::none;
  int max_tokens = 8;  // the most tokens drafted per verify pass (the adaptive length's cap)
  // lookup: the n-gram lengths tried, longest first.
  int ngram_min = 1, ngram_max = 4;
  std::shared_ptr<const Model> model;  // model: the draft model
  std::vector<int> skip_layers;        // skip: the target's layers the draft leaves out
};

struct DraftStats {
  int passes = 0;    // verify passes with at least one guess
  int drafted = 0;   // guesses verified
  int accepted = 0;  // guesses kept
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual DraftKind kind() const = 0;
  // Appends up to max_n guesses of what follows `tokens` (the target's history plus the token
  // just drawn, which the target has not evaluated yet) to out. May run forward passes: on the
  // draft model's session, or on the target session itself (skip), which it leaves holding
  // exactly the tokens it held before. Cancelled when the target session's cancel is requested.
  virtual Result<void> draft(Session& target, std::span<const int32_t> tokens, int max_n,
                             std::vector<int32_t>& out) = 0;
  // Drafting costs no forward pass (lookup): the adaptive length then counts only the verify rows.
  virtual bool free() const { return false; }
  // Called once the prompt is in the target session (its history: `tokens`): a draft model reads
  // it now, as part of the prompt's time, rather than at its first guess.
  virtual Result<void> prepare(Session& /*target*/, std::span<const int32_t> /*tokens*/) { return {}; }
};

// A drafter for `target` and sessions of its model (the draft model's vocabulary must equal the
// target's; the skip layers must exist and leave at least one). A draft model's session runs on
// the target's engine.
Result<std::unique_ptr<Drafter>> make_drafter(const DraftSpec& spec, Session& target);

// How many tokens to draft next: the count that maximises the expected tokens per second from
// the measured acceptance rate and step times (a drafter that runs forward passes drafts one
// guess first, to measure its cost). Falls to 0 (plain decoding) when drafts do not pay,
// probing one guess again now and then so a change in the text is noticed: after 16 plain
// steps, twice as many after each probe that kept nothing (after 256 where even guesses all
// kept would not pay at the measured costs), and never more often than keeps the probes'
// measured loss within 5 % of the plain decoding time.
class DraftLength {
 public:
  // Between min_tokens and max_tokens (min_tokens == max_tokens: a fixed length).
  DraftLength(int min_tokens, int max_tokens, bool free_drafts);
  int next();
  // A verify pass: `drafted` guesses, `accepted` of them kept; verify_ms: the target's pass
  // (drafted + 1 rows), draft_ms: the drafting before it.
  void record_verify(int drafted, int accepted, double verify_ms, double draft_ms);
  // A plain decode step (no draft) of ms.
  void record_plain(double ms);
  double acceptance() const { return accept_; }

 private:
  int choose();

  int min_, max_;
  bool free_;               // drafting costs nothing measurable (lookup)
  double kept_ = 1.2, rejected_ = 0.8;  // decayed counts of kept drafts and of rejections
  double accept_ = 0.6;     // per-token acceptance estimate (the prior above: drafts often pay)
  static constexpr int kMaxLength = 32;
  double plain_ms_ = 0;     // one-row step
  std::array<double, kMaxLength + 1> pass_ms_{};  // [k]: a verify pass of k guesses (0: not measured)
  double draft_ms_ = 0;     // ms per drafted token
  int since_probe_ = 0;     // plain steps since the last draft
  int probe_every_ = 16;    // plain steps between probes now (at least)
  double probe_loss_ms_ = 0;  // what the last one-guess pass cost beyond the plain steps it saved
};

// Self-speculation's layer choice, measured: over `tokens` (a calibration text), layers are
// left out one by one, each time the one whose removal keeps the most greedy next-token
// predictions equal to the full model's, while the expected speed-up (acceptance at the
// resulting agreement, draft cost = the kept layers' share) grows. Saves nothing: see
// save_skip_layers.
struct SkipCalibration {
  std::vector<int> skip_layers;
  double agreement = 0;    // fraction of positions whose greedy prediction the draft kept
  double speedup = 1;      // the expected decode speed-up at the best draft length
  int draft_tokens = 0;    // that length
  int n_tokens = 0;        // calibration positions
};
Result<SkipCalibration> calibrate_skip_layers(Session& target, std::span<const int32_t> tokens, int max_draft);
// JSON {"model_identity": "<hex>", "skip_layers": [...], "agreement", "speedup", "draft_tokens"}.
Result<void> save_skip_layers(const std::string& path, const Model& m, const SkipCalibration& c);
// The skip layers saved for model m (another model's file is an error).
Result<std::vector<int>> load_skip_layers(const std::string& path, const Model& m);

}  // namespace pllm
